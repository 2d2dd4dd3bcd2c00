"""vical play --record: a person's clip or start sequence replaces generated material.

The recording is made in headless Chromium on the served page (real key presses),
written into a copy of the environment's task file with a ``human:`` provenance,
and then taken through the maintainer's commands as subprocesses: ``vical demos
pack`` and ``vical tasks check`` on the folder, a ``vical eval`` run and a demo
render with the folder in ``$VICAL_TASKS_DIR``. A label or consent changed by hand
afterwards is refused by the check.
"""

from __future__ import annotations

import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG

from vical.play.record import SET_START, Provenance
from vical.play.session import PlaySession, key_bindings
from vical.spec import (
    TASKS_DIR,
    TaskSpec,
    get_task,
    human_source,
    load_env_file,
    parse_human_source,
    select_tasks,
    tasks_digest,
)

PLAYER = "Ada Tester"
CONSENT = "I agree that my play is published with vical as task data under its licence"
DAY = datetime.date(2026, 1, 2)
SOURCE = human_source(PLAYER, DAY, CONSENT)
# cliffwalking's failure clip starts one row up, one cell right; Right then Down falls
CLIP, PLAYED = "cliff-fall", ["Right", "Down"]
# a start one row up and two cells right (the generated one walks three cells)
START_TASK, START = "cliffwalking/ledge-3", ["Up", "Right", "Right"]


def _vical(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vical.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )


def _done(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _clip(spec, variant: str, clip_id: str):
    v = next(v for v in spec.tasks if v.variant == variant)
    return next(c for c in v.demos if c.id == clip_id)


def _record_clip_with_the_command(browser, out: Path) -> None:
    """`vical play --record demo` served by the command, played with key presses."""
    proc = _vical(
        *("play", "--record", "demo", "--player", PLAYER, "--consent", CONSENT),
        *("--date", DAY.isoformat(), "-t", "cliffwalking/base", "--clip", CLIP),
        *("-o", str(out), "--no-open", "--port", "0"),
    )
    try:
        url = None
        for _ in range(10):
            m = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", proc.stdout.readline())
            if m:
                url = m.group(1)
                break
        assert url, "vical play printed no address"
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        page.wait_for_selector("#brief:not([hidden])")
        # the page says it is recording, for whom, and the consent given
        note = page.locator("#brief .record-note").inner_text()
        assert PLAYER in note and DAY.isoformat() in note and CONSENT in note
        assert f"clip {CLIP}" in note
        page.keyboard.press("Enter")
        page.wait_for_selector("#play:not([hidden])")
        assert CONSENT in page.locator("#play .record-note").inner_text()
        assert page.locator("#set-start").is_hidden()  # a clip ends by the game's rules
        keys = key_bindings(get_task("cliffwalking/base").action_names)
        for a in PLAYED:
            page.keyboard.press(keys[a])
        page.wait_for_selector("#over:not([hidden])", timeout=30_000)
        assert page.inner_text("#written-path") == str(out / "cliffwalking.yaml")
        shown_next = page.inner_text("#next-commands")
        assert f"vical tasks check {out}" in shown_next
        assert f"VICAL_TASKS_DIR={out} vical demos pack --env cliffwalking" in shown_next
    finally:
        proc.send_signal(signal.SIGTERM)
        code, stdout, err = _done(proc, timeout=HANG)
    assert code == 0, err
    assert f"recorded clip {CLIP} (2 moves) -> {out / 'cliffwalking.yaml'}" in stdout
    assert f"vical tasks check {out}" in stdout.split("next:")[1]


def _record_start_in_a_session(browser, out: Path) -> str:
    """A start recorded on the page of an in-process session; the last frame's data URL."""
    from vical.cli.play import write_recording
    from vical.play.server import make_server

    task = get_task(START_TASK)
    assert task.variant.init_actions != START
    prov = Provenance(PLAYER, CONSENT, DAY)
    session = PlaySession(
        out, [task], PLAYER, record="start", provenance=prov, writer=write_recording
    ).open()
    server = make_server(session)
    server.start()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url)
        page.wait_for_selector("#brief:not([hidden])")
        note = page.locator("#brief .record-note").inner_text()
        assert "start sequence" in note and CONSENT in note and PLAYER in note
        page.keyboard.press("Enter")
        page.wait_for_selector("#play:not([hidden])")
        assert page.locator("#set-start").is_visible()
        keys = key_bindings(task.action_names)
        for i, a in enumerate(START):
            page.keyboard.press(keys[a])
            page.wait_for_function(
                "s => document.getElementById('frame').dataset.step === String(s)", arg=i + 1
            )
        last = page.get_attribute("#frame", "src")
        page.keyboard.press("Enter")  # set the start here
        page.wait_for_selector("#over:not([hidden])", timeout=30_000)
        assert page.locator("#over-applied li").all_inner_texts() == START
        assert page.inner_text("#over-title") == "Recording over"
        assert page.inner_text("#progress").startswith(f"player {PLAYER} · 1 of 1 recordings")
        assert page.inner_text("#written-path") == str(out / "cliffwalking.yaml")
    finally:
        server.close()
        session.close()
    assert last is not None
    return last


