"""``vical eval --executor ray`` on a real Ray cluster started here on 127.0.0.1: a worker
killed mid-episode is replaced and the run still ends with exactly its episode set, the
same episodes a local run plays; Ctrl-C stops it within seconds, keeps what finished, and
the same command resumes it. Marked ``ray`` (run by ``nox -s ray``); skipped without the
ray extra."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import interrupt_group, processes_naming
from vical.run import load_results, run_eval
from vical.run.runner import episode_name, episode_problems
from vical.spec import select_tasks

# Ray swaps 127.0.0.1 for the machine's network address unless told to stay on loopback;
# read when ray is imported, and inherited by the vical processes this test starts
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason="the ray extra is not installed")
pytestmark = pytest.mark.ray

TASKS = "taxi/state1,taxi/state2,taxi/state3,cartpole/seed41,cartpole/seed42,cliffwalking/base"
RUNS = 2
TASK_TITLE = "ray::play_on_worker"  # the process title of a worker playing an episode
VICAL = str(Path(sys.executable).with_name("vical"))


@pytest.fixture(scope="module")
def cluster():
    """A Ray head on 127.0.0.1 with two CPUs, started by this process; its GCS address."""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The same episodes played by local workers: what the Ray run must reproduce."""
    d = tmp_path_factory.mktemp("local") / "run"
    run_eval(select_tasks(TASKS), d, runs=RUNS, workers=1, progress=False)
    return {episode_name(r.task_id, r.run_index): r for r in load_results(d)}


def _cmd(address: str, out: Path) -> list[str]:
    return [
        VICAL,
        "eval",
        "--agent",
        "random",
        "--tasks",
        TASKS,
        "--runs",
        str(RUNS),
        "--executor",
        "ray",
        "--ray-address",
        address,
        "-j",
        "2",
        "--no-report",
        "--out",
        str(out),
    ]


def _check_run(out: Path, local_run: dict) -> None:
    """Exactly the episode set, each whole, each the local run's episode."""
    names = sorted(p.name for p in (out / "episodes").iterdir())
    assert names == sorted(local_run)
    for n in names:
        assert episode_problems(out / "episodes" / n) == []
    got = {episode_name(r.task_id, r.run_index): r for r in load_results(out)}
    for n, r in got.items():
        assert (r.actions, r.frame_hashes, r.score, r.passed) == (
            local_run[n].actions,
            local_run[n].frame_hashes,
            local_run[n].score,
            local_run[n].passed,
        )
    assert not (out / ".partial").exists() or not any((out / ".partial").iterdir())


def _wait_for_no_task(timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while processes_naming(TASK_TITLE):
        assert time.time() < deadline, "a Ray worker still plays an episode"
        time.sleep(0.2)


def test_a_killed_worker_is_replaced_and_the_run_completes(cluster, local_run, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cmd(cluster, out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killed = None
    try:
        deadline = time.time() + 120
        while killed is None and proc.poll() is None and time.time() < deadline:
            playing = processes_naming(TASK_TITLE)
            if playing:
                killed = playing[0]
                os.kill(killed, signal.SIGKILL)  # a worker of the cluster this test started
            time.sleep(0.02)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed is not None, f"no worker was seen playing an episode:\n{output}"
    assert proc.returncode == 0, output
    assert "episode(s) crashed" not in output  # the killed worker's task was run again
    # the next episode on the node removed the killed worker's temporary folder
    assert not list(Path(tempfile.gettempdir()).glob(f"vical-ray-{killed}-*"))
    assert f"{len(local_run)} episodes run" in output
    _check_run(out, local_run)


def test_ctrl_c_stops_within_seconds_and_the_same_command_resumes(cluster, local_run, tmp_path):
    out = tmp_path / "run"

    def one_landed(_proc) -> bool:
        eps = out / "episodes"
        return eps.is_dir() and any(eps.iterdir())

    code, seconds, stdout, stderr = interrupt_group(
        _cmd(cluster, out), one_landed, 1, wait=30.0, start_within=120.0
    )
    assert code == 130, stdout + stderr
    assert seconds < 10
    assert "interrupted: finished episodes are kept" in stderr
    kept = sorted(p.name for p in (out / "episodes").iterdir())
    assert kept and set(kept) <= set(local_run)
    assert not (out / ".partial").exists() or not any((out / ".partial").iterdir())
    _wait_for_no_task()

    done = subprocess.run(_cmd(cluster, out), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(kept)} already finished" in done.stdout
    _check_run(out, local_run)


def test_no_address_and_a_dead_address_are_one_error_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    base = [VICAL, "eval", "--agent", "random", "--tasks", "taxi/state1", "--executor", "ray"]
    r = subprocess.run(
        [*base, "--out", str(tmp_path / "a")], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 2 and "--executor ray needs the cluster's address" in r.stderr
    assert not (tmp_path / "a").exists()
    t0 = time.time()
    r = subprocess.run(
        [*base, "--ray-address", "127.0.0.1:1", "--no-report", "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "nothing answers at the Ray address '127.0.0.1:1'" in r.stderr
    assert time.time() - t0 < 30
