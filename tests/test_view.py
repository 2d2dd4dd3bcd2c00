"""vical view: the task × runs table and the episode player, served and exported.

Two real runs: the random reference (frames not saved, so the viewer replays
them) and a model run against the project's baseline server with malformed
replies injected (frames saved; format retries in the log). The browser's
frames, actions and model texts are checked against each episode's files.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG
from PIL import Image

from vical.envs.core import frame_sha256
from vical.run import RunOptions, run_eval
from vical.run.results import EvalResult
from vical.serve import BaselineServer
from vical.spec import select_tasks
from vical.view.data import Catalog, ViewError
from vical.view.server import make_server
from vical.view.site import data_script, export

TASKS = "taxi/state1,cliffwalking/base"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("view")
    tasks = select_tasks(TASKS)
    run_eval(
        tasks,
        d / "random-ref",
        options=RunOptions(runs=1, workers=1, progress=False, frames="none"),
    )
    with BaselineServer(fault_rate=0.3, fault_kinds=("malformed",)) as srv:
        summary = run_eval(
            tasks,
            d / "baseline",
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "random"},
            options=RunOptions(workers=1, progress=False, frames="all"),
        )
    assert summary.finished == 2 and not summary.failed
    return d


def _result(run: Path, ep: str) -> EvalResult:
    return EvalResult.model_validate_json((run / "episodes" / ep / "eval_result.json").read_text())


def _texts(run: Path, ep: str) -> dict[int, list[str]]:
    """Model reply texts per decision step, in order, from the episode's log."""
    out: dict[int, list[str]] = {}
    for line in (run / "episodes" / ep / "log.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["type"] == "response":
            out.setdefault(rec["step"], []).append(rec["text"])
    return out


def _sha(png: bytes) -> str:
    return frame_sha256(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")))


def test_catalog_reads_results_lazily_and_replays_missing_frames(runs):
    with Catalog([runs / "random-ref", runs / "baseline"]) as c:
        index = c.index()
        assert [r["agent"] for r in index["runs"]] == ["random", "openai-chat"]
        assert [t["task"] for t in index["tasks"]] == ["cliffwalking/base", "taxi/state1"]
        r = _result(runs / "random-ref", "taxi__state1__r0")
        pngs = c.frames("r0", "taxi__state1__r0")  # not saved: replayed and hash-checked
        assert [_sha(p) for p in pngs] == r.frame_hashes
        detail = c.episode("r1", "taxi__state1__r0")
        retried = [t for t in detail["turns"] if t["decision"] and t["decision"]["format_retries"]]
        assert retried, "the injected malformed replies should show as format retries"
        assert all(len(t["attempts"]) == t["decision"]["format_retries"] + 1 for t in retried)
        with pytest.raises(ViewError, match="no episode"):
            c.episode("r0", "taxi__state9__r0")
    with pytest.raises(ViewError, match=r"no manifest\.json"):
        Catalog([runs])


def test_data_scripts_cannot_close_a_script_tag():
    text = data_script("x", {"t": "</script><script>alert(1)</script>"}).decode()
    assert "</script>" not in text and "\\u003c/script>" in text


def test_a_bundle_opens_like_its_run(runs, tmp_path):
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen

    priv, _ = keygen(tmp_path / "k")
    bundle = tmp_path / "b.tar.gz"
    make_bundle(runs / "baseline", priv, bundle, team="t", partial=True)
    with Catalog([bundle]) as c:
        assert sorted(c.runs[0].results) == ["cliffwalking__base__r0", "taxi__state1__r0"]
        r = c.runs[0].results["cliffwalking__base__r0"]
        # bundles carry no frames: replayed
        assert [_sha(p) for p in c.frames("r0", "cliffwalking__base__r0")] == r.frame_hashes


def _check_player(page, run: Path, key: str, ep: str, fetch) -> int:
    """Step through every frame; compare frame, action and model text with the files.

    Returns how many model replies the page showed."""
    r = _result(run, ep)
    texts = _texts(run, ep)
    replies = 0
    pane = page.locator(f'.pane[data-episode="{key}/{ep}"]')
    for i in range(len(r.frame_hashes)):
        img = pane.locator(".frame")
        assert img.get_attribute("data-step") == str(i)
        src = img.get_attribute("src")
        assert src == f"frames/{key}/{ep}/{i}.png"
        assert _sha(fetch(src)) == r.frame_hashes[i]
        action = pane.locator(".turn-action").inner_text()
        assert action == (r.actions[i] if i < len(r.actions) else "—")
        shown = pane.locator(".model-text").all_inner_texts()
        assert [s.strip() for s in shown] == [t.strip() for t in texts.get(i, [])]
        replies += len(shown)
        if i + 1 < len(r.frame_hashes):
            page.keyboard.press("ArrowRight")
    return replies


def _filter_and_open(page, env: str, key: str, ep: str) -> None:
    page.wait_for_selector("#tasks-body tr")
    page.select_option("#f-env", env)
    rows = page.locator("#tasks-body tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-env") == env
    page.click(f'a[data-episode="{key}/{ep}"]')
    page.wait_for_selector(f'.pane[data-episode="{key}/{ep}"] .frame[data-step="0"]')


def test_browser_table_filter_player_and_compare(browser, runs):
    with Catalog([runs / "random-ref", runs / "baseline"]) as c:
        server = make_server(c)
        server.start()
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(server.url)
            page.wait_for_selector("#tasks-body tr")
            assert page.locator("#tasks-body tr").count() == 2

            def fetch(src: str) -> bytes:
                return page.request.get(server.url + src).body()

            # sorting by the model run's score puts the higher score first
            page.click('th[data-key="r1:S"]')
            first = page.locator("#tasks-body tr").first.get_attribute("data-task")
            scores = {t: _result(runs / "baseline", t.replace("/", "__") + "__r0").score
                      for t in ("taxi/state1", "cliffwalking/base")}  # fmt: skip
            assert scores[first] == max(scores.values())
            # filter to one environment, open the model's episode, step through it
            _filter_and_open(page, "taxi", "r1", "taxi__state1__r0")
            shown = _check_player(page, runs / "baseline", "r1", "taxi__state1__r0", fetch)
            # every decision's reply, plus the retried (malformed) ones
            assert shown > _result(runs / "baseline", "taxi__state1__r0").steps
            # back to the table, open the random reference's (replayed frames)
            page.click("#back")
            page.wait_for_selector("#table-view:not([hidden])")
            page.select_option("#f-env", "")
            _filter_and_open(page, "cliffwalking", "r0", "cliffwalking__base__r0")
            _check_player(page, runs / "random-ref", "r0", "cliffwalking__base__r0", fetch)
            # two runs of one task side by side
            page.click("#back")
            page.wait_for_selector("#table-view:not([hidden])")
            page.check('.ep:has(a[data-episode="r0/cliffwalking__base__r0"]) input')
            page.check('.ep:has(a[data-episode="r1/cliffwalking__base__r0"]) input')
            page.click("#compare")
            page.wait_for_selector(".pane >> nth=1")
            assert page.locator(".pane").count() == 2
            page.keyboard.press("End")
            r0 = _result(runs / "random-ref", "cliffwalking__base__r0")
            steps = page.locator(".pane .frame").evaluate_all("els => els.map(e => e.dataset.step)")
            assert steps[0] == str(len(r0.frame_hashes) - 1)
            # the demonstration package is beside the player
            videos = page.locator(".pane >> nth=0").locator(".demos video")
            assert videos.count() == len(select_tasks("cliffwalking/base")[0].variant.demos)
            assert fetch(videos.first.get_attribute("src"))[4:8] == b"ftyp"
        finally:
            server.close()


def test_static_export_works_from_file_urls(browser, runs, tmp_path):
    from typer.testing import CliRunner

    from vical.cli import app

    site = tmp_path / "site"
    args = ["view", str(runs / "random-ref"), str(runs / "baseline"), "--export", str(site)]
    r = CliRunner().invoke(app, [*args, "--workers", "2"])  # frames replayed in 2 processes
    assert r.exit_code == 0, r.output
    index_html = site / "index.html"
    assert f"open {index_html}" in r.output.replace("\n", "")
    assert len(list((site / "frames" / "r0" / "taxi__state1__r0").glob("*.png"))) == len(
        _result(runs / "random-ref", "taxi__state1__r0").frame_hashes
    )
    # nothing outside the folder is needed: every reference is relative
    html = index_html.read_text()
    assert 'src="/' not in html and 'href="/' not in html
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(index_html.as_uri())

    def fetch(src: str) -> bytes:
        return (index_html.parent / src).read_bytes()

    _filter_and_open(page, "taxi", "r0", "taxi__state1__r0")
    loaded = page.locator(".pane .frame").evaluate("img => img.complete && img.naturalWidth > 0")
    assert loaded, "the frame image did not load from file://"
    _check_player(page, runs / "random-ref", "r0", "taxi__state1__r0", fetch)
    assert not errors
    # exporting again over an earlier export replaces it; a foreign folder is refused
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with Catalog([runs / "random-ref"]) as c:
        export(c, tmp_path / "site")
        with pytest.raises(ViewError, match="not a viewer export"):
            export(c, tmp_path / "other")
    assert not (tmp_path / "site" / "data" / "ep" / "r1").exists()


def test_report_and_leaderboard_link_into_an_exported_viewer(browser, runs, tmp_path):
    from vical.report.document import build_document
    from vical.report.html import render_html
    from vical.submit import leaderboard
    from vical.submit.bundle import make_bundle
    from vical.submit.keys import keygen

    # report.html: the header links the viewer when one is given, and only then
    doc = build_document([runs / "baseline"])
    assert 'id="viewer-link" href="view/index.html"' in render_html(doc, {}, "view/index.html")
    assert "viewer-link" not in render_html(doc, {})

    # the leaderboard: a submission's page links the viewer exported next to the board
    priv, pub = keygen(tmp_path / "keys" / "t")
    bundle = tmp_path / "b.tar.gz"
    make_bundle(runs / "baseline", priv, bundle, team="Team V", partial=True)
    subs = tmp_path / "subs"
    entry = leaderboard.add(bundle, pubkeys=[pub], submissions=subs, workers=1, progress=False)
    sid = entry.stem
    site = tmp_path / "site"
    leaderboard.build(site, subs)
    assert "viewer" not in (site / "reports" / f"{sid}.html").read_text()
    with Catalog([bundle]) as c:
        export(c, site / "view" / sid)
    leaderboard.build(site, subs)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto((site / "reports" / f"{sid}.html").as_uri())
    page.click("text=Every episode in the viewer")
    page.wait_for_selector("#tasks-body tr")
    assert page.url.endswith(f"view/{sid}/index.html")
    # a filtered address opens the table filtered
    page.goto((site / "view" / sid / "index.html").as_uri() + "#env=cliffwalking")
    page.wait_for_function("document.querySelectorAll('#tasks-body tr').length === 1")
    assert page.input_value("#f-env") == "cliffwalking"


def test_server_answers_unknown_paths_with_404_and_only_reads(runs):
    import urllib.error
    import urllib.request

    with Catalog([runs / "random-ref"]) as c:
        server = make_server(c)
        server.start()
        try:
            for path in (
                "data/ep/r0/taxi__state9__r0.js",
                "data/ep/r7/taxi__state1__r0.js",
                "frames/r0/taxi__state1__r0/999.png",
                "demos/nosuchgame__x/0.mp4",
                "static/../../etc/passwd",
                "elsewhere",
            ):
                with pytest.raises(urllib.error.HTTPError) as e:
                    urllib.request.urlopen(server.url + path, timeout=30)
                assert e.value.code == 404, path
                assert json.loads(e.value.read())["error"]
            req = urllib.request.Request(
                server.url + "data/index.js",
                data=b"{}",
                headers={"Content-Type": "application/json"},
            )
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req, timeout=30)
            assert e.value.code == 405
            with urllib.request.urlopen(server.url + "data/index.js", timeout=30) as r:
                assert r.read().startswith(b'vicalData("index",')
        finally:
            server.close()


# ------------------------------------------------------------------ the real command


@pytest.fixture(scope="module")
def highway_run(tmp_path_factory):
    """A 25-decision highway episode (the baseline server's `first` model keeps to the
    left lane until it hits a car), frames not saved: the viewer must replay them."""
    run = tmp_path_factory.mktemp("hw") / "first"
    with BaselineServer() as srv:
        summary = run_eval(
            select_tasks("highway/seed79-l5-d15"),
            run,
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "first"},
            options=RunOptions(workers=1, progress=False, frames="none"),
        )
    assert summary.finished == 1
    return run


