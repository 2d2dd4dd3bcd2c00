"""run_pool: early stop, worker errors, dead workers, interrupts, and PDEATHSIG.

Interrupt tests run a small driver in a child process (its own session) so the
signals never reach pytest itself; jobs are plain top-level functions.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# tests.conftest, not conftest: a subprocess imports this module by its package path
from tests.conftest import HANG
from vical.run.pool import run_pool

# --- jobs (top level, so worker processes can unpickle them) -----------------


def square(x: int) -> int:
    return x * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def kill_self_on_two(x: int) -> int:
    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return x


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- in-process behaviour --------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_every_job_reported_once(workers):
    seen: dict[int, int] = {}

    def on_result(job, value, error):
        assert error is None
        seen[job] = value

    assert run_pool(square, range(8), workers, on_result) is True
    assert seen == {i: i * i for i in range(8)}


@pytest.mark.parametrize("workers", [1, 2])
def test_on_result_false_stops_scheduling(workers):
    seen: list[int] = []

    def on_result(job, value, error):
        seen.append(job)
        return job < 2

    assert run_pool(square, range(100), workers, on_result) is False
    # jobs already in flight are still reported, but scheduling stopped long before 100
    assert 2 in seen and len(seen) < 10


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_exception_is_reported_not_raised(workers):
    errors: dict[int, BaseException] = {}
    values: dict[int, int] = {}

    def on_result(job, value, error):
        if error is not None:
            errors[job] = error
        else:
            values[job] = value

    assert run_pool(fail_on_three, range(6), workers, on_result) is True
    assert list(errors) == [3]
    assert isinstance(errors[3], ValueError) and "three" in str(errors[3])
    assert values == {i: i for i in range(6) if i != 3}


def test_worker_killed_by_sigkill_is_an_error_not_a_hang():
    code = textwrap.dedent(
        """
        import sys
        from tests.test_pool import kill_self_on_two
        from vical.run.pool import run_pool

        errors, values = [], []
        def on_result(job, value, error):
            (errors if error is not None else values).append(job)
        run_pool(kill_self_on_two, range(12), 2, on_result)
        print("errors", *sorted(errors))
        print("values", *sorted(values))
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=Path(__file__).parents[1],
    )
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()}
    errors, values = map(int, lines["errors"]), map(int, lines["values"])
    errors, values = set(errors), set(values)
    assert 2 in errors, r.stdout  # the job whose worker died is reported as failed
    assert errors | values == set(range(12)) and not errors & values, r.stdout


# --- signals (a driver process in its own session) ----------------------------------

DRIVER = textwrap.dedent(
    """
    import os, signal, sys, time
    from vical.run.pool import Interrupted, run_pool

    def slow(x):
        time.sleep(30)
        return x

    def stubborn():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends this worker

    if __name__ == "__main__":
        marker = sys.argv[1]
        init = stubborn if sys.argv[2] == "stubborn" else None
        done = []
        try:
            run_pool(slow, range(8), 2, lambda j, v, e: done.append(j), initializer=init,
                     on_abort=lambda: open(marker + ".abort", "w").close())
        except Interrupted as e:
            print("interrupted", e.signum, "done", len(done), flush=True)
            sys.exit(3)
        sys.exit(0)
    """
)


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().split(")")[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid and _alive(int(d.name)):
                out.append(int(d.name))
    return out


def _start_driver(tmp_path: Path, kind: str = "plain") -> tuple[subprocess.Popen, list[int]]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "m"), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 20
    while time.time() < deadline:
        kids = _children(proc.pid)
        if len(kids) >= 2:
            time.sleep(0.5)  # let the workers run their initializer
            return proc, _children(proc.pid)
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the pool did not start its workers")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_raises_interrupted_with_workers_gone(tmp_path, sig):
    proc, workers = _start_driver(tmp_path)
    try:
        os.killpg(proc.pid, sig)  # the whole group, as a terminal does
        out, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 3, (out, err)
        assert out.decode().split()[:2] == ["interrupted", str(int(sig))]
        assert "Traceback" not in err.decode()
        assert not any(_alive(w) for w in workers)
        assert not (tmp_path / "m.abort").exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_second_signal_exits_at_once_and_runs_on_abort(tmp_path):
    # workers that ignore SIGTERM keep the parent in its grace period after the first
    # signal, so the second one surely lands while the pool is shutting down
    proc, workers = _start_driver(tmp_path, "stubborn")
    try:
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=HANG)
        # 130 and the abort hook, where the first signal alone ends in 3 after the grace
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err.decode()
        assert (tmp_path / "m.abort").exists()
        assert not any(_alive(w) for w in workers)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_workers_die_with_their_parent(tmp_path):
    proc, workers = _start_driver(tmp_path)
    assert workers
    proc.kill()  # SIGKILL to the parent alone: no cleanup code runs in it
    proc.wait()
    deadline = time.time() + 5
    while time.time() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers), "a worker outlived its parent"


