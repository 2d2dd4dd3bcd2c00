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
import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_bundles.mutate import FAILURES, KINDS, campaign, honest_source

TESTS = Path(__file__).resolve().parent

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


def test_the_fuzzers_peak_memory_is_its_own_not_its_parents():
    """The fuzzer's report of its peak memory is its own: started by a process holding
    400 MiB, it reports far less (getrusage's ru_maxrss, which keeps the parent's mark
    across fork and exec, would report the parent's 400 MiB)."""
    child = "from fuzz_bundles.mutate import peak_rss_mib; print(peak_rss_mib())"
    parent = (
        "import subprocess, sys\n"
        "held = b'x' * (400 * 1024 * 1024)\n"
        f"out = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True,\n"
        "                     text=True, check=True).stdout\n"
        "print(out.strip(), len(held))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    assert int(out[1]) == 400 * 1024 * 1024  # the parent held it while the child ran
    assert float(out[0]) < 300, f"the fuzzer reports {out[0]} MiB, its parent's mark"
