"""Heavy sweeps (marker: slow; run by `nox -s slow`): the full random reference."""

from __future__ import annotations

import pytest

from vical.report.table import report_run
from vical.run import RunOptions, load_results, run_eval
from vical.spec import all_tasks

pytestmark = pytest.mark.slow


def test_random_reference_over_every_task(tmp_path):
    tasks = all_tasks()
    s = run_eval(
        tasks,
        tmp_path / "rand",
        options=RunOptions(runs=3, workers=2, frames="none", demos=False, progress=False),
    )
    assert not s.failed, s.failed[:5]
    results = load_results(tmp_path / "rand")
    assert len(results) == 3 * len(tasks)
    for r in results:
        assert 0.0 <= r.score <= 100.0 and r.steps <= r.max_steps
    rep = report_run(tmp_path / "rand")
    assert rep.n_tasks == len(tasks)
    assert rep.columns["All"].score is not None
