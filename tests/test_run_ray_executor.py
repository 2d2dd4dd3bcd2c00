"""``vical eval --executor ray`` on a real Ray cluster started here on 127.0.0.1: a worker
killed mid-episode is replaced and the run still ends with exactly its episode set, the
same episodes a local run plays; Ctrl-C stops it within seconds, keeps what finished, and
the same command resumes it. A head started the way an operator starts one (`ray start
--head`, the CLI) runs a sharded evaluation whose merge equals the local run; a cluster
that cannot be started or reached is one error line. Marked ``ray`` (run by ``nox -s
ray``); skipped without the ray extra."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import HANG

from tests.conftest import interrupt_group, processes_naming
from vical.run import RunOptions, load_results, run_eval
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
RAY = str(Path(sys.executable).with_name("ray"))


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
    run_eval(select_tasks(TASKS), d, options=RunOptions(runs=RUNS, workers=1, progress=False))
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
    assert code == 130, (seconds, stdout + stderr)
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
        [*base, "--out", str(tmp_path / "a")], capture_output=True, text=True, env=env, timeout=HANG
    )
    assert r.returncode == 2 and "--executor ray needs the cluster's address" in r.stderr
    assert not (tmp_path / "a").exists()
    r = subprocess.run(
        [*base, "--ray-address", "127.0.0.1:1", "--no-report", "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "nothing answers at the Ray address '127.0.0.1:1'" in r.stderr


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (all held open while choosing)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@contextlib.contextmanager
def _ray_start_head(home: Path):
    """A Ray head started with the `ray start --head` command, on 127.0.0.1, on free ports,
    with its own temporary folder and ``home`` as HOME (where Ray would write a token);
    yields (address, the command's process, what it printed so far as a function).
    Stopped by ending that command (and any process of this head it leaves behind, found
    by the temporary folder's name)."""
    # short: Ray's socket paths under it must fit in a Unix socket name (107 bytes)
    temp = tempfile.mkdtemp(prefix="vr-", dir="/tmp")
    gcs, node, objects, client, agent, agent_grpc, env_agent, metrics = _free_ports(8)
    log = Path(temp) / "ray-start.log"
    cmd = [
        RAY, "start", "--head", "--block", "--disable-usage-stats",
        "--node-ip-address", "127.0.0.1", "--port", str(gcs),
        "--node-manager-port", str(node), "--object-manager-port", str(objects),
        "--dashboard-agent-listen-port", str(agent),
        "--dashboard-agent-grpc-port", str(agent_grpc),
        "--runtime-env-agent-port", str(env_agent), "--metrics-export-port", str(metrics),
        "--include-dashboard", "false", "--num-cpus", "2",
        "--object-store-memory", str(100 * 1024**2), "--temp-dir", temp,
    ]  # fmt: skip
    if importlib.util.find_spec("grpc") is not None:  # Ray Client can start: give it a port
        cmd += ["--ray-client-server-port", str(client)]
    address = f"127.0.0.1:{gcs}"
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    env["HOME"] = str(home)
    with log.open("wb") as out:
        head = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    try:
        deadline = time.time() + 120
        while "Ray runtime started" not in log.read_text():  # what it prints once the node is up
            assert head.poll() is None, f"ray start --head exited:\n{log.read_text()}"
            assert time.time() < deadline, f"the Ray head never came up:\n{log.read_text()}"
            time.sleep(0.5)
        yield address, head, log.read_text
    finally:
        if head.poll() is None:
            head.send_signal(signal.SIGTERM)  # --block: ending the command stops its processes
            try:
                head.wait(timeout=HANG)
            except subprocess.TimeoutExpired:
                head.kill()
                head.wait()
        for pid in processes_naming(temp):  # anything of this head still alive
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def started_head(tmp_path_factory):
    """A head as `ray start --head` makes it by default: (its address, what it printed,
    the HOME it ran with)."""
    home = tmp_path_factory.mktemp("home")
    with _ray_start_head(home) as (address, _head, printed):
        yield address, printed, home


@pytest.fixture(scope="module")
def cli_head(started_head):
    return started_head[0]


def test_ray_start_head_leaves_token_authentication_off(started_head, tmp_path):
    """What README says of the pinned Ray: `ray start --head` runs without token
    authentication unless told (RAY_AUTH_MODE=token), writes no token, and a driver
    joins it without one."""
    address, printed, home = started_head
    assert "Token authentication is disabled for this Ray cluster" in printed()
    assert not (home / ".ray" / "auth_token").exists()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env["HOME"] = str(home)
    r = subprocess.run(
        [VICAL, "eval", "--agent", "random", "--tasks", "taxi/state1", "--executor", "ray",
         "--ray-address", address, "--no-report", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text().split())
    assert "token authentication is off by default" in readme


def test_a_lost_head_is_one_error_line_within_15_s_and_nothing_half_made(
    local_run, tmp_path, tmp_path_factory
):
    """The whole head node killed mid-run (every process of `ray start --head`)."""
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    with _ray_start_head(tmp_path_factory.mktemp("home")) as (address, head, _):
        proc = subprocess.Popen(
            _cmd(address, out),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            deadline = time.time() + 300
            while not ((out / "episodes").is_dir() and any((out / "episodes").iterdir())):
                assert proc.poll() is None and time.time() < deadline, proc.communicate()
                time.sleep(0.05)
            os.killpg(head.pid, signal.SIGKILL)  # the head and everything it started
            head.wait()
            stdout, stderr = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 2, stdout + stderr
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, stderr
    line = errors[0]
    assert f"lost the Ray cluster: its head at {address} stopped answering" in line
    assert f"finished episodes are kept in {out}" in line and "resume with vical eval" in line
    kept = sorted(p.name for p in (out / "episodes").iterdir())
    assert kept and set(kept) <= set(local_run)
    for n in kept:  # each whole, each the local run's episode
        assert episode_problems(out / "episodes" / n) == []
    assert not (out / ".partial").exists()


def test_a_sharded_run_through_a_head_started_with_ray_start_equals_the_local_run(
    cli_head, local_run, tmp_path
):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    shards = []
    for k in range(2):
        out = tmp_path / f"shard-{k}"
        r = subprocess.run(
            [*_cmd(cli_head, out), "--shard", f"{k}/2"],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        shards.append(out)
    played = [sorted(p.name for p in (s / "episodes").iterdir()) for s in shards]
    assert all(played) and not set(played[0]) & set(played[1])  # two slices, no overlap
    merged = tmp_path / "merged"
    r = subprocess.run(
        [VICAL, "merge", *map(str, shards), "--out", str(merged)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    _check_run(merged, local_run)


def _one_error_line(r: subprocess.CompletedProcess) -> str:
    """The error line of a failed command; fails unless it is its only one, with no traceback."""
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and r.stderr.strip().splitlines()[-1] == errors[0], r.stderr
    return errors[0]


def test_a_private_node_that_cannot_start_is_one_error_line(tmp_path):
    """`--ray-address local` where Ray cannot make its node (its temporary folder is a
    file): one error line, not Ray's traceback."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(blocker)
    r = subprocess.run(
        [VICAL, "eval", "--agent", "random", "--tasks", "taxi/state1", "--executor", "ray",
         "--ray-address", "local", "--no-report", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    line = _one_error_line(r)
    assert "cannot start a private Ray node" in line and str(blocker) in line


def test_an_address_where_no_ray_answers_is_one_error_line(tmp_path):
    """A port that accepts connections but is not a Ray head (here: an HTTP server)."""
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    server = HTTPServer(("127.0.0.1", 0), SimpleHTTPRequestHandler)
    import threading

    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    try:
        r = subprocess.run(
            [VICAL, "eval", "--agent", "random", "--tasks", "taxi/state1", "--executor", "ray",
             "--ray-address", address, "--no-report", "--out", str(tmp_path / "run")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
    finally:
        server.shutdown()
    line = _one_error_line(r)
    assert address in line
