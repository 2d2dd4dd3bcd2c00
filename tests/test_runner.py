"""Episode runner: output layout, resume, interruption by SIGKILL, replay of logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vical.agent.server import BaselineServer
from vical.envs import make_env
from vical.run import load_results, run_eval
from vical.run.results import FILE_MODE
from vical.run.runner import (
    RunFolderError,
    episode_name,
    episode_problems,
    episode_seed,
    fit_fields,
    lock_run_folder,
)
from vical.spec import select_tasks

TASKS = "taxi/state1,cliffwalking/base,cartpole/seed41"


def test_run_writes_every_episode_file(tmp_path):
    tasks = select_tasks(TASKS)
    s = run_eval(tasks, tmp_path / "run", runs=2, workers=1, progress=False, frames="all")
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


# ---------------------------------------------------------------------------
# interrupts, faults, resume validation, locking (runs that stop when asked)
# ---------------------------------------------------------------------------
ENV = {**os.environ, "SDL_VIDEODRIVER": "dummy", "COLUMNS": "80"}
# enough episodes that an interrupt always lands mid-run
MANY = "taxi/*,cliffwalking/*,lavacrossing/*,cartpole/*,mountaincar/*,acrobot/*"


def _vical(*args: str) -> list[str]:
    return [sys.executable, "-m", "vical.cli", *args]


def _processes_writing(out: Path) -> list[int]:
    """Live processes whose command line names this run folder (parent or workers)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if str(out).encode() in cmd and state != "Z":
            pids.append(int(d.name))
    return pids


def _wait_for_episodes(out: Path, n: int, proc, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if len(list(out.glob("episodes/*/eval_result.json"))) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} episodes after {timeout}s (rc {proc.poll()})")


def _assert_whole(out: Path, partial_ok: bool = False) -> set[str]:
    """Every episode folder is whole; no half-written one is left (unless the parent
    was SIGKILLed: then ``.partial/`` is cleared by the next resume)."""
    names = set()
    for d in (out / "episodes").iterdir():
        assert episode_problems(d) == [], d.name
        names.add(d.name)
    partial = out / ".partial"
    assert partial_ok or not partial.exists() or not any(partial.iterdir())
    return names


