"""``vical play``: a person plays tasks in the browser, written as a ``human`` run."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vical.cli._common import console, fail, say, select, serve_page

if TYPE_CHECKING:
    from vical.play.record import Provenance, Recording

_PARTICIPANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def play_cmd(
    participant: str = typer.Option(
        None, "--participant", "-p", help="Participant id (letters, digits, . _ -), e.g. p01."
    ),
    tasks: str = typer.Option(
        None,
        "--tasks",
        "-t",
        help="Comma-separated id globs, played in this order (default: every task).",
    ),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Run folder (default: runs/human-<participant>), or with --record the folder "
        "of recorded task files; resumes if it exists.",
    ),
    runs: int = typer.Option(1, "--runs", min=1, help="Episodes per task."),
    frames: str = typer.Option(
        "none", "--frames", help="Save PNG frames: none, failed or all (replay can rebuild them)."
    ),
    port: int = typer.Option(
        8765, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."
    ),
    open_browser: bool = typer.Option(
        True, "--open/--no-open", help="Open the page in the default browser."
    ),
    record: str = typer.Option(
        None,
        "--record",
        help="Record task material instead of playing episodes: 'demo' re-records a "
        "demonstration clip of each task (from the clip's start), 'start' the start sequence "
        "of each human-init task (from its seed). Needs --player and --consent; writes copies "
        "of the task files with the recording into OUT (default recorded/<kind>-<player>).",
    ),
    player: str = typer.Option(
        None, "--player", help="With --record: the player's name, written into the provenance."
    ),
    consent: str = typer.Option(
        None,
        "--consent",
        help="With --record: the consent line the player agreed to, written into the "
        "provenance, e.g. 'I agree that my play is published as task data under the "
        "project's licence'.",
    ),
    day: str = typer.Option(
        None,
        "--date",
        help="With --record: the recording date written into the provenance (YYYY-MM-DD; "
        "default: today, UTC).",
    ),
    clip: str = typer.Option(
        None, "--clip", help="With --record demo: the clip id to re-record (default: the first)."
    ),
) -> None:
    """Play tasks in the browser under the models' protocol (rules, demos, budget, no reward).

    Serves a page on 127.0.0.1 that shows each task's rules text and demonstration
    videos, then its start frame with one button (and key) per action. Each episode
    is written like a `vical eval` episode of agent `human`, so `vical report`
    shows the run as a Human row and `vical submit`/`vical verify` replay it.
    With --record the person records a demonstration clip or a start sequence
    instead, with provenance "human" and their consent line, into a folder of task
    files ready for `vical tasks check`. Stop with Ctrl-C; the same command
    continues where the person stopped.
    """
    from vical.play.server import make_server
    from vical.play.session import PlaySession

    if record is not None:
        provenance = _provenance(record, player, consent, day, participant)
        label = player
        folder = out or Path("recorded") / f"{record}-{_slug(player)}"
    else:
        if player is not None or consent is not None or day is not None:
            fail("--player, --consent and --date describe a recording; they go with --record")
        if participant is None:
            fail("--participant is required: the id the episodes are recorded under, e.g. -p p01")
        if not _PARTICIPANT.match(participant):
            fail(f"--participant {participant!r}: use 1-64 letters, digits, '.', '_' or '-'")
        provenance, label = None, participant
        folder = out or Path("runs") / f"human-{participant}"
    if clip is not None and record != "demo":
        fail("--clip chooses the clip to re-record; it goes with --record demo")
    chosen = select(tasks)
    try:
        session = PlaySession(
            folder,
            chosen,
            label,
            runs=runs,
            frames=frames,
            record=record,
            clip=clip,
            provenance=provenance,
            writer=_announce if record is not None else None,
        )
    except ValueError as e:
        fail(str(e))
    with session:
        try:
            server = make_server(session, port)
        except OSError as e:
            fail(f"cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port")
        left = len(session.pending())
        if record is not None:
            assert provenance is not None
            console.print(
                f"[bold]vical play[/]: recording {record} as {player} ({provenance.date}), "
                f"{left} of {len(session.items)} recording(s) to make, task files in {folder}"
            )
            say(f"consent: {provenance.consent}")
        else:
            console.print(
                f"[bold]vical play[/]: participant {participant}, {left} of "
                f"{len(session.items)} episode(s) to play, output {folder}"
            )
        for line in session.repaired:
            console.print(f"moved aside (damaged, will be played again): {line}")
        console.print(f"finished {'recordings' if record else 'episodes'} are kept when you stop")
        serve_page(server, open_browser, "stopped; run the same command to continue")
        if session.recorded:
            from vical.play.record import next_commands

            console.print("next: pack the demos, check the folder, then run on it:")
            for line in next_commands(folder, session.recorded):
                say(f"  {line}")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name.strip()).strip("-").lower() or "player"


def _provenance(
    kind: str, player: str | None, consent: str | None, day: str | None, participant: str | None
) -> Provenance:
    """The recording's provenance from the options, or one `error:` line naming the option."""
    from vical.play.record import RECORD_KINDS, Provenance

    if kind not in RECORD_KINDS:
        fail(f"--record {kind!r}: record one of {', '.join(RECORD_KINDS)}")
    if participant is not None:
        fail("--participant names a play session's participant; a recording names --player")
    if not (player or "").strip():
        fail("--player is required with --record: the player's name for the provenance")
    if not (consent or "").strip():
        fail(
            "--consent is required with --record: the line the player agreed to, e.g. "
            "--consent 'I agree that my play is published as task data'"
        )
    try:
        when = dt.date.fromisoformat(day) if day else dt.datetime.now(dt.UTC).date()
    except ValueError:
        fail(f"--date {day!r} is not a calendar date; give YYYY-MM-DD")
    assert player is not None and consent is not None
    try:
        return Provenance(player.strip(), " ".join(consent.split()), when)
    except ValueError as e:
        fail(f"--player/--consent: {e}")


def _announce(folder: Path, rec: Recording) -> Path:
    path = write_recording(folder, rec)
    say(f"recorded {rec.target} ({len(rec.actions)} moves) -> {path}")
    return path


def write_recording(folder: Path, rec: Recording) -> Path:
    """Write ``rec`` into ``folder``'s copy of its environment's task file; return its path.

    The first recording of an environment copies the task file as vical reads it now
    (built-in or from ``$VICAL_TASKS_DIR``); later ones change that copy. A clip
    replaces the clip of the same id in every task that shows it (each replayed to
    its label); a start replaces the task's ``init_actions`` and ``init_source``.
    """
    import shutil

    from vical.authoring.yamlio import write_demos, write_start
    from vical.play.record import adopted_demos
    from vical.spec import env_file, load_env_file

    env = rec.task.env.env
    folder = Path(folder)
    target = folder / f"{env}.yaml"
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(env_file(env), target)
    spec = load_env_file(target)
    if rec.clip is not None:
        return write_demos(env, adopted_demos(spec, rec.clip), tasks_dir=folder)
    return write_start(env, rec.task.variant.variant, rec.actions, rec.source, tasks_dir=folder)