def test_browser_recordings_go_through_check_pack_and_a_run(browser, tmp_path):
    """A demo clip (through the command) and a start sequence (through a session) recorded
    in the browser into one folder, which pack, check, a run and a render then take."""
    import base64

    from vical.envs import make_env
    from vical.play.human import encode_png

    out = tmp_path / "recorded"
    _record_clip_with_the_command(browser, out)
    last = _record_start_in_a_session(browser, out)

    # the task file: the clip replaced in every package that shows it, label from the game
    spec = load_env_file(out / "cliffwalking.yaml")
    before = load_env_file(TASKS_DIR / "cliffwalking.yaml")
    users = [v.variant for v in before.tasks if any(c.id == CLIP for c in v.demos)]
    assert users
    for variant in users:
        clip = _clip(spec, variant, CLIP)
        assert (clip.actions, clip.label, clip.source) == (PLAYED, "Terminated", SOURCE)
        assert clip.origin == "human"
        assert clip.init_actions == _clip(before, variant, CLIP).init_actions  # its own start
    assert parse_human_source(clip.source).consent == CONSENT
    raw = (out / "recordings" / f"cliffwalking__base__{CLIP}.yaml").read_text()
    assert "input: key:ArrowRight" in raw and "wall_seconds" in raw
    # the start: the task's start sequence replaced, nothing else of the file changed
    name = START_TASK.split("/")[1]
    variant = next(v for v in spec.tasks if v.variant == name)
    assert (variant.kind, variant.init_actions, variant.init_source) == (
        "human-init",
        START,
        SOURCE,
    )
    assert variant.init_origin == "human"
    old = next(v for v in before.tasks if v.variant == name)
    assert variant.model_copy(
        update={"init_actions": old.init_actions, "init_source": old.init_source, "demos": []}
    ) == old.model_copy(update={"demos": []})
    assert [v.variant for v in spec.tasks] == [v.variant for v in before.tasks]
    # the task now opens on the screen the player saw when setting the start
    env = make_env(TaskSpec(env=spec, variant=variant), starts="replayed")
    try:
        png = base64.b64encode(encode_png(env.reset())).decode()
    finally:
        env.close()
    assert last == "data:image/png;base64," + png
    # both are recorded: the same sessions opened again have nothing left to do
    from vical.cli.play import write_recording

    prov = Provenance(PLAYER, CONSENT, DAY)
    for kind, task_id, clip in (("demo", "cliffwalking/base", CLIP), ("start", START_TASK, None)):
        with PlaySession(
            out,
            select_tasks(task_id),
            PLAYER,
            record=kind,
            clip=clip,
            provenance=prov,
            writer=write_recording,
        ) as again:
            assert again.phase() == "done" and again.pending() == []

    # the maintainer's commands on the folder: pack, check, then a run and a render
    overlay = {"VICAL_TASKS_DIR": str(out)}
    code, text, err = _done(_vical("demos", "pack", "--env", "cliffwalking", env=overlay))
    assert code == 0 and "cliffwalking: " in text, err
    assert _clip(load_env_file(out / "cliffwalking.yaml"), "base", CLIP).source == SOURCE
    code, text, err = _done(_vical("tasks", "check", str(out)))
    assert code == 0 and "no problems in 1 task file(s), 5 task(s), 3 demo clip(s)" in err, (
        text + err
    )
    # the check names what a person recorded, with the player, the date and the consent
    path = out / "cliffwalking.yaml"
    for what in (f"clip {CLIP}", f"start of {START_TASK}"):
        assert f"{path}: {what}: recorded by {PLAYER} on {DAY}; consent: {CONSENT}\n" in err
    assert err.count("recorded by") == 2
    run = tmp_path / "run"
    ev = _vical(
        *("eval", "--agent", "random", "--tasks", f"cliffwalking/base,{START_TASK}"),
        *("-o", str(run), "--skip-doctor", "--no-report"),
        env=overlay,
    )
    render = _vical("demos", "render", "cliffwalking/base", "-o", str(tmp_path / "d"), env=overlay)
    code, text, err = _done(ev)
    assert code == 0, err
    from vical.run.results import RunManifest, load_results

    manifest = RunManifest.model_validate_json((run / "manifest.json").read_text())
    assert manifest.tasks_digest == tasks_digest((TASKS_DIR, out)) != tasks_digest(TASKS_DIR)
    assert sorted(r.task_id for r in load_results(run)) == ["cliffwalking/base", START_TASK]
    code, text, err = _done(render)
    assert code == 0, err
    assert f"{CLIP}: {len(PLAYED) + 2} frames, Terminated" in text
    assert (tmp_path / "d" / f"{CLIP}.mp4").stat().st_size > 0

    # edited by hand afterwards: a label the replay does not give, an empty consent
    from typer.testing import CliRunner

    from vical.cli import app

    text = (out / "cliffwalking.yaml").read_text()
    for name, old_text, new_text, needle in (
        ("label", "label: Terminated", "label: Victory", "labelled 'Victory' but replays to"),
        ("consent", f"consent: {CONSENT}'\n", "consent: '\n", "empty consent line"),
    ):
        bad = tmp_path / f"bad-{name}"
        bad.mkdir()
        assert old_text in text
        (bad / "cliffwalking.yaml").write_text(text.replace(old_text, new_text, 1))
        r = CliRunner().invoke(app, ["tasks", "check", str(bad)])
        assert r.exit_code == 1 and needle in r.output, r.output