def _view_command(*runs: Path):
    """`vical view RUN... --no-open --port 0` in its own process: (process, its URL)."""
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vical.cli", "view", *map(str, runs), "--no-open", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    for _ in range(10):
        m = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", proc.stdout.readline())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("vical view printed no address")


def _stop(proc) -> None:
    import os
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_first_replayed_frame_arrives_after_a_loading_line(browser, highway_run):
    """A cold `vical view`: a replayed episode's first frame arrives after the click
    (how fast is not asserted here: a loaded machine would flake it); until a frame
    arrives the pane says it is replaying."""
    ep = "highway__seed79-l5-d15__r0"
    r = _result(highway_run, ep)
    assert len(r.frame_hashes) > 20 and not (highway_run / "episodes" / ep / "frames").exists()
    proc, url = _view_command(highway_run)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        page.wait_for_selector("#tasks-body tr")
        page.click(f'a[data-episode="r0/{ep}"]')
        page.wait_for_function(
            "() => { const i = document.querySelector('.pane .frame');"
            " return i && i.complete && i.naturalWidth > 0; }",
            timeout=HANG * 1000,
        )
        assert page.locator(".pane .frame-status").is_hidden()
        # a frame still on its way: the pane says so, and clears when it arrives
        held = []
        page.route("**/frames/r0/*/5.png", lambda route: held.append(route))
        page.keyboard.press("End")
        page.keyboard.press("Home")
        for _ in range(5):
            page.keyboard.press("ArrowRight")
        page.wait_for_function("() => document.querySelector('.pane .frame').dataset.step === '5'")
        page.wait_for_timeout(200)
        status = page.locator(".pane .frame-status")
        assert status.is_visible()
        assert status.inner_text().startswith("replaying the episode's actions: frame 5 of")
        assert held, "the frame request should be held by the test"
        held[0].continue_()
        status.wait_for(state="hidden")
        src = page.locator(".pane .frame").get_attribute("src")
        assert _sha(page.request.get(url + src).body()) == r.frame_hashes[5]
    finally:
        _stop(proc)


