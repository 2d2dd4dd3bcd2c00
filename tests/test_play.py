"""vical play: a person's episodes through the browser, written as a `human` run.

The browser tests press real keys in headless Chromium on the served page; what
they check is read back from the episode files the runner wrote, then bundled,
verified by replay and reported.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import HANG

from vical.play.human import Bridge, HumanAgent, Refused
from vical.play.server import make_server
from vical.play.session import PlaySession, key_bindings
from vical.run.results import EvalResult, RunManifest, load_results
from vical.spec import get_task, select_tasks

# The shortest winning route from taxi/state1's start (found by
# vical.demos.experts.bfs_expert; the test checks it still wins).
TAXI_WIN = ["Up", "Up", "Up", "Pickup", "Down", "Down"] + ["Left"] * 4 + ["Down", "Down", "Dropoff"]
TASKS = "taxi/state1,cliffwalking/base"


def _result(run: Path, name: str) -> EvalResult:
    return EvalResult.model_validate_json(
        (run / "episodes" / name / "eval_result.json").read_text()
    )


def _log(run: Path, name: str) -> list[dict]:
    text = (run / "episodes" / name / "log.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _keys(obj) -> set[str]:
    """Every key of a JSON value, at any depth."""
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def _post(url: str, path: str, body: dict, kind: str = "application/json") -> tuple[int, dict]:
    req = urllib.request.Request(
        url.rstrip("/") + path, data=json.dumps(body).encode(), headers={"Content-Type": kind}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_key_bindings_arrows_first_letters_then_spares():
    keys = key_bindings(["Down", "Up", "Right", "Left", "Pickup", "Dropoff"])
    assert keys == {
        "Down": "ArrowDown",
        "Up": "ArrowUp",
        "Right": "ArrowRight",
        "Left": "ArrowLeft",
        "Pickup": "p",
        "Dropoff": "d",
    }
    ale = select_tasks("pong")[0].action_names  # 6 ALE actions, combinations included
    bound = key_bindings(ale)
    assert len(set(bound.values())) == len(ale)  # every action its own key


def test_bridge_refuses_wrong_step_unknown_action_and_idle():
    bridge = Bridge(["Up", "Down"])
    with pytest.raises(Refused, match="no decision is due"):
        bridge.decide(0, "Up", "button")
    with pytest.raises(Refused, match="not one of this task's actions"):
        bridge.decide(0, "Jump", "button")


def test_play_session_over_http_and_resume(tmp_path):
    """The JSON routes alone: refusals, one decision per request, resume after a stop."""
    run = tmp_path / "human-p9"
    tasks = select_tasks("cliffwalking/base,taxi/state1")
    with PlaySession(run, tasks, "p9") as session:
        server = make_server(session)
        server.start()
        try:
            url = server.url
            state = json.loads(urllib.request.urlopen(url + "api/state", timeout=10).read())
            assert state["phase"] == "brief" and state["task"]["id"] == "cliffwalking/base"
            assert not _keys(state) & {"score", "passed", "reward", "outcome"}
            # a cross-site form post and a foreign Host header are refused
            assert _post(url, "/api/start", {}, kind="text/plain")[0] == 415
            req = urllib.request.Request(url + "api/state", headers={"Host": "evil.example:80"})
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=10)
            assert e.value.code == 403
            assert _post(url, "/api/act", {"step": 0, "action": "Up"})[0] == 409
            # demo videos answer byte ranges, so the page can seek in them
            whole = urllib.request.urlopen(url + "demo/0.mp4", timeout=30).read()
            assert whole[4:8] == b"ftyp"
            for header, part in (("bytes=0-99", whole[:100]), ("bytes=-10", whole[-10:])):
                req = urllib.request.Request(url + "demo/0.mp4", headers={"Range": header})
                with urllib.request.urlopen(req, timeout=30) as r:
                    assert r.status == 206 and r.read() == part
                    assert r.headers["Content-Range"].endswith(f"/{len(whole)}")
            code, state = _post(url, "/api/start", {})
            assert code == 200 and state["phase"] == "play" and state["play"]["step"] == 0
            assert state["play"]["frame"].startswith("data:image/png;base64,")
            code, state = _post(url, "/api/act", {"step": 0, "action": "Up", "input": "button"})
            assert code == 200 and state["play"]["step"] == 1
            # a second press for the frame already decided is refused, not applied
            code, body = _post(url, "/api/act", {"step": 0, "action": "Up"})
            assert code == 409 and "step 1" in body["error"]
            # nothing in the state a page gets reveals reward, score, pass or outcome
            assert not _keys(state) & {"score", "passed", "reward", "outcome"}
        finally:
            server.close()
    # stopped mid-episode: nothing of it is kept; the same session starts it again
    assert not (run / "episodes").exists() or not any((run / "episodes").iterdir())
    assert not (run / ".partial").exists() or not any((run / ".partial").iterdir())
    with PlaySession(run, tasks, "p9") as session:
        assert [i.task.id for i in session.pending()] == ["cliffwalking/base", "taxi/state1"]
        session.start()
        session.act(0, "Right", "key:ArrowRight")  # into the cliff
        assert session.phase() == "over"
        session.next()
        assert session.state()["task"]["id"] == "taxi/state1"
    # a third opening skips the finished episode
    with PlaySession(run, tasks, "p9") as session:
        assert [i.task.id for i in session.pending()] == ["taxi/state1"]
    # another participant may not continue this person's folder
    from vical.errors import RunFolderError

    with pytest.raises(RunFolderError, match="--participant p9"):
        PlaySession(run, tasks, "p10").open()


def test_human_agent_records_wall_time_and_input():
    import numpy as np

    from vical.agent import EpisodeContext, Observation

    bridge = Bridge(["Up", "Down"])
    agent = HumanAgent(bridge, "p1")
    task = get_task("cliffwalking/base")
    agent.start(EpisodeContext(task, 0, 0, ["Up", "Down"], 16))
    out = {}

    def play():
        obs = Observation(0, np.zeros((4, 4, 3), np.uint8), "x", None)
        out["d"] = agent.act(obs)
        bridge.finish()

    t = threading.Thread(target=play)
    t.start()
    bridge.wait_first()
    bridge.decide(0, "Down", "key:ArrowDown")
    t.join(5)
    d = out["d"]
    assert d.action == "Down"
    session, decision = d.records
    assert session == {
        "type": "agent_session",
        "backend": "human",
        "settings": {"participant": "p1"},
        "task": "cliffwalking/base",
    }
    assert decision["input"] == "key:ArrowDown" and decision["wall_seconds"] >= 0


@pytest.fixture
def play_server(tmp_path):
    run = tmp_path / "human-p01"
    session = PlaySession(run, select_tasks(TASKS), "p01", frames="all").open()
    server = make_server(session)
    server.start()
    try:
        yield run, server.url
    finally:
        server.close()
        session.close()


def _wait_step(page, step: int) -> None:
    page.wait_for_function(
        "s => document.getElementById('over').hidden === false || "
        "document.getElementById('frame').dataset.step === String(s)",
        arg=step,
        timeout=30_000,
    )


def test_browser_plays_taxi_to_victory_and_cliffwalking_into_the_cliff(
    browser, play_server, tmp_path
):
    run, url = play_server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    # the brief: the rules text the model gets, the budget, the keys, the demo videos
    page.wait_for_selector("#brief:not([hidden])")
    taxi = get_task("taxi/state1")
    assert page.inner_text("#rules") == taxi.env.rules.basic.strip()
    assert page.inner_text("#budget") == str(taxi.max_steps)
    videos = page.locator("#demos video")
    assert videos.count() == len(taxi.variant.demos)
    assert (
        page.evaluate("fetch(document.querySelector('#demos video').src).then(r => r.status)")
        == 200
    )
    page.keyboard.press("Enter")
    page.wait_for_selector("#play:not([hidden])")
    keys = key_bindings(taxi.action_names)
    for i, a in enumerate(TAXI_WIN):
        assert page.get_attribute("#frame", "data-step") == str(i)
        page.keyboard.press(keys[a])
        _wait_step(page, i + 1)
    page.wait_for_selector("#over:not([hidden])")
    assert "score" not in page.inner_text("body").lower().replace("the score is never shown", "")
    page.keyboard.press("Enter")
    page.wait_for_selector("#brief:not([hidden])")
    assert page.inner_text("#brief-title").startswith("CliffWalking")
    page.keyboard.press("Enter")
    page.wait_for_selector("#play:not([hidden])")
    page.keyboard.press("ArrowRight")
    page.wait_for_selector("#over:not([hidden])")
    page.keyboard.press("Enter")
    page.wait_for_selector("#done:not([hidden])")

    # the episodes, as the runner wrote them
    manifest = RunManifest.model_validate_json((run / "manifest.json").read_text())
    assert manifest.agent == "human" and manifest.agent_settings == {"participant": "p01"}
    won = _result(run, "taxi__state1__r0")
    assert (won.agent, won.outcome, won.passed, won.score) == ("human", "Victory", True, 100.0)
    assert won.actions == TAXI_WIN
    fell = _result(run, "cliffwalking__base__r0")
    assert (fell.outcome, fell.passed, fell.actions) == ("Terminated", False, ["Right"])
    assert fell.failure_mode == "early_termination"
    decisions = [r for r in _log(run, "taxi__state1__r0") if r["type"] == "decision"]
    assert [d["action"] for d in decisions] == TAXI_WIN
    assert all(d["input"].startswith("key:") and d["wall_seconds"] >= 0 for d in decisions)
    assert len(list((run / "episodes" / "taxi__state1__r0" / "frames").glob("*.png"))) == 14

    # bundled, verified by replay, and reported as a Human row
    from vical.report.document import build_document, write_document
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen
    from vical.submit.verify import verify_bundle

    priv, pub = keygen(tmp_path / "keys" / "lab")
    bundle = tmp_path / "human.tar.gz"
    make_bundle(run, priv, bundle, team="lab", partial=True)
    verdict = verify_bundle(bundle, pubkeys=[pub], workers=1, progress=False)
    assert verdict.ok, verdict.mismatches
    assert {r.task_id: r.passed for r in verdict.results} == {
        "taxi/state1": True,
        "cliffwalking/base": False,
    }
    doc = build_document([run])
    paths = write_document(doc, tmp_path / "report", html=True)
    md = paths["md"].read_text()
    assert "| Human: human-p01 |" in md
    assert "Human (paper)" in md
    assert len(load_results(run)) == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "--participant is required"),
        (["-p", "a b"], "--participant 'a b'"),
        (["-p", "p1", "--clip", "x"], "goes with --record demo"),
        (["-p", "p1", "--tasks", "nosuchgame"], "matches no task"),
    ],
)
def test_play_command_refuses_bad_options_in_one_line(args, needle, tmp_path):
    from typer.testing import CliRunner

    from vical.cli import app

    r = CliRunner().invoke(app, ["play", "--no-open", "--out", str(tmp_path / "o"), *args])
    assert r.exit_code == 2 and needle in r.output.replace("\n", " "), r.output


@pytest.mark.parametrize("gap_ms", [70, 10])
def test_browser_queues_keys_pressed_before_the_next_screen(browser, play_server, gap_ms):
    """13 keys pressed 70 ms apart (as a person types ahead; on a slow machine faster than
    the screens come) or 10 ms apart (surely faster): every one is applied, in order,
    and the page lists exactly the moves the episode's log holds."""
    run, url = play_server
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector("#brief:not([hidden])")
    page.keyboard.press("Enter")
    page.wait_for_selector("#play:not([hidden])")
    keys = key_bindings(get_task("taxi/state1").action_names)
    queued_seen = False
    for a in TAXI_WIN:
        page.keyboard.press(keys[a])
        page.wait_for_timeout(gap_ms)
        queued_seen = queued_seen or page.locator("#queue").is_visible()
    page.wait_for_selector("#over:not([hidden])", timeout=30_000)
    decisions = [r for r in _log(run, "taxi__state1__r0") if r["type"] == "decision"]
    assert [d["action"] for d in decisions] == TAXI_WIN
    assert _result(run, "taxi__state1__r0").outcome == "Victory"
    shown = page.locator("#over-applied li").all_inner_texts()
    assert shown == [d["action"] for d in decisions]
    assert page.locator("#over-dropped").is_hidden()
    # a move pressed ahead of its screen is marked so in the log
    queued = [d for d in decisions if d["input"].endswith("(queued)")]
    assert queued or not queued_seen
    # (whether a 10 ms burst outruns the screens depends on the machine's load; when it
    # does, the queue showed and the log marks the moves it carried, checked above)


