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

from tests.conftest import interrupt_group, processes_naming
from vical.envs import make_env
from vical.run import RunOptions, load_results, run_eval
from vical.run.results import FILE_MODE
from vical.run.runner import (
    RunFolderError,
    episode_name,
    episode_problems,
    episode_seed,
    fit_fields,
    lock_run_folder,
)
from vical.serve import BaselineServer
from vical.spec import select_tasks

TASKS = "taxi/state1,cliffwalking/base,cartpole/seed41"


def test_run_writes_every_episode_file(tmp_path):
    tasks = select_tasks(TASKS)
    s = run_eval(
        tasks, tmp_path / "run", options=RunOptions(runs=2, workers=1, progress=False, frames="all")
    )
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
    run_eval(
        select_tasks(TASKS), tmp_path / "run", options=RunOptions(runs=1, workers=1, progress=False)
    )
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
    run_eval(
        tasks, tmp_path / "a", options=RunOptions(runs=2, workers=1, progress=False, run_seed=7)
    )
    run_eval(
        tasks, tmp_path / "b", options=RunOptions(runs=2, workers=1, progress=False, run_seed=7)
    )
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert [r.actions for r in a] == [r.actions for r in b]
    assert episode_seed(7, "taxi/state1", 0) != episode_seed(7, "taxi/state1", 1)


def test_resume_skips_finished_and_refuses_other_settings(tmp_path):
    tasks = select_tasks(TASKS)
    run_eval(tasks[:1], tmp_path / "run", options=RunOptions(runs=1, workers=1, progress=False))
    first = tmp_path / "run" / "episodes" / episode_name(tasks[0].id, 0) / "eval_result.json"
    before = first.read_bytes()
    s = run_eval(tasks, tmp_path / "run", options=RunOptions(runs=1, workers=1, progress=False))
    assert s.skipped == 1 and s.finished == 2
    assert first.read_bytes() == before
    with pytest.raises(ValueError, match="seed"):
        run_eval(
            tasks,
            tmp_path / "run",
            options=RunOptions(runs=1, workers=1, progress=False, run_seed=99),
        )


