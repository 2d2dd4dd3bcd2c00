"""``vical view``: run folders and bundles in the browser, or exported as a static site."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from vical.cli._common import console, err, fail, interrupted, serve_page


def view_cmd(
    runs: list[Path] = typer.Argument(..., help="Run folders or bundles (.tar.gz), side by side."),
    export: Path = typer.Option(
        None,
        "--export",
        help="Write a self-contained HTML folder here (opens from file://) instead of serving.",
    ),
    workers: int = typer.Option(
        None,
        "--workers",
        "-w",
        min=1,
        help="With --export: processes replaying frames (default: CPUs).",
    ),
    port: int = typer.Option(
        8766, "--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port)."
    ),
    open_browser: bool = typer.Option(
        True, "--open/--no-open", help="Open the page in the default browser."
    ),
) -> None:
    """Browse runs: a task x runs table, and a frame-by-frame player per episode.

    The table lists each task's score, pass and outcome in every run (sortable,
    filterable by environment, type and outcome). An episode opens as a player with
    the action, the model's full text, retries and errors of each turn, the score
    curve and the task's demonstration videos; two episodes open side by side.
    Frames that a run did not save are rebuilt by replaying its actions.
    With --export, the same pages are written to a folder for publishing.
    """
    from vical.view.data import Catalog, ViewError

    try:
        catalog = Catalog(list(runs))
    except ViewError as e:
        fail(str(e))
    with catalog:
        n = sum(len(r.results) for r in catalog.runs)
        if export is not None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            from vical.run.pool import Interrupted
            from vical.view.site import export as write_site

            with Progress(
                TextColumn("[bold]export[/]"), BarColumn(), MofNCompleteColumn(), console=err
            ) as bar:
                pid = bar.add_task("", total=n)
                try:
                    page = write_site(
                        catalog,
                        export,
                        lambda done, total, ep: bar.update(pid, completed=done),
                        workers=workers or os.cpu_count() or 1,
                    )
                except ViewError as e:
                    fail(str(e))
                except Interrupted:
                    interrupted(
                        f"export not finished, {export} left as it was; run the command again"
                    )
            console.print(f"{n} episode(s) of {len(catalog.runs)} run(s) exported: open {page}")
            return
        from vical.view.server import make_server

        try:
            server = make_server(catalog, port)
        except OSError as e:
            fail(f"cannot listen on 127.0.0.1:{port}: {e.strerror}; pick another --port")
        for r in catalog.runs:
            console.print(f"{r.key}: {r.label}, {len(r.results)} episode(s) from {r.source}")
        serve_page(server, open_browser)