def test_start_recording_refuses_a_start_that_ends_the_game_or_has_no_move(tmp_path):
    from vical.cli.play import write_recording

    prov = Provenance(PLAYER, CONSENT, DAY)
    tasks = select_tasks("cartpole/seed44-right")
    for moves, needle in (
        # pushed one way the pole falls: the game's own end, within the budget
        (["Push Right"] * tasks[0].max_steps, "of the start sequence; a start must leave"),
        ([SET_START], "the start was set before any move"),
    ):
        with PlaySession(
            tmp_path, tasks, PLAYER, record="start", provenance=prov, writer=write_recording
        ) as session:
            session.start()
            for i, a in enumerate(moves):
                session.act(i, a, "key:test")
                if session.phase() == "over":
                    break
            state = session.state()
            assert state["phase"] == "over" and needle in state["over"]["error"]
            assert "written" not in state["over"]
            session.next()
            assert session.phase() == "brief"  # still to record
    assert not (tmp_path / "cartpole.yaml").exists()
    assert not (tmp_path / "recordings").exists()


def test_start_recording_refuses_a_task_without_a_start_sequence(tmp_path):
    from vical.cli.play import write_recording

    with pytest.raises(ValueError, match="taxi/state1 is a base task"):
        PlaySession(
            tmp_path,
            select_tasks("taxi/state1"),
            PLAYER,
            record="start",
            provenance=Provenance(PLAYER, CONSENT, DAY),
            writer=write_recording,
        )


REC_DEMO = ["--record", "demo", "--player", "A", "--consent", "ok"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--record", "demo", "--player", "Ada"], "--consent is required with --record"),
        (["--record", "demo", "--player", "Ada", "--consent", "  "], "--consent is required"),
        (["--record", "demo", "--consent", "I agree"], "--player is required with --record"),
        (["--record", "film", "--player", "A", "--consent", "ok"], "--record 'film'"),
        (["--record", "demo", "--player", "A, B", "--consent", "ok"], "may not hold"),
        (
            ["--record", "demo", "--player", "A", "--consent", "ok", "--date", "2026-13-01"],
            "--date '2026-13-01' is not a calendar date",
        ),
        (["--record", "demo", "-p", "p1", "--player", "A", "--consent", "ok"], "--participant"),
        (["-p", "p1", "--consent", "ok"], "go with --record"),
        (
            ["--record", "start", "--player", "A", "--consent", "ok", "-t", "taxi/state1"],
            "taxi/state1 is a base task",
        ),
        (
            [*REC_DEMO, "-t", "taxi/state1", "--clip", "nope"],
            "no clip 'nope'",
        ),
    ],
)
def test_record_refuses_without_player_or_consent_in_one_line(args, needle, tmp_path):
    from typer.testing import CliRunner

    from vical.cli import app

    r = CliRunner().invoke(app, ["play", "--no-open", "--out", str(tmp_path / "o"), *args])
    assert r.exit_code == 2 and needle in r.output.replace("\n", " "), r.output
    assert len([ln for ln in r.output.splitlines() if ln.startswith("error:")]) == 1
    assert not (tmp_path / "o").exists()


def test_write_start_keeps_the_rest_of_the_file(tmp_path):
    """A folded init_source (several lines) is replaced whole; nothing else changes."""
    from vical.authoring.yamlio import write_start

    env = next(
        e
        for e in ("seaquest", "enduro", "freeway", "demonattack", "battlezone")
        if "init_source: >-" in (TASKS_DIR / f"{e}.yaml").read_text()
    )
    shutil.copy(TASKS_DIR / f"{env}.yaml", tmp_path)
    before = load_env_file(tmp_path / f"{env}.yaml")
    lines = (tmp_path / f"{env}.yaml").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("    init_source: >-"))
    variant = next(
        ln.split(":", 1)[1].strip() for ln in reversed(lines[:at]) if ln.startswith("  - variant:")
    )
    v = next(x for x in before.tasks if x.variant == variant)
    new = v.init_actions[:-1] or v.init_actions
    write_start(env, variant, new, SOURCE, tasks_dir=tmp_path)
    after = load_env_file(tmp_path / f"{env}.yaml")
    changed = next(x for x in after.tasks if x.variant == variant)
    assert (changed.init_actions, changed.init_source) == (new, SOURCE)
    assert (
        changed.model_copy(update={"init_actions": v.init_actions, "init_source": v.init_source})
        == v
    )
    assert [x for x in after.tasks if x.variant != variant] == [
        x for x in before.tasks if x.variant != variant
    ]
    text = (tmp_path / f"{env}.yaml").read_text().splitlines()
    assert len(text) < len(lines)  # the folded lines went with their field
