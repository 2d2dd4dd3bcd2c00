"""``vical demos``: make, pack and render the demonstration clips."""

from __future__ import annotations

from pathlib import Path

import typer

from vical.cli._common import console, envs, fail

demos_app = typer.Typer(
    help="Demonstration clips: make them with the expert tools.", no_args_is_help=True
)


@demos_app.command("make")
def demos_make(
    env: str = typer.Option(..., "--env", help="Environment key, e.g. taxi."),
    write: bool = typer.Option(
        True,
        "--write/--dry-run",
        help="Write the clips into the task YAML (default) or only print.",
    ),
) -> None:
    """Re-run the expert tools for an environment and store its demo clips as data."""
    from vical.authoring.make import make_demos
    from vical.authoring.yamlio import write_demos
    from vical.spec import env_file

    known = envs()
    if env not in known:
        fail(f"unknown environment {env!r}; known: {', '.join(known)}")
    folder = env_file(env).parent  # the built-in folder or one of $VICAL_TASKS_DIR
    demos = make_demos(env, tasks_dir=folder)
    n = sum(len(v) for v in demos.values())
    console.print(f"{env}: {n} clip assignments over {len(demos)} tasks")
    if write:
        path = write_demos(env, demos, tasks_dir=folder)
        console.print(f"written to {path}")


@demos_app.command("pack")
def demos_pack(
    env: list[str] = typer.Option(
        None, "--env", help="Environment key (repeatable; default: every environment)."
    ),
    check: bool = typer.Option(
        False, "--check", help="Only report which task files packing would change (exit 1 if any)."
    ),
) -> None:
    """Pack the stored demo clips into the paper's package structure (idempotent).

    Applies each environment's demo_quota (the size of its shared pool of clips and
    the clips of each task's package) to the demos lists of its task file.
    """
    from vical.authoring.yamlio import write_demos
    from vical.demos.packages import PackError, pack_stored
    from vical.spec import env_file

    known = list(envs())
    chosen = env or known
    unknown = [e for e in chosen if e not in known]
    if unknown:
        fail(f"unknown environment(s) {', '.join(unknown)}; known: {', '.join(known)}")
    changed = []
    for e in chosen:
        try:
            packed, differs = pack_stored(e)
        except PackError as ex:
            fail(str(ex), code=1)
        if not differs:
            console.print(f"{e}: unchanged")
            continue
        changed.append(e)
        if check:
            console.print(f"{e}: would change")
        else:
            write_demos(e, packed, tasks_dir=env_file(e).parent)
            n = sum(len(v) for v in packed.values())
            d = len({c.id for v in packed.values() for c in v})
            console.print(f"{e}: packed ({n} clip assignments, {d} distinct clips)")
    if check and changed:
        raise typer.Exit(1)


@demos_app.command("render")
def demos_render(
    task_id: str = typer.Argument(..., help="Task id."),
    out: Path = typer.Option(Path("demos"), "--out", "-o", help="Folder for MP4 and JPEG files."),
) -> None:
    """Render a task's demonstration package (MP4 per clip plus its JPEG frames)."""
    from vical.demos import load_demo_package

    videos = load_demo_package(task_id)
    out.mkdir(parents=True, exist_ok=True)
    for v in videos:
        (out / f"{v.clip_id}.mp4").write_bytes(v.mp4)
        for i, jpg in enumerate(v.frames_jpeg):
            (out / f"{v.clip_id}_{i:03d}.jpg").write_bytes(jpg)
        console.print(f"{v.clip_id}: {v.n_frames} frames, {v.label}")
