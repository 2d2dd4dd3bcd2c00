"""The mutation fuzzer (tests/fuzz_bundles/mutate.py), a small seeded count for CI.

Every mutation of an honest bundle of each kind (a model backend's run, the expert's
plan run, an Inspect-imported run, a world-model evaluation, a coupled run),
re-signed with the submitter's own key, must end in a verdict: rejected with one line,
a failing replay, or accepted with the ranked fields, the agent's kind, the condition
and the coverage unchanged (and a leaderboard that adds and builds it). ``nox -s fuzz``
runs the large count.
"""

from __future__ import annotations

import io
import os

import pytest
from fuzz_bundles.mutate import FAILURES, KINDS, campaign, honest_source

# mutations per kind; the model run's campaign is the longest-standing, and larger
COUNTS = {"run": 24, "expert": 8, "inspect": 6, "wm": 5, "coupled": 8}
SCALE = float(os.environ.get("VICAL_FUZZ_SCALE", "1"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_mutation_is_a_verdict(tmp_path, kind, monkeypatch):
    if kind == "inspect":
        pytest.importorskip("inspect_ai")
    import vical.agent.plans

    # the expert's source replaces the packaged plan file for this process: put it back
    monkeypatch.setattr(vical.agent.plans, "DEFAULT_PLANS", vical.agent.plans.DEFAULT_PLANS)
    src, pub, cases = honest_source(tmp_path, kind)
    count = max(1, int(COUNTS[kind] * SCALE))
    log = io.StringIO()
    tally = campaign(src, pub, range(count), log, cases)
    assert sum(tally.values()) == count
    assert not any(tally.get(k) for k in FAILURES), log.getvalue()
    assert tally["rejected"] > 0
