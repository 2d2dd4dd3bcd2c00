"""Shared test setup: headless rendering and task parametrisation helpers."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import signal

import pytest

from vical.spec import all_tasks

# A suite started as a background job of a script (`cmd &` in a shell without job
# control) inherits SIGINT ignored, and every process a test starts would inherit that
# too and could not be interrupted: the interrupt tests would hang. Take Python's own.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ALL_TASKS = all_tasks()

# Seconds a test waits for a process or thread before calling it hung. A hang guard, not
# a speed bound: no test asserts how long something took (tests/test_suite_health.py holds
# that); speed is measured in benchmarks/. Generous, so a loaded machine cannot fail it.
HANG = 120.0


def task_params(env_keys=None):
    """pytest params over every task (optionally only some environments), ids = task ids:
    the default suite runs the :func:`per_env_sweep` sample, ``nox -s slow`` every task."""
    return per_env_sweep([t for t in ALL_TASKS if env_keys is None or t.env.env in env_keys])


def per_env_sweep(tasks, value=None):
    """pytest params over ``tasks`` where the default suite takes, per environment, its
    first task and its first task with a human-init sequence; the rest are marked
    ``slow`` (``nox -s slow`` runs every task). ``value(task)`` is the parameter (the
    task itself by default); the id is always the task id."""
    params, seen = [], set()
    for t in tasks:
        key = (t.env.env, bool(t.variant.init_actions))
        marks = () if key not in seen else (pytest.mark.slow,)
        seen.add(key)
        params.append(pytest.param(t if value is None else value(t), id=t.id, marks=marks))
    return params


def spread(values, keep, ids=None):
    """pytest params over ``values`` where the default suite takes ``keep`` of them,
    evenly spread from the first; the rest are marked ``slow``. ``values`` may hold
    pytest.param objects (their marks and ids are kept; one already ``slow`` is never
    taken)."""

    def is_param(v):
        return hasattr(v, "values") and hasattr(v, "marks")

    def slow(v):
        return is_param(v) and any(m.name == "slow" for m in v.marks)

    open_ = [i for i, v in enumerate(values) if not slow(v)]
    n = len(open_)
    picks = {round(k * (n - 1) / max(keep - 1, 1)) for k in range(min(keep, n))} if n else set()
    chosen = {open_[k] for k in picks}
    out = []
    for i, v in enumerate(values):
        marks = () if i in chosen or slow(v) else (pytest.mark.slow,)
        if is_param(v):
            out.append(pytest.param(*v.values, id=v.id, marks=(*v.marks, *marks)))
        else:
            out.append(pytest.param(v, id=ids(v) if ids else None, marks=marks))
    return out


def sampled_task_ids(ids):
    """:func:`per_env_sweep` over task ids: the default suite's sample of ``ids``."""
    by_id = {t.id: t for t in ALL_TASKS}
    return per_env_sweep([by_id[i] for i in ids], value=lambda t: t.id)


def build_wm_cases(out, envs):
    """A small world-model case folder in ``out``: one context of each environment in
    ``envs``, each its own scenario ``t-<env>`` (BRANCHES cases a context); returns ``out``."""
    from vical.wm.cases import Scenario, build_scenario, write_cases

    cases = []
    for env in envs:
        cases += build_scenario(Scenario(f"t-{env}", env, (env,)), out, contexts=1)
    write_cases(out, cases)
    return out


CHROMIUM = __import__("shutil").which("chromium") or __import__("shutil").which("chromium-browser")
# Flags that keep headless Chromium quiet on a machine whose network reaches no Google host.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(autouse=True)
def _signal_dispositions_are_left_as_found():
    """A test (or the library code it calls in-process) must leave SIGINT and SIGTERM as
    it found them: a leaked SIG_IGN is inherited by every process a later test starts,
    which then cannot be interrupted. The handlers are put back and the test fails."""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    after = {s: signal.getsignal(s) for s in before}
    changed = {s.name: (before[s], after[s]) for s in before if after[s] is not before[s]}
    for s, h in before.items():
        signal.signal(s, h)
    assert not changed, f"the test left signal handlers changed (before, after): {changed}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With VICAL_TEST_TIMES=FILE, append each test's wall and CPU time (this process
    and its waited-for children) to FILE as JSON lines: CPU time does not grow on a
    loaded machine, so benchmarks/durations.py can tell a heavy test from a starved one."""
    path = os.environ.get("VICAL_TEST_TIMES")
    if not path:
        yield
        return
    import json
    import resource
    import time

    def cpu() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    c0, t0 = cpu(), time.monotonic()
    yield
    row = {"id": item.nodeid, "wall": time.monotonic() - t0, "cpu": cpu() - c0}
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.fixture
def browser():
    """A headless Chromium (system package) driven by Playwright; skips when absent."""
    if CHROMIUM is None:
        pytest.skip("Chromium not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def processes_naming(text: str) -> list[int]:
    """Live (not zombie) processes whose command line contains ``text``: a command and
    the workers it forked, which share its command line."""
    from pathlib import Path

    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if text.encode() in cmd and state != "Z":
            pids.append(int(d.name))
    return pids


def interrupt_group(cmd, started, times, *, env=None, gap=0.1, wait=HANG, start_within=HANG):
    """Run ``cmd`` in its own session, wait until ``started(proc)`` is true, then send
    SIGINT to its process group ``times`` times, ``gap`` seconds apart, as a terminal's
    Ctrl-C does. Returns (exit status, seconds from the first SIGINT to exit, stdout,
    stderr); the group is SIGKILLed if it outlives ``wait`` seconds."""
    import signal
    import subprocess
    import time

    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.time() + start_within
        while not started(proc):
            assert time.time() < deadline and proc.poll() is None, "the command never started"
            time.sleep(0.02)
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        for _ in range(times - 1):
            time.sleep(gap)
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=wait)
        return proc.returncode, time.time() - t0, out.decode(), err.decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
