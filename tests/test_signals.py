"""One signal contract for every long command, tested as an operator meets it.

``docker stop``, ``podman stop``, Kubernetes and systemd send SIGTERM to the main
process (and SIGKILL a few seconds later); a terminal sends SIGINT to the whole
process group, and an impatient person sends it twice. For every long command:

* SIGTERM means what SIGINT means: the command stops within 10 s with status 130
  and one ``interrupted:`` line, never a traceback (the servers ``serve-baseline``,
  ``play`` and ``view``, which run until stopped, end with status 0);
* nothing is left half-written, even when a second signal follows the first;
* ``vical eval`` and ``vical audit`` send no model request after the first signal;
* running the same command again finishes the work.

Commands whose signal handling is tested elsewhere are listed in ``ELSEWHERE`` (and
:func:`test_every_long_command_has_a_signal_test` holds the list to the command line).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import HANG

from tests.conftest import processes_naming
from vical.outcomes import episode_name
from vical.run.runner import episode_problems
from vical.serve import BaselineServer
from vical.spec import select_tasks

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "SDL_VIDEODRIVER": "dummy", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
API_TASKS = "taxi/state1,taxi/state2,cliffwalking/base"
# enough episodes that an interrupt lands mid-run
MANY = "taxi/*,cliffwalking/*,lavacrossing/*,cartpole/*"
# a request may be on the wire while the signal is delivered; after this much, none
# (the pool used to notice a signal only at its next look, up to 0.2 s later, and its
# workers went on sending requests until then)
SLACK = 0.05

# Long commands whose signal handling other test files hold (file: test).
ELSEWHERE = {
    "play": "tests/test_play.py::test_play_command_stops_on_sigterm_mid_episode",
    "view": "tests/test_view.py::test_view_stops_on_sigterm_after_replaying_frames",
    "serve-baseline": (
        "tests/test_serve.py::"
        "test_serve_baseline_names_its_models_refuses_others_and_stops_on_sigterm"
    ),
    "wm eval": "tests/test_cli_wm.py::test_wm_eval_stops_on_a_signal_and_says_what_is_left",
    "hub serve": "tests/test_hub_e2e.py::test_sigterm_lets_the_upload_in_flight_finish",
    "hub worker": "tests/test_hub_e2e.py::test_sigterm_lets_the_worker_finish_its_job",
}


def _vical(*args: str) -> list[str]:
    return [sys.executable, "-m", "vical.cli", *args]


def handles_sigterm(p: subprocess.Popen) -> bool:
    """Whether the process has its own SIGTERM handler yet (the kernel's caught-signal
    mask in /proc): before that, during its imports, SIGTERM's default action ends it."""
    try:
        status = Path(f"/proc/{p.pid}/status").read_text()
    except OSError:
        return False
    caught = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def signalled(
    cmd: list[str],
    started: Callable[[subprocess.Popen], bool],
    sigs: list[tuple[int, float]],
    *,
    group: bool = False,
    start_within: float = 180.0,
    env: dict[str, str] | None = None,
) -> tuple[int, float, float, str, str]:
    """Run ``cmd`` in its own session; once ``started(proc)``, send each ``(signal,
    pause before it)`` to the main process (as a container engine does) or, with
    ``group``, to its process group (as a terminal does). Returns (status, time of
    the first signal, seconds from it to the exit, stdout, stderr); SIGKILLs whatever
    is left."""
    proc = subprocess.Popen(
        cmd,
        env={**ENV, **(env or {})},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.time() + start_within
        while not started(proc):
            if proc.poll() is not None or time.time() > deadline:
                out, err = proc.communicate()
                raise AssertionError(f"the command never got going: {err.decode()[-2000:]}")
            time.sleep(0.02)
        t0 = None
        for sig, pause in sigs:
            time.sleep(pause)
            if t0 is None:
                t0 = time.time()
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        assert t0 is not None
        out, err = proc.communicate(timeout=HANG)
        return proc.returncode, t0, time.time() - t0, out.decode(), err.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().split(")")[-1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] != "Z":
                kids.append(int(d.name))
    return kids


def assert_stopped(rc: int, took: float, err: str) -> None:
    assert rc == 130, (rc, took, err[-2000:])
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    assert "\ninterrupted: " in err, err[-2000:]


def _no_leftovers(folder: Path) -> list[str]:
    """Temporary files and folders anywhere under ``folder``."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.name.endswith(".tmp") or ".merge-" in p.name
    )


# --------------------------------------------------------------------- the server


class Arrivals:
    """A baseline server that notes when each model request arrives."""

    def __init__(self, delay: float):
        self.server = BaselineServer(delay=delay)
        self.times: list[float] = []
        choose = self.server.choose_fault

        def noted(conv, n_before):
            self.times.append(time.time())
            return choose(conv, n_before)

        self.server.choose_fault = noted  # type: ignore[method-assign]

    def flowing(self) -> bool:
        """A request arrived in the last few milliseconds: the workers are mid-episode."""
        return bool(self.times) and time.time() - self.times[-1] < 0.02

    def after(self, t0: float) -> list[float]:
        return [round(t - t0, 3) for t in self.times if t > t0 + SLACK]


@pytest.fixture
def arrivals():
    a = Arrivals(delay=0.02)
    with a.server:
        yield a


# ------------------------------------------------------------------------- eval


def _episodes(out: Path) -> set[str]:
    names = set()
    for d in (out / "episodes").iterdir():
        assert episode_problems(d) == [], d.name
        names.add(d.name)
    return names


def _assert_nothing_partial(out: Path) -> None:
    partial = out / ".partial"
    assert not partial.exists() or not any(partial.iterdir()), list(partial.iterdir())
    assert _no_leftovers(out) == []


def _mid_episode(srv: Arrivals, out: Path) -> Callable[[subprocess.Popen], bool]:
    """An episode is finished and requests are flowing (not a pause between episodes)."""
    return lambda p: srv.flowing() and bool(list(out.glob("episodes/*/eval_result.json")))


def _api_eval(srv: Arrivals, out: Path) -> list[str]:
    return _vical(
        "eval", "--backend", "openai-chat", "--endpoint", srv.server.openai_base_url,
        "--model", "first", "--tasks", API_TASKS, "--runs", "4", "--out", str(out),
        "-j", "2", "--no-report", "--skip-doctor",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("sig", "group"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["SIGTERM-to-the-process", "SIGINT-to-the-group"],
)
def test_eval_stops_sends_no_request_after_the_signal_and_resumes(tmp_path, arrivals, sig, group):
    out = tmp_path / "run"
    cmd = _api_eval(arrivals, out)
    rc, t0, took, _, err = signalled(cmd, _mid_episode(arrivals, out), [(sig, 0)], group=group)
    assert_stopped(rc, took, err)
    assert "to resume, run vical eval" in err
    assert arrivals.after(t0) == [], "model requests after the signal (seconds after it)"
    time.sleep(0.3)
    assert processes_naming(str(out)) == []
    _assert_nothing_partial(out)
    kept = _episodes(out)
    expected = {episode_name(t.id, k) for t in select_tasks(API_TASKS) for k in range(4)}
    assert kept < expected
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert _episodes(out) == expected
    _assert_nothing_partial(out)


@pytest.mark.parametrize("gap", [0.1, 0.3, 0.5])
def test_eval_ctrl_c_twice_leaves_no_half_written_episode(tmp_path, arrivals, gap):
    """The second Ctrl-C lands while the first is being handled (workers stopping,
    ``.partial/`` being cleared): still no half-written episode anywhere, and no
    request after the first."""
    out = tmp_path / "run"
    rc, t0, took, _, err = signalled(
        _api_eval(arrivals, out),
        _mid_episode(arrivals, out),
        [(signal.SIGINT, 0), (signal.SIGINT, gap)],
        group=True,
    )
    assert rc == 130, (rc, took, err[-2000:])
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    assert arrivals.after(t0) == [], "model requests after the first signal"
    time.sleep(0.3)
    assert processes_naming(str(out)) == []
    _assert_nothing_partial(out)
    assert _episodes(out)


def _baseline_stops_and_resumes(cmd: list[str], out: Path, expected: set[str]) -> None:
    """SIGTERM after the first episode: a clean stop, no report, fewer episodes than
    ``expected``; the same command then completes exactly ``expected``."""
    rc, _, took, _, err = signalled(
        cmd, lambda p: bool(list(out.glob("episodes/*/eval_result.json"))), [(signal.SIGTERM, 0)]
    )
    assert_stopped(rc, took, err)
    time.sleep(0.3)
    _assert_nothing_partial(out)
    assert not (out / "report.json").exists()
    assert _episodes(out) < expected
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert _episodes(out) == expected


def test_baseline_random_stops_on_sigterm_and_resumes(tmp_path):
    out = tmp_path / "random"
    cmd = _vical("baseline", "random", "--tasks", MANY, "--runs", "2", "--out", str(out), "-j", "2")
    expected = {episode_name(t.id, k) for t in select_tasks(MANY) for k in range(2)}
    _baseline_stops_and_resumes(cmd, out, expected)


def test_baseline_expert_stops_on_sigterm_and_resumes(tmp_path):
    import json

    from vical.spec import tasks_digest

    plans = tmp_path / "plans.json"
    tasks = {
        t.id: {"actions": [next(iter(t.env.actions))] * t.max_steps, "expert": "a held action"}
        for t in select_tasks(MANY)
    }
    plans.write_text(
        json.dumps(
            {
                "format": "vical-plans/1",
                "tasks_digest": tasks_digest(),
                "source": "test: the first action held",
                "tasks": tasks,
            }
        )
    )
    out = tmp_path / "expert"
    cmd = _vical(
        "baseline", "expert", "--plans", str(plans), "--tasks", MANY, "--out", str(out), "-j", "2"
    )
    _baseline_stops_and_resumes(cmd, out, {episode_name(t, 0) for t in tasks})


# ---------------------------------------------------------------- verify, leaderboard


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A bundle whose replay with two workers lasts several seconds, and its key."""
    from vical.run import RunOptions, run_eval
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen

    d = tmp_path_factory.mktemp("bundle")
    priv, pub = keygen(d / "keys" / "team")
    run_eval(select_tasks(MANY), d / "run", options=RunOptions(runs=2, workers=2, progress=False))
    path = d / "signals.tar.gz"
    make_bundle(d / "run", priv, path, team="Team S", partial=True)
    return path, pub


def _replaying(bundle: Path) -> Callable[[subprocess.Popen], bool]:
    # replay has started once the two forked workers (same command line) exist
    return lambda p: len(processes_naming(str(bundle))) >= 3


def test_verify_stops_on_sigterm_and_writes_no_verdict(bundle, tmp_path):
    path, pub = bundle
    verdict = tmp_path / "verdict.json"
    cmd = _vical("verify", str(path), "--pubkey", str(pub), "-j", "2", "--out", str(verdict))
    rc, _, took, out, err = signalled(cmd, _replaying(path), [(signal.SIGTERM, 0)])
    assert_stopped(rc, took, err)
    assert "run the same command again" in err and "PASS" not in out
    assert not verdict.exists() and _no_leftovers(tmp_path) == []
    time.sleep(0.3)
    assert processes_naming(str(path)) == []


def test_leaderboard_add_stops_on_sigterm_and_adds_nothing(bundle, tmp_path):
    path, pub = bundle
    subs = tmp_path / "submissions"
    cmd = _vical(
        "leaderboard", "add", str(path), "--pubkey", str(pub), "--submissions", str(subs),
        "-j", "2",
    )  # fmt: skip
    rc, _, took, _, err = signalled(cmd, _replaying(path), [(signal.SIGTERM, 0)])
    assert_stopped(rc, took, err)
    assert "SIGTERM" in err
    assert not subs.exists() or not any(subs.rglob("*"))
    time.sleep(0.3)
    assert processes_naming(str(path)) == []


# ------------------------------------------------------------------------- audit


@pytest.fixture(scope="module")
def api_run(tmp_path_factory):
    """A small run of a model through the baseline server (random runs cannot be audited)."""
    from vical.run import RunOptions, run_eval

    out = tmp_path_factory.mktemp("audited") / "run"
    with BaselineServer() as srv:
        kwargs = {"endpoint": srv.openai_base_url, "model": "first"}
        run_eval(
            select_tasks("taxi/state1,cliffwalking/base,cartpole/seed41"),
            out,
            agent="openai-chat",
            agent_kwargs=kwargs,
            options=RunOptions(runs=2, workers=2, progress=False),
        )
    return out


@pytest.mark.parametrize("workers", ["1", "2"])
def test_audit_stops_on_sigterm_sends_nothing_after_and_resumes(api_run, tmp_path, workers):
    run = tmp_path / "run"
    shutil.copytree(api_run, run)
    a = Arrivals(delay=0.4)
    with a.server as srv:
        cmd = _vical(
            "audit", "run", str(run), "--backend", "openai-chat", "--endpoint",
            srv.openai_base_url, "--model", "auditor-valid", "-j", workers,
        )  # fmt: skip
        rc, t0, took, _, err = signalled(
            cmd, lambda p: bool(list(run.glob("audit/*.json"))), [(signal.SIGTERM, 0)]
        )
        assert_stopped(rc, took, err)
        assert "run the same command to resume" in err
        assert a.after(t0) == [], "auditor requests after the signal"
        assert _no_leftovers(run) == []
        first = {p.name for p in (run / "audit").glob("*.json")}
        assert first and len(first) < len(list((run / "episodes").iterdir()))
        a.server.delay = 0.0
        done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    audits = {p.name for p in (run / "audit").glob("*.json")}
    assert audits == {f"{p.name}.json" for p in (run / "episodes").iterdir()}
    for p in (run / "audit").glob("*.json"):
        record = json.loads(p.read_text())
        assert all(c["status"] == "valid" for c in record["criteria"].values()), p.name


# ------------------------------------------------------------------------- merge


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from vical.run import RunOptions, run_eval
    from vical.run.shard import Shard

    d = tmp_path_factory.mktemp("shards")
    tasks = select_tasks("taxi/*,cliffwalking/*")
    for i in range(2):
        run_eval(
            tasks,
            d / f"s{i}",
            options=RunOptions(runs=1, workers=2, progress=False, shard=Shard(i, 2)),
        )
    return [d / "s0", d / "s1"]


# `vical merge` with every episode copy slowed down, so that a signal lands mid-copy
SLOW_MERGE = (
    "import shutil, sys, time\n"
    "copy = shutil.copytree\n"
    "def slow(*a, **k):\n"
    "    time.sleep(0.15)\n"
    "    return copy(*a, **k)\n"
    "shutil.copytree = slow\n"
    "from vical.cli import main\n"
    "sys.argv = ['vical', *sys.argv[1:]]\n"
    "main()\n"
)


@pytest.mark.parametrize("times", [1, 2])
def test_merge_stops_mid_copy_leaves_nothing_and_runs_again(shards, tmp_path, times):
    out = tmp_path / "merged"
    args = ["merge", *map(str, shards), "--out", str(out)]
    cmd = [sys.executable, "-c", SLOW_MERGE, *args]
    sigs = [(signal.SIGTERM, 0)] + [(signal.SIGTERM, 0.2)] * (times - 1)
    rc, _, took, _, err = signalled(
        cmd, lambda p: bool(list(tmp_path.glob(".merged.merge-*/episodes/*"))), sigs
    )
    assert rc == 130, (rc, took, err)
    assert "Traceback" not in err, err
    if times == 1:
        assert "nothing was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a half-made merge was left"
    done = subprocess.run(_vical(*args), env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(list((out / "episodes").iterdir())) == len(select_tasks("taxi/*,cliffwalking/*"))


# ----------------------------------------------- commands without their own handling


def test_demos_make_stops_on_sigterm_with_the_task_files_unchanged():
    """`vical demos make` re-runs the expert tools (minutes for some environments):
    SIGTERM stops it as Ctrl-C does; its dry run and its YAML write stay whole."""
    from vical.spec import TASKS_DIR

    before = {p.name: p.read_bytes() for p in Path(TASKS_DIR).glob("*.yaml")}
    cmd = _vical("demos", "make", "--env", "highway", "--dry-run")  # over 40 s of work
    t_start = time.time()
    rc, _, took, _, err = signalled(
        cmd, lambda p: handles_sigterm(p) and time.time() - t_start > 4, [(signal.SIGTERM, 0)]
    )
    assert_stopped(rc, took, err)
    assert "SIGTERM: stopped before it finished" in err
    assert {p.name: p.read_bytes() for p in Path(TASKS_DIR).glob("*.yaml")} == before
    assert not list(Path(TASKS_DIR).glob(".demos-*"))


def test_dataset_build_stops_on_sigterm_leaving_the_old_folder(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "marker").write_text("previous build")
    rc, _, took, _, err = signalled(
        _vical("dataset", "build", "--out", str(out), "--tasks", MANY),
        lambda p: bool(list(tmp_path.glob(".ds-*/videos/*.mp4"))),
        [(signal.SIGTERM, 0)],
        env={"VICAL_CACHE": str(tmp_path / "cache")},
    )
    assert_stopped(rc, took, err)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["ds"]
    assert [p.name for p in out.iterdir()] == ["marker"]


def test_doctor_record_stops_on_sigterm_and_writes_no_record(tmp_path):
    """`vical doctor --record` replays every environment (the check itself stops at once
    while the packaged record is stale after a task-data change)."""
    record = tmp_path / "doctor.json"
    rc, _, took, _, err = signalled(
        _vical("doctor", "--record", "--record-file", str(record), "-j", "2"),
        lambda p: len(_children(p.pid)) >= 2,
        [(signal.SIGTERM, 0.3)],
    )
    assert_stopped(rc, took, err)
    assert "the record was not written" in err
    assert list(tmp_path.iterdir()) == []


def test_report_stops_on_sigterm_and_writes_every_file_whole_or_not_at_all(bundle, tmp_path):
    """`vical report` computes bootstrap intervals and figures for seconds; stopped, it
    leaves no temporary file, and a second run writes the report."""
    run = bundle[0].parent / "run"
    out = tmp_path / "rep"
    cmd = _vical("report", str(run), "--out", str(out))
    rc, _, took, _, err = signalled(
        cmd,
        handles_sigterm,
        [(signal.SIGTERM, 0)],  # as soon as it can be stopped
    )
    assert_stopped(rc, took, err)
    assert _no_leftovers(tmp_path) == []
    for f in out.glob("report.json") if out.exists() else []:
        json.loads(f.read_text())  # whole, if written at all
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "report.json").read_text())