def _interrupt(cmd: list[str], out: Path, times: int, after: int = 1) -> tuple[int, float, str]:
    """Start ``cmd`` in its own process group, wait for ``after`` episodes, then send
    SIGINT to the group ``times`` times (as a terminal's Ctrl-C does)."""
    proc = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        _wait_for_episodes(out, after, proc)
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        for _ in range(times - 1):
            time.sleep(0.2)
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        return proc.returncode, time.time() - t0, err.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_stops_the_random_run_and_the_same_command_resumes(tmp_path, times):
    out = tmp_path / "run"
    cmd = _vical(
        "eval", "--tasks", MANY, "--runs", "3", "--out", str(out), "-j", "2", "--no-report"
    )
    rc, took, err = _interrupt(cmd, out, times)
    assert rc == 130 and took < 10, (rc, took, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if times == 1:
        assert "to resume, run vical eval" in err
    time.sleep(0.5)
    assert _processes_writing(out) == []
    kept = _assert_whole(out)
    expected = {episode_name(t.id, k) for t in select_tasks(MANY) for k in range(3)}
    assert kept < expected
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _assert_whole(out) == expected


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_stops_an_api_run_with_slow_replies(tmp_path, times):
    out = tmp_path / "run"
    with BaselineServer(delay=0.4) as srv:
        cmd = _vical(
            "eval", "--backend", "openai-chat", "--endpoint", srv.openai_base_url,
            "--model", "first", "--tasks", "taxi/state1,taxi/state2,cliffwalking/base",
            "--runs", "4", "--out", str(out), "-j", "2", "--no-report",
        )  # fmt: skip
        rc, took, err = _interrupt(cmd, out, times)
        assert rc == 130 and took < 10, (rc, took, err)
        assert "Traceback" not in err, err
        time.sleep(0.5)
        assert _processes_writing(out) == []
        kept = _assert_whole(out)
        assert kept
        srv.delay = 0.0
        done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        expected = {
            episode_name(t.id, k)
            for t in select_tasks("taxi/state1,taxi/state2,cliffwalking/base")
            for k in range(4)
        }
        assert _assert_whole(out) == expected


def test_kill_9_of_the_main_process_alone_never_leaves_an_incomplete_episode(tmp_path):
    """20 kills of only the parent at random moments: its workers die with it (no
    orphan writes into the folder), and every resume finds only whole episodes."""
    import random

    out = tmp_path / "run"
    pattern = "taxi/*,cliffwalking/*,lavacrossing/*,cartpole/*"
    cmd = _vical(
        "eval", "--tasks", pattern, "--runs", "6", "--out", str(out), "-j", "2", "--no-report"
    )
    rng = random.Random(13)
    seen: dict[str, bytes] = {}
    for _ in range(20):
        proc = subprocess.Popen(
            cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        time.sleep(rng.uniform(1.0, 3.5))
        proc.kill()  # SIGKILL to the parent only
        proc.wait()
        time.sleep(0.3)
        assert _processes_writing(out) == [], "a worker outlived its parent"
        for name in _assert_whole(out, partial_ok=True) if (out / "episodes").exists() else ():
            data = (out / "episodes" / name / "eval_result.json").read_bytes()
            assert seen.setdefault(name, data) == data, f"{name} was redone"
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    expected = {episode_name(t.id, k) for t in select_tasks(pattern) for k in range(6)}
    assert _assert_whole(out) == expected
    assert not (out / "damaged").exists()


def test_a_second_writer_is_refused(tmp_path):
    out = tmp_path / "run"
    with lock_run_folder(out):
        with pytest.raises(RunFolderError, match="in use by vical pid"):
            run_eval(select_tasks("taxi/state1"), out, workers=1, progress=False)
        r = subprocess.run(
            _vical("eval", "--tasks", "taxi/state1", "--out", str(out)),
            env=ENV, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2 and "--out" in r.stderr and "Traceback" not in r.stderr
    run_eval(select_tasks("taxi/state1"), out, workers=1, progress=False)  # free again


def test_resume_re_runs_a_damaged_episode(tmp_path):
    out = tmp_path / "run"
    tasks = select_tasks(TASKS)
    run_eval(tasks, out, workers=1, progress=False)
    victim = out / "episodes" / episode_name(tasks[0].id, 0)
    (victim / "trajectory.png").unlink()
    with open(out / "episodes" / episode_name(tasks[1].id, 0) / "log.jsonl", "a") as f:
        f.write("{}\n")
    assert episode_problems(victim) == ["trajectory.png missing"]
    s = run_eval(tasks, out, workers=1, progress=False)
    assert s.finished == 2 and s.skipped == 1 and len(s.repaired) == 2
    assert len(list((out / "damaged").iterdir())) == 2
    _assert_whole(out)


def test_resume_names_the_changed_setting_and_its_flag(tmp_path):
    out = tmp_path / "run"
    with BaselineServer() as srv:
        base = [
            "eval",
            "--backend",
            "openai-chat",
            "--endpoint",
            srv.openai_base_url,
            "--model",
            "first",
            "--tasks",
            "taxi/state1",
            "--out",
            str(out),
            "--no-report",
        ]
        r = subprocess.run(_vical(*base), env=ENV, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(
            _vical(*base, "--temperature", "0.7", "--seed", "3"),
            env=ENV, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2
        assert "temperature was None, now 0.7: drop --temperature" in r.stderr
        assert "pass --seed 0" in r.stderr and "{" not in r.stderr
        # settings that cannot change a result may change on resume
        r = subprocess.run(
            _vical(*base, "--request-timeout", "30", "--rate-limit", "6000", "--tasks",
                   "taxi/state1,taxi/state2"),
            env=ENV, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "1 episodes run" in r.stdout


def test_frames_modes_and_one_file_mode(tmp_path):
    tasks = select_tasks("cartpole/seed41,taxi/state1")
    for mode in ("none", "failed", "all"):
        out = tmp_path / mode
        run_eval(tasks, out, workers=1, progress=False, frames=mode)
        for r in load_results(out):
            folder = out / "episodes" / episode_name(r.task_id, r.run_index)
            n = len(list((folder / "frames").glob("*.png"))) if (folder / "frames").exists() else 0
            want = r.steps + 1 if mode == "all" or (mode == "failed" and not r.passed) else 0
            assert n == want, (mode, r.task_id)
            assert (folder / "trajectory.png").exists()
        modes = {p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}
        assert modes == {FILE_MODE}, modes
    with pytest.raises(ValueError, match="frames must be one of"):
        run_eval(tasks, tmp_path / "x", workers=1, progress=False, frames="some")


def test_progress_fields_are_dropped_not_cut():
    fields = ["S 17.4", "P 11%", "err 2", "12.3k tok", "$0.12", "seaquest/dive-230"]
    assert fit_fields(fields, 80) == "  ".join(fields)
    assert fit_fields(fields, 20) == "S 17.4  P 11%  err 2"
    assert fit_fields(fields, 5) == ""
    for width in range(0, 60):
        text = fit_fields(fields, width)
        assert len(text) <= width and "…" not in text
        assert all(part in fields for part in text.split("  ") if part)


def test_progress_line_fits_80_columns(tmp_path):
    """The live display, rendered in an 80-column terminal, never wraps or ellipsises."""
    r = subprocess.run(
        _vical("eval", "--tasks", "taxi/state1,taxi/state2,cliffwalking/base", "--out",
               str(tmp_path / "run"), "-j", "1", "--no-report"),
        env={**ENV, "COLUMNS": "80", "FORCE_COLOR": "0", "TTY_COMPATIBLE": "1",
             "TTY_INTERACTIVE": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    import re

    for line in re.split(r"[\r\n]", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.stderr)):
        assert len(line) <= 80, line
        assert "…" not in line, line