def test_header_counts_episodes_not_tasks(browser, tmp_path):
    """With --runs 2 of one task the header says episode 1 of 2, then episode 2 of 2."""
    session = PlaySession(tmp_path / "h", select_tasks("cliffwalking/base"), "p3", runs=2).open()
    server = make_server(session)
    server.start()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url)
        page.wait_for_selector("#brief:not([hidden])")
        for k in (1, 2):
            assert page.inner_text("#progress").endswith(f"· episode {k} of 2")
            page.keyboard.press("Enter")
            page.wait_for_selector("#play:not([hidden])")
            page.keyboard.press("ArrowRight")  # into the cliff: the episode ends
            page.wait_for_selector("#over:not([hidden])")
            page.keyboard.press("Enter")
            page.wait_for_selector("#brief:not([hidden]), #done:not([hidden])")
        assert page.locator("#done").is_visible()
    finally:
        server.close()
        session.close()


def test_play_command_stops_on_sigterm_mid_episode(tmp_path):
    """`vical play` stops on SIGTERM as on Ctrl-C once a frame was rendered (SDL
    started): within 10 s, status 0, and the half-played episode leaves nothing."""
    import os
    import re
    import signal
    import subprocess
    import sys

    run = tmp_path / "human-p5"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "vical.cli", "play", "-p", "p5", "-t", "taxi/state1"),
            *("--no-open", "--port", "0", "-o", str(run)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        start_new_session=True,
    )
    try:
        url = None
        for _ in range(10):
            m = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", proc.stdout.readline())
            if m:
                url = m.group(1)
                break
        assert url, "vical play printed no address"
        code, state = _post(url, "/api/start", {})
        assert code == 200 and state["play"]["frame"].startswith("data:image/png")
        code, state = _post(url, "/api/act", {"step": 0, "action": "Up"})
        assert code == 200 and state["play"]["step"] == 1
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 0, err
        assert out.rstrip().endswith("SIGTERM: stopped; run the same command to continue")
        assert "Traceback" not in err
        assert not (run / "episodes").exists() or not any((run / "episodes").iterdir())
        assert not any((run / ".partial").iterdir())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
