"""The mutation fuzzer (tests/fuzz_bundles/mutate.py), a small seeded count for CI.

Every mutation of an honest model bundle, re-signed with the submitter's own key,
must end in a verdict: rejected with one line, a failing replay, or accepted with
the ranked fields, the condition and the coverage unchanged (and a leaderboard that
adds and builds it). ``nox -s fuzz`` runs the large count.
"""

from __future__ import annotations

import io
import os

import pytest
from fuzz_bundles.mutate import FAILURES, campaign, honest_source

COUNT = int(os.environ.get("VICAL_FUZZ_COUNT", "40"))


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    return honest_source(tmp_path_factory.mktemp("fuzz"))


def test_every_mutation_is_a_verdict(honest):
    src, pub = honest
    log = io.StringIO()
    tally = campaign(src, pub, range(COUNT), log)
    assert sum(tally.values()) == COUNT
    assert not any(tally.get(k) for k in FAILURES), log.getvalue()
    assert tally["rejected"] > 0
