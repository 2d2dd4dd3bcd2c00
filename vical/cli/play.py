"""``vical play``: a person plays tasks in the browser, written as a ``human`` run."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from vical.cli._common import console, fail, select, serve_page

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
        help="Run folder (default: runs/human-<participant>); resumes if it exists.",
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
    record_demo: bool = typer.Option(
        False,
        "--record-demo",
        help="Re-record a demonstration clip of each task from the clip's start; writes "
        "recordings to OUT/recordings/ (default OUT: runs/demos-<participant>), not episodes.",
    ),
    clip: str = typer.Option(
        None, "--clip", help="With --record-demo: the clip id to re-record (default: the first)."
    ),
    adopt: list[Path] = typer.Option(
        None,
        "--adopt",
        help="Write these recordings into their task files (the clip they re-record, in "
        "every task that lists it); then `vical demos render` and `vical dataset build` use "
        "them. Serves nothing.",
    ),
) -> None:
    """Play tasks in the browser under the models' protocol (rules, demos, budget, no reward).

    Serves a page on 127.0.0.1 that shows each task's rules text and demonstration
    videos, then its start frame with one button (and key) per action. Each episode
    is written like a `vical eval` episode of agent `human`, so `vical report`
    shows the run as a Human row and `vical submit`/`vical verify` replay it.
    Stop with Ctrl-C; the same command continues where the person stopped.
    """
    from vical.play.server import make_server
    from vical.play.session import PlaySession

    if adopt:
        adopt_recordings(adopt)
        return
    if participant is None:
        fail("--participant is required: the id the episodes are recorded under, e.g. -p p01")
    if not _PARTICIPANT.match(participant):
        fail(f"--participant {participant!r}: use 1-64 letters, digits, '.', '_' or '-'")
    if clip is not None and not record_demo:
        fail("--clip chooses the clip to re-record; it goes with --record-demo")
    chosen = select(tasks)
    kind = "demos" if record_demo else "human"
    folder = out or Path("runs") / f"{kind}-{participant}"
    try:
        session = PlaySession(
            folder, chosen, participant, runs=runs, frames=frames, record=record_demo, clip=clip
        )
    except ValueError as e:
        fail(str(e))
    with session:
        try:
            server = make_server(session, port)
        except OSError as e:
            fail(f"cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port")
        left = len(session.pending())
        what = "recording(s)" if record_demo else "episode(s)"
        console.print(
            f"[bold]vical play[/]: participant {participant}, {left} of {len(session.items)} "
            f"{what} to play, output {folder}"
        )
        for line in session.repaired:
            console.print(f"moved aside (damaged, will be played again): {line}")
        console.print("finished episodes are kept when you stop")
        serve_page(server, open_browser, "stopped; run the same command to continue")


def adopt_recordings(paths: list[Path], tasks_dir: Path | None = None) -> None:
    """Write recordings into the task files (each checked by replay on every task using it).

    ``tasks_dir`` is the folder of task files (default: the folder the environment's
    task file is read from, built-in or one of ``$VICAL_TASKS_DIR``).
    """
    from vical.authoring.yamlio import write_demos
    from vical.demos.render import ClipReplayError
    from vical.play.record import RecordingError, adopted_demos, read_recording
    from vical.spec import TaskSpecError, env_file, load_env_file

    for path in paths:
        try:
            task_id, new = read_recording(path)
            env = task_id.partition("/")[0]
            folder = tasks_dir or env_file(env).parent
            spec = load_env_file(folder / f"{env}.yaml")
            written = write_demos(env, adopted_demos(path, spec), tasks_dir=folder)
        except (RecordingError, ClipReplayError, TaskSpecError, OSError) as e:
            fail(str(e))
        console.print(
            f"{path}: clip {new.id} ({len(new.actions)} actions, {new.label}) -> {written}"
        )