def test_view_stops_on_sigterm_after_replaying_frames(highway_run):
    """SIGTERM once a frame was rendered (SDL started) stops the server as Ctrl-C does."""
    import signal
    import urllib.request

    ep = "highway__seed79-l5-d15__r0"
    proc, url = _view_command(highway_run)
    try:
        with urllib.request.urlopen(f"{url}frames/r0/{ep}/3.png", timeout=60) as resp:
            assert _sha(resp.read()) == _result(highway_run, ep).frame_hashes[3]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG)  # a hang guard, not a speed bound
        assert proc.returncode == 0, err
        assert out.rstrip().endswith("SIGTERM: stopped") and "Traceback" not in err
    finally:
        _stop(proc)


def test_outcome_filter_uses_one_vocabulary(browser, runs):
    """The table and its filter speak vical.outcomes' names: passed or a failure mode."""
    from vical.outcomes import FAILURE_MODES

    with Catalog([runs / "random-ref", runs / "baseline"]) as c:
        index = c.index()
        assert index["outcomes"] == ["passed", *FAILURE_MODES]
        server = make_server(c)
        server.start()
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(server.url)
            page.wait_for_selector("#tasks-body tr")
            options = page.locator("#f-outcome option").all_inner_texts()
            eps = [e for t in index["tasks"] for es in t["runs"].values() for e in es]
            seen = {"passed" if e["passed"] else e["failure_mode"] for e in eps}
            assert options[0] == "all" and set(options[1:]) == seen
            assert set(options[1:]) <= set(index["outcomes"])
            for outcome in options[1:]:
                page.select_option("#f-outcome", outcome)
                labels = page.locator("#tasks-body .ep a").all_inner_texts()
                assert any(label.endswith(" " + outcome) for label in labels), outcome
        finally:
            server.close()