def test_workers_of_a_parent_that_is_pid_1_live():
    """In a container the command is pid 1: its workers must not take that for a dead
    parent (they did, and every episode crashed with BrokenProcessPool)."""
    import shutil
    import subprocess
    import sys

    code = (
        "from vical.run.pool import run_pool\n"
        "out = []\n"
        "run_pool(abs, [-1, -2, -3, -4], 2, lambda j, v, e: out.append((v, e)))\n"
        "assert sorted(v for v, e in out) == [1, 2, 3, 4], out\n"
        "import os; print('pid', os.getpid())\n"
    )
    if shutil.which("unshare") is None:
        pytest.skip("unshare not installed")
    r = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    if r.returncode != 0 and "Operation not permitted" in r.stderr:
        pytest.skip("no permission for a new pid namespace here")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pid 1"


def test_die_with_parent_checks_the_parent_it_was_given():
    import subprocess
    import sys

    ok = "import os; from vical.run.pool import die_with_parent; die_with_parent(os.getppid())"
    gone = "from vical.run.pool import die_with_parent; die_with_parent(2**22 + 7)"
    assert subprocess.run([sys.executable, "-c", ok]).returncode == 0
    assert subprocess.run([sys.executable, "-c", gone]).returncode == 1


# The executor's exit hook (concurrent.futures.process._python_exit) wakes every pool's
# management thread without the pool's lock; a management thread still closing its
# wake-up pipe at that moment makes the hook print "Exception ignored ... send_bytes"
# at interpreter exit. It needs a loaded machine to show by itself, so the driver below
# widens both sides of the race: the hook pauses between its "closed?" check and its
# write, the management thread pauses before it closes. An interrupted run_pool must
# leave nothing for the hook to touch.
RACE = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import concurrent.futures.process as cfp
    from vical.run.pool import Interrupted, run_pool

    def wakeup(self):
        if not self._closed:
            if cfp._global_shutdown:  # only in the exit hook
                time.sleep(0.6)
            self._writer.send_bytes(b"")
    cfp._ThreadWakeup.wakeup = wakeup

    slow_join = cfp._ExecutorManagerThread.join_executor_internals
    def join_executor_internals(self):
        time.sleep(0.3)
        slow_join(self)
    cfp._ExecutorManagerThread.join_executor_internals = join_executor_internals

    def slow(x):
        time.sleep(30)

    if __name__ == "__main__":
        threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            run_pool(slow, range(8), 2, lambda j, v, e: None)
        except Interrupted:
            print("interrupted", flush=True)
            sys.exit(3)
    """
)


def _interrupted_cleanly(tmp_path: Path, script_text: str) -> float:
    """Run a driver that interrupts its own pool; it must print ``interrupted``, exit 3
    and leave nothing on stderr. Returns how long it took."""
    script = tmp_path / "driver.py"
    script.write_text(script_text)
    t0 = time.time()
    r = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=Path(__file__).parents[1],
    )
    assert r.returncode == 3 and r.stdout.strip() == "interrupted", (r.stdout, r.stderr)
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    return time.time() - t0


def test_interrupted_pool_leaves_nothing_for_the_exit_hook(tmp_path):
    _interrupted_cleanly(tmp_path, RACE)


BIG = textwrap.dedent(
    """
    import os, signal, sys, threading
    from vical.run.pool import Interrupted, run_pool

    def big(x):  # a result far larger than a pipe's buffer, as a job's frames can be
        return b"x" * (200 * 1024 * 1024)

    if __name__ == "__main__":
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
        try:
            run_pool(big, range(50), 2, lambda j, v, e: None)
        except Interrupted:
            print("interrupted", flush=True)
            sys.exit(3)
    """
)


def test_a_worker_killed_mid_result_does_not_hold_the_exit(tmp_path):
    """Workers killed while they write large results leave half a message in the
    result pipe; the executor's thread then waits for the rest for ever. The process
    must still leave promptly after its interrupt (it used to hang at exit)."""
    assert _interrupted_cleanly(tmp_path, BIG) < 10