def test_failure_modes_recorded(tmp_path):
    run_eval(
        select_tasks("cartpole/*,cliffwalking/*"),
        tmp_path / "run",
        options=RunOptions(runs=1, workers=1, progress=False),
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
    return processes_naming(str(out))


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
    """Wait for ``after`` finished episodes, then Ctrl-C the command ``times`` times."""
    rc, took, _, err = interrupt_group(
        cmd,
        lambda p: len(list(out.glob("episodes/*/eval_result.json"))) >= after,
        times,
        env=ENV,
        gap=0.2,
        start_within=120,
    )
    return rc, took, err


@pytest.mark.parametrize("times", [1, 2])
def test_sigint_stops_the_random_run_and_the_same_command_resumes(tmp_path, times):
    out = tmp_path / "run"
    cmd = _vical(
        "eval", "--tasks", MANY, "--runs", "1", "--out", str(out), "-j", "2", "--no-report"
    )
    rc, took, err = _interrupt(cmd, out, times)
    assert rc == 130, (rc, took, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if times == 1:
        assert "to resume, run vical eval" in err
    time.sleep(0.5)
    assert _processes_writing(out) == []
    kept = _assert_whole(out)
    expected = {episode_name(t.id, k) for t in select_tasks(MANY) for k in range(1)}
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
        assert rc == 130, (rc, took, err)
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
            run_eval(
                select_tasks("taxi/state1"), out, options=RunOptions(workers=1, progress=False)
            )
        r = subprocess.run(
            _vical("eval", "--tasks", "taxi/state1", "--out", str(out)),
            env=ENV, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2 and "--out" in r.stderr and "Traceback" not in r.stderr
    run_eval(
        select_tasks("taxi/state1"), out, options=RunOptions(workers=1, progress=False)
    )  # free again


def test_resume_re_runs_a_damaged_episode(tmp_path):
    out = tmp_path / "run"
    tasks = select_tasks(TASKS)
    run_eval(tasks, out, options=RunOptions(workers=1, progress=False))
    victim = out / "episodes" / episode_name(tasks[0].id, 0)
    (victim / "trajectory.png").unlink()
    with open(out / "episodes" / episode_name(tasks[1].id, 0) / "log.jsonl", "a") as f:
        f.write("{}\n")
    assert episode_problems(victim) == ["trajectory.png missing"]
    s = run_eval(tasks, out, options=RunOptions(workers=1, progress=False))
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
        run_eval(tasks, out, options=RunOptions(workers=1, progress=False, frames=mode))
        for r in load_results(out):
            folder = out / "episodes" / episode_name(r.task_id, r.run_index)
            n = len(list((folder / "frames").glob("*.png"))) if (folder / "frames").exists() else 0
            want = r.steps + 1 if mode == "all" or (mode == "failed" and not r.passed) else 0
            assert n == want, (mode, r.task_id)
            assert (folder / "trajectory.png").exists()
        modes = {p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}
        assert modes == {FILE_MODE}, modes
    with pytest.raises(ValueError, match="frames must be one of"):
        run_eval(
            tasks, tmp_path / "x", options=RunOptions(workers=1, progress=False, frames="some")
        )


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


# ------------------------------------------------------------------ infrastructure failures
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _eval_api(endpoint: str, out: Path, tasks: str, *extra: str, env=None, timeout=120):
    cmd = _vical(
        "eval", "--backend", "openai-chat", "--endpoint", endpoint, "--model", "first",
        "--tasks", tasks, "--out", str(out), "-j", "1", "--no-report", *extra,
    )  # fmt: skip
    t0 = time.time()
    r = subprocess.run(cmd, env=env or ENV, capture_output=True, text=True, timeout=timeout)
    return r, time.time() - t0


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_a_closed_port_fails_at_once_with_one_line_naming_the_endpoint(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    r, took = _eval_api(url, tmp_path / "run", "taxi/state1")
    assert r.returncode == 2, (took, r.stderr)
    (line,) = _error_lines(r.stderr)
    assert url in line and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "episodes").exists()


def test_a_server_failing_every_request_fails_the_preflight(tmp_path):
    with BaselineServer() as srv:
        cmd = _vical(
            "eval", "--backend", "openai-chat", "--endpoint", srv.openai_base_url,
            "--model", "fault-500", "--tasks", "taxi/state1", "--out", str(tmp_path / "r"),
        )  # fmt: skip
        r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        (line,) = _error_lines(r.stderr)
        assert srv.openai_base_url in line and "500" in line


def _results(out: Path) -> dict[str, str | None]:
    from vical.run.results import load_all_results

    return {episode_name(r.task_id, r.run_index): r.failure_mode for r in load_all_results(out)}


def test_failed_episodes_are_reported_and_exactly_they_are_re_run(tmp_path):
    out = tmp_path / "run"
    three = "taxi/state1,taxi/state2,cliffwalking/base"
    with BaselineServer(retry_after=0.1) as srv:
        r, _ = _eval_api(srv.openai_base_url, out, "taxi/state1")
        assert r.returncode == 0, r.stderr
        first = (out / "episodes" / "taxi__state1__r0" / "eval_result.json").read_bytes()
        srv.fault_rate, srv.fault_kinds = 1.0, ("500", "not-json", "binary", "html")
        r, took = _eval_api(srv.openai_base_url, out, three, "--transport-retries", "1")
        assert r.returncode == 1, (took, r.stderr)
        assert "2 episode(s) ended in an infrastructure failure" in r.stderr
        assert r.stderr.count("infrastructure failure taxi__state2__r0") == 1
        failed = {k for k, v in _results(out).items() if v == "api_error"}
        assert failed == {"taxi__state2__r0", "cliffwalking__base__r0"}
        assert load_results(out)[0].task_id == "taxi/state1"  # not results
        # the report keeps them apart
        rep = subprocess.run(
            _vical("report", str(out)), env=ENV, capture_output=True, text=True, timeout=120
        )
        assert rep.returncode == 0, rep.stderr
        doc = json.loads((out / "report.json").read_text())
        (eps,) = doc["infrastructure_failures"].values()
        assert {e["episode"] for e in eps} == failed
        # the server is fixed: the same command re-runs exactly the failed episodes
        srv.fault_rate = 0.0
        n_before = len(srv.requests)
        r, _ = _eval_api(srv.openai_base_url, out, three, "--transport-retries", "1")
        assert r.returncode == 0, r.stderr
        assert "retried 2 episode(s)" in r.stderr and "2 episodes run" in r.stdout
        assert "1 already finished" in r.stdout
        assert set(_results(out).values()) <= {None, "timeout", "early_termination"}
        assert (out / "episodes" / "taxi__state1__r0" / "eval_result.json").read_bytes() == first
        assert sorted(p.name.rsplit(".", 1)[0] for p in (out / "failed-attempts").iterdir()) == (
            sorted(failed)
        )
        assert len(srv.requests) > n_before


def test_no_retry_errors_keeps_infrastructure_failures(tmp_path):
    out = tmp_path / "run"
    with BaselineServer(fault_rate=1.0, fault_kinds=("500",)) as srv:
        r, _ = _eval_api(srv.openai_base_url, out, "taxi/state1", "--transport-retries", "0")
        assert r.returncode == 1
        srv.fault_rate = 0.0
        r, _ = _eval_api(srv.openai_base_url, out, "taxi/state1", "--no-retry-errors")
        assert "0 episodes run" in r.stdout and "1 already finished" in r.stdout
        assert _results(out) == {"taxi__state1__r0": "api_error"}


def test_the_circuit_breaker_stops_the_run(tmp_path):
    out = tmp_path / "run"
    with BaselineServer(fault_rate=1.0, fault_kinds=("500",)) as srv:
        r, took = _eval_api(
            srv.openai_base_url, out, "taxi/*", "--runs", "2", "--transport-retries", "0",
            "--max-consecutive-errors", "3",
        )  # fmt: skip
        assert r.returncode == 1, took
        assert "stopped after 3 infrastructure failures in a row (7 episode(s) not started)" in (
            r.stderr.replace("\n", " ")
        )
        assert len(_results(out)) == 3


@pytest.mark.parametrize("kind", ["hang", "429"])
def test_a_silent_server_or_a_day_long_retry_after_ends_within_the_bound(tmp_path, kind):
    """A never-replying server costs request-timeout x (retries + 1); a Retry-After above
    --max-retry-after is not waited for. Either way: an infrastructure failure, reported."""
    out = tmp_path / "run"
    with BaselineServer(fault_rate=1.0, fault_kinds=(kind,), retry_after=86400) as srv:
        r, took = _eval_api(
            srv.openai_base_url, out, "taxi/state1", "--request-timeout", "1",
            "--transport-retries", "1", "--max-retry-after", "60",
        )  # fmt: skip
        assert r.returncode == 1, (took, r.stderr)
        assert "infrastructure failure" in r.stderr
        assert _results(out) == {"taxi__state1__r0": "api_error"}
        log = (out / "episodes" / "taxi__state1__r0" / "log.jsonl").read_text()
        errors = [json.loads(x) for x in log.splitlines() if '"api_error"' in x]
        errors = [e for e in errors if e.get("type") == "api_error"]
        if kind == "429":
            assert len(errors) == 1 and "86400" in errors[0]["gave_up"]
        else:
            assert len(errors) == 2 and all(e["reason"] == "timeout" for e in errors)


def test_secrets_reach_no_file_of_a_run_or_its_bundle(tmp_path):
    """A key echoed back by a 401 and credentials in the endpoint URL are redacted from
    every file the run writes and every file of its bundle."""
    import tarfile

    key, password = "sk-test-VERYSECRET-0123456789", "hunter2-pass"
    out = tmp_path / "run"
    env = {**ENV, "MY_KEY": key}
    with BaselineServer() as srv:
        url = srv.openai_base_url.replace("http://", f"http://alice:{password}@")
        extra = ("--api-key-env", "MY_KEY")
        r, _ = _eval_api(url, out, "taxi/state1", *extra, env=env)
        assert r.returncode == 0, r.stderr
        srv.fault_rate, srv.fault_kinds = 1.0, ("401-echo",)
        r, _ = _eval_api(url, out, "taxi/state1,taxi/state2", *extra, env=env)
        assert r.returncode == 1
        echoed = [e for e in srv.requests if e.get("fault") == "401-echo"]
        assert echoed, "the server must have echoed the key"
        subprocess.run(_vical("keygen", "--out", str(tmp_path / "k")), env=ENV, check=True,
                       capture_output=True)  # fmt: skip
        b = subprocess.run(
            _vical("submit", str(out), "--key", str(tmp_path / "k"), "--partial",
                   "--out", str(tmp_path / "b.tar.gz")),
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert b.returncode == 0, b.stderr
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        texts += [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
    texts += [r.stdout.encode(), r.stderr.encode(), b.stdout.encode(), b.stderr.encode()]
    for blob in texts:
        assert key.encode() not in blob and password.encode() not in blob
    assert any(b"alice" not in t and b"127.0.0.1" in t for t in texts)
