"""Episode runner: output layout, resume, interruption by SIGKILL, replay of logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from vical.envs import make_env
from vical.run import load_results, run_eval
from vical.run.runner import episode_name, episode_seed
from vical.spec import select_tasks

TASKS = "taxi/state1,cliffwalking/base,cartpole/seed41"


def test_run_writes_every_episode_file(tmp_path):
    tasks = select_tasks(TASKS)
    s = run_eval(tasks, tmp_path / "run", runs=2, workers=1, progress=False)
    assert s.finished == 6 and not s.failed
    eps = sorted(p.name for p in (tmp_path / "run" / "episodes").iterdir())
    assert eps == sorted(episode_name(t.id, k) for t in tasks for k in range(2))
    for name in eps:
        d = tmp_path / "run" / "episodes" / name
        r = json.loads((d / "eval_result.json").read_text())
        assert (d / "trajectory.png").stat().st_size > 0
        assert len(list((d / "frames").glob("*.png"))) == r["steps"] + 1
        lines = [json.loads(x) for x in (d / "log.jsonl").read_text().splitlines()]
        assert lines[0]["type"] == "start" and lines[-1]["type"] == "end"
        assert [x["action"] for x in lines if x["type"] == "step"] == r["actions"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["agent"] == "random" and manifest["runs_per_task"] == 2
    assert "gymnasium" in manifest["versions"]
    assert not (tmp_path / "run" / ".partial").exists() or not any(
        (tmp_path / "run" / ".partial").iterdir()
    )


def test_results_replay_exactly_in_a_fresh_env(tmp_path):
    run_eval(select_tasks(TASKS), tmp_path / "run", runs=1, workers=1, progress=False)
    for r in load_results(tmp_path / "run"):
        env = make_env(r.task_id)
        from vical.envs.core import frame_sha256

        hashes = [frame_sha256(env.reset())]
        for a in r.actions:
            hashes.append(env.step(a).frame_sha256)
        assert hashes == r.frame_hashes
        assert (env.score(), env.passed(), env.outcome) == (r.score, r.passed, r.outcome)


def test_same_seed_same_actions_and_distinct_episode_seeds(tmp_path):
    tasks = select_tasks("taxi/state1")
    run_eval(tasks, tmp_path / "a", runs=2, workers=1, progress=False, run_seed=7)
    run_eval(tasks, tmp_path / "b", runs=2, workers=1, progress=False, run_seed=7)
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert [r.actions for r in a] == [r.actions for r in b]
    assert episode_seed(7, "taxi/state1", 0) != episode_seed(7, "taxi/state1", 1)


def test_resume_skips_finished_and_refuses_other_settings(tmp_path):
    tasks = select_tasks(TASKS)
    run_eval(tasks[:1], tmp_path / "run", runs=1, workers=1, progress=False)
    first = tmp_path / "run" / "episodes" / episode_name(tasks[0].id, 0) / "eval_result.json"
    before = first.read_bytes()
    s = run_eval(tasks, tmp_path / "run", runs=1, workers=1, progress=False)
    assert s.skipped == 1 and s.finished == 2
    assert first.read_bytes() == before
    with pytest.raises(ValueError, match="seed"):
        run_eval(tasks, tmp_path / "run", runs=1, workers=1, progress=False, run_seed=99)


def test_failure_modes_recorded(tmp_path):
    run_eval(
        select_tasks("cartpole/*,cliffwalking/*"),
        tmp_path / "run",
        runs=1,
        workers=1,
        progress=False,
    )
    for r in load_results(tmp_path / "run"):
        if r.passed:
            assert r.failure_mode is None
        elif r.outcome == "Time Out":
            assert r.failure_mode == "timeout" and r.steps == r.max_steps
        else:
            assert r.failure_mode == "early_termination" and r.steps < r.max_steps


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_then_resume_gives_exact_episode_set(tmp_path, workers):
    out = tmp_path / "run"
    pattern = "taxi/*,cliffwalking/*,cartpole/*"
    cmd = [
        sys.executable,
        "-m",
        "vical.cli",
        "eval",
        "--tasks",
        pattern,
        "--runs",
        "2",
        "--out",
        str(out),
        "--workers",
        str(workers),
        "--no-report",
    ]
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy"}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        n = len(list(out.glob("episodes/*/eval_result.json")))
        if n >= 3:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_with = {p.parent.name: p.read_bytes() for p in out.glob("episodes/*/eval_result.json")}
    assert 3 <= len(killed_with) < 30, "the kill must land part-way through the run"
    # every episode folder present after the kill is whole
    for d in (out / "episodes").iterdir():
        assert (d / "eval_result.json").exists(), f"truncated episode {d.name}"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = {episode_name(t.id, k) for t in select_tasks(pattern) for k in range(2)}
    got = [p.name for p in (out / "episodes").iterdir()]
    assert sorted(got) == sorted(expected)  # exactly the expected, none duplicated
    for name, data in killed_with.items():  # finished episodes were not redone
        assert (out / "episodes" / name / "eval_result.json").read_bytes() == data
    results = load_results(out)
    assert len(results) == len(expected)
    for r in results:
        assert len(r.frame_hashes) == r.steps + 1
    leftovers = list((out / ".partial").iterdir()) if (out / ".partial").exists() else []
    assert not leftovers
