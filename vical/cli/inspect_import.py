"""``vical import-inspect``: an Inspect AI log of the V-ICAL tasks as a run folder."""

from __future__ import annotations

from pathlib import Path

import typer

from vical.cli._common import _RootGroup, console, err


def import_inspect_cmd(
    log: Path = typer.Argument(..., help="An Inspect log (.eval or .json) of vical tasks."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="The run folder to write (new, or an empty folder)."
    ),
) -> None:
    """Turn an Inspect log of `inspect eval vical/...` into a vical run folder.

    Each finished sample becomes an episode folder written by the runner's own code
    (manifest.json, eval_result.json, log.jsonl, media/), replayed in the simulator
    and checked against what the sample recorded, so `vical report`, `vical submit`
    and `vical verify` take it like a folder `vical eval` wrote. Samples that errored
    are infrastructure failures, not results: they are listed and left out.
    """
    from vical.interop.inspect_import import import_inspect_log, summary_lines

    summary = import_inspect_log(log, out)
    for i, line in enumerate(summary_lines(summary)):
        (console if i == 0 else err).print(line, markup=False, highlight=False)


# The command on its own, for tests and `python -m`-style use; the vical app registers
# import_inspect_cmd itself.
import_app = typer.Typer(cls=_RootGroup, add_completion=False, pretty_exceptions_enable=False)


@import_app.callback()
def _group() -> None:
    """vical import-inspect."""


import_app.command("import-inspect")(import_inspect_cmd)
