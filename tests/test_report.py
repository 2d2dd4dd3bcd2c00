"""Table-1 aggregation: per-task mean over runs, per-env mean, equal env weights."""

from __future__ import annotations

import pytest

from vical.report.table import build_report, render_markdown
from vical.run.results import EvalResult


def res(env, variant, k, score, passed, types=("Maze",), memory="Single", dynamics="Static"):
    return EvalResult(
        task_id=f"{env}/{variant}",
        env=env,
        variant=variant,
        run_index=k,
        agent="random",
        seed=0,
        score=score,
        passed=passed,
        outcome="Time Out",
        failure_mode=None,
        steps=1,
        max_steps=1,
        actions=["x"],
        frame_hashes=["a", "b"],
        tags={"types": list(types), "memory": memory, "dynamics": dynamics},
        wall_seconds=0,
        agent_seconds=0,
        started_at="t",
        finished_at="t",
        vical_version="0",
    )


def test_equal_weight_across_environments():
    results = [
        # env a: two tasks; task a/1 has two runs (mean 50), task a/2 one run (100) -> env 75
        res("a", "1", 0, 40, False),
        res("a", "1", 1, 60, True),
        res("a", "2", 0, 100, True),
        # env b: one task, 10 -> env 10 ; Shooter, Multiple, Dynamic
        res(
            "b",
            "1",
            0,
            10,
            False,
            types=("Shooter", "Dodge"),
            memory="Multiple",
            dynamics="Dynamic",
        ),
    ]
    r = build_report(results, "run")
    assert r.columns["All"].score == pytest.approx((75 + 10) / 2)
    assert r.columns["All"].pass_rate == pytest.approx((75 + 0) / 2)
    assert r.columns["Maze"].score == pytest.approx(75)
    assert r.columns["Shooter"].score == r.columns["Dodge"].score == pytest.approx(10)
    assert r.columns["Multiple"].n_envs == 1 and r.columns["Sport"].score is None
    md = render_markdown([r])
    assert "| run (random) | 75.0 | 75 |" in md
    assert "Random (paper)" in md


def test_empty_run_is_an_error():
    with pytest.raises(ValueError, match="no finished episodes"):
        build_report([], "x")