def test_wm_couple_stops_on_sigterm_and_resumes(tmp_path):
    """`vical wm couple` plays tasks through the runner, one run per world model."""
    out = tmp_path / "coupled"
    cmd = _vical(
        "wm", "couple", "--tasks", "taxi/*,cliffwalking/*", "--wm", "simulator",
        "--out", str(out), "-j", "2",
    )  # fmt: skip
    run = out / "simulator"
    rc, _, took, _, err = signalled(
        cmd, lambda p: bool(list(run.glob("episodes/*/eval_result.json"))), [(signal.SIGTERM, 0)]
    )
    assert_stopped(rc, took, err)
    time.sleep(0.3)
    _assert_nothing_partial(run)
    kept = _episodes(run)
    expected = {episode_name(t.id, 0) for t in select_tasks("taxi/*,cliffwalking/*")}
    assert kept < expected
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert _episodes(run) == expected


def test_tasks_screen_stops_on_sigterm_and_prints_no_verdict():
    """The reflex screen stops within seconds of SIGTERM, prints no table or JSON (a
    partial screen is no verdict) and says what happened."""
    cmd = _vical("tasks", "screen", "-t", MANY, "-j", "2", "--json")
    status, _, took, out, err = signalled(cmd, handles_sigterm, [(signal.SIGTERM, 1.0)])
    assert status == 130, (took, err)
    assert out == ""
    assert "interrupted:" in err
    assert "Traceback" not in err


