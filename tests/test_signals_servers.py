"""The commands that serve until stopped (``serve-baseline``, ``play``, ``view``), as
an operator stops them: a double Ctrl-C ends them with status 0, as README and
``tests/test_signals.py`` promise; ``serve-baseline`` answers the request in flight
when SIGTERM lands (and a further Ctrl-C meanwhile changes nothing), and a port that
is taken is one ``error:`` line. Waits are on events (a printed address, the
server's request counter), never on the clock.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from conftest import HANG

from vical.run import RunOptions, run_eval
from vical.spec import select_tasks

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "SDL_VIDEODRIVER": "dummy", "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
ADDRESS = re.compile(r"(http://127\.0\.0\.1:\d+)")


def _start(args: list[str]) -> tuple[subprocess.Popen, str]:
    """The command in its own session, once it printed its address: (process, URL)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for _ in range(20):
        m = ADDRESS.search(proc.stdout.readline())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError(f"no address printed: {proc.communicate()[1][-2000:]}")


def _end(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=HANG)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("view") / "run"
    run_eval(select_tasks("taxi/state1"), run, options=RunOptions(workers=1, progress=False))
    return run


def _command(name: str, tmp_path: Path, small_run: Path) -> list[str]:
    if name == "serve-baseline":
        return ["serve-baseline", "--port", "0"]
    if name == "play":
        human = str(tmp_path / "human")
        return ["play", "-p", "p5", "-t", "taxi/state1", "--no-open", "--port", "0", "-o", human]
    return ["view", str(small_run), "--no-open", "--port", "0"]


@pytest.mark.parametrize("name", ["serve-baseline", "play", "view"])
def test_a_double_ctrl_c_ends_a_server_with_status_0(name, tmp_path, small_run):
    proc, _url = _start(_command(name, tmp_path, small_run))
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C, twice in a row
    os.killpg(proc.pid, signal.SIGINT)
    code, out, err = _end(proc)
    assert code == 0, err
    assert "Traceback" not in err and "stopped at once" not in err
    assert "stopped" in out


def _stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=10) as r:
        return json.loads(r.read())


def test_sigterm_lets_serve_baseline_answer_the_request_in_flight():
    proc, url = _start(["serve-baseline", "--port", "0", "--delay", "3"])
    body = {
        "model": "first",
        "messages": [{"role": "user", "content": "Legal actions: Left, Right"}],
    }
    answer: dict = {}

    def ask() -> None:
        req = urllib.request.Request(
            url + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                answer["status"], answer["body"] = r.status, json.loads(r.read())
        except Exception as e:  # the test asserts on what arrived
            answer["error"] = repr(e)

    asker = threading.Thread(target=ask)
    asker.start()
    try:
        while _stats(url)["models"].get("first", 0) < 1:  # the server holds the request
            assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        line = ""
        while not line.startswith("stopping:"):  # the rest of the banner, then this
            line = proc.stdout.readline()
            assert line, "the server ended without saying it was stopping"
        assert line.startswith("stopping: answering the requests in flight")
        proc.send_signal(signal.SIGINT)  # an impatient second signal changes nothing
    finally:
        asker.join(timeout=HANG)
    code, out, err = _end(proc)
    assert answer.get("status") == 200, answer
    assert answer["body"]["choices"][0]["message"]["content"].startswith("[Action:Left]")
    assert code == 0, err
    assert out.strip().endswith("stopped") and "Traceback" not in err


def test_a_taken_port_is_one_error_line():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "vical.cli", "serve-baseline", "--port", str(port)],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=120,
        )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use; choose another "
        "--port (0: any free port) or stop what listens there"
    ]


def test_serve_baseline_help_says_where_the_expert_falls_back_to_random():
    r = subprocess.run(
        [sys.executable, "-m", "vical.cli", "serve-baseline", "--help"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    text = " ".join(r.stdout.split())
    assert "expert" in text and "falls back to the random policy" in text
    assert "vical baseline expert" in text


# A command run as its own process whose teardown waits, after the command is over,
# until the test says go: a signal sent meanwhile lands "after it finished".
LATE = """
import atexit, sys, time
from pathlib import Path
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
def hold():
    ready.write_text("")
    while not go.exists():
        time.sleep(0.01)
atexit.register(hold)  # registered first, so it runs last, in Python's teardown
sys.argv = ["vical", *sys.argv[3:]]
from vical.cli import main
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_after_leaderboard_build_finished_leaves_status_0(tmp_path, sig):
    subs, site = tmp_path / "submissions", tmp_path / "site"
    subs.mkdir()
    ready, go = tmp_path / "ready", tmp_path / "go"
    args = [str(ready), str(go), "leaderboard", "build", "--submissions", str(subs)]
    proc = subprocess.Popen(
        [sys.executable, "-c", LATE, *args, "--out", str(site)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    try:
        while not ready.exists():  # the command is over; Python is tearing down
            assert proc.poll() is None, proc.communicate()
            threading.Event().wait(0.01)
        proc.send_signal(sig)
        go.write_text("")
    finally:
        code, out, err = _end(proc)
    assert code == 0, err
    assert (site / "index.html").is_file() and "Traceback" not in err


@pytest.mark.parametrize("where", ["stop_signals", "SignalScope"])
def test_a_second_signal_ends_with_an_interrupted_line(where):
    """What `wm couple`, `dataset build` and a Ray eval print after a double Ctrl-C: the
    second signal's exit, in both places it is handled."""
    enter = (
        "from vical.cli._common import stop_signals as scope\nctx = scope()"
        if where == "stop_signals"
        else "from vical.run.pool import SignalScope\nctx = SignalScope()"
    )
    code = f"""
import os, signal
{enter}
with ctx:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pause()
    except KeyboardInterrupt:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pause()
"""
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=HANG
    )
    assert r.returncode == 130, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "interrupted: stopped at once by a second signal; finished work is kept"
    ), r.stderr