def test_tasks_record_stops_on_sigterm_and_writes_nothing(tmp_path):
    """Recording an added folder's fingerprints stops on SIGTERM with one `interrupted:`
    line and leaves no record beside the task files (a partial record is no record)."""
    folder = tmp_path / "added"
    folder.mkdir()
    shutil.copy(ROOT / "vical" / "tasks" / "highway.yaml", folder)  # 20 slow tasks
    env = {**os.environ, "VICAL_TASKS_DIR": str(folder)}
    cmd = _vical("tasks", "record", str(folder), "-j", "2")
    status, _, took, out, err = signalled(cmd, handles_sigterm, [(signal.SIGTERM, 2.0)], env=env)
    assert status == 130, (took, out, err)
    assert "interrupted: nothing complete was written" in err and "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["highway.yaml"]


# ---------------------------------------------------------------------- coverage

HERE = {
    "eval": test_eval_stops_sends_no_request_after_the_signal_and_resumes,
    "baseline random": test_baseline_random_stops_on_sigterm_and_resumes,
    "baseline expert": test_baseline_expert_stops_on_sigterm_and_resumes,
    "verify": test_verify_stops_on_sigterm_and_writes_no_verdict,
    "leaderboard add": test_leaderboard_add_stops_on_sigterm_and_adds_nothing,
    "audit run": test_audit_stops_on_sigterm_sends_nothing_after_and_resumes,
    "merge": test_merge_stops_mid_copy_leaves_nothing_and_runs_again,
    "tasks record": test_tasks_record_stops_on_sigterm_and_writes_nothing,
    "demos make": test_demos_make_stops_on_sigterm_with_the_task_files_unchanged,
    "dataset build": test_dataset_build_stops_on_sigterm_leaving_the_old_folder,
    "doctor": test_doctor_record_stops_on_sigterm_and_writes_no_record,
    "report": test_report_stops_on_sigterm_and_writes_every_file_whole_or_not_at_all,
    "wm couple": test_wm_couple_stops_on_sigterm_and_resumes,
    "tasks screen": test_tasks_screen_stops_on_sigterm_and_prints_no_verdict,
}
# commands that are not long: they read or write a few files, or print
SHORT = {
    "keygen", "tasks list", "tasks show", "tasks digest", "tasks sheet", "tasks make-init",
    "demos render", "demos pack", "dataset verify", "dataset stats", "dataset push",
    "audit report", "audit sample", "audit label", "audit agreement", "import-inspect",
    "submit", "leaderboard build", "tasks check", "wm build", "wm report", "wm submit",
    "wm verify", "wm couple-table",
    # the hub's client and maintainer commands: one request or one transaction (a backup
    # cut short has no backup.json, which restore requires)
    "hub register", "hub status", "hub admin migrate", "hub admin keys", "hub admin approve",
    "hub admin revoke", "hub admin add-key", "hub admin requeue", "hub admin backup",
    "hub admin restore",
}  # fmt: skip


def _command_paths() -> set[str]:
    import typer.main

    from vical.cli import app

    def walk(cmd, prefix: str) -> set[str]:
        subs = getattr(cmd, "commands", None)
        if not subs:
            return {prefix}
        found: set[str] = set()
        for name, sub in subs.items():
            found |= walk(sub, f"{prefix} {name}".strip())
        return found

    return walk(typer.main.get_command(app), "")


def test_every_long_command_has_a_signal_test():
    """Each command of the command line is either short or has its signal test, here or
    in the file ``ELSEWHERE`` names (which must hold that test)."""
    commands = _command_paths()
    covered = set(HERE) | set(ELSEWHERE)
    assert commands - covered - SHORT == set(), "a command with no signal test and not short"
    assert (covered | SHORT) - commands == set(), "a listed command that does not exist"
    for where in ELSEWHERE.values():
        file, name = where.split("::")
        assert f"def {name}(" in (ROOT / file).read_text(), where
