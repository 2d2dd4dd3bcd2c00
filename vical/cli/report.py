"""``vical report``: Table 1 for runs side by side, written with the paper's analyses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table

from vical.cli._common import console, fail
from vical.paper import TABLE1_COLUMNS


@dataclass(frozen=True)
class ReportOptions:
    """What to report and where (``vical report``; ``vical eval`` reports its own run)."""

    runs: tuple[Path, ...]
    out: Path | None = None  # default: the run folder for one run, ./report for several
    random: Path | None = None  # the random reference's run folder
    strip_task: str | None = None
    html: bool = True


def write_report(opts: ReportOptions) -> None:
    """Build and write the report, then print its Table 1 and where it went."""
    from vical.report.document import build_document, write_document

    runs = list(opts.runs)
    try:
        doc = build_document(runs, random_dir=opts.random, strip_task=opts.strip_task)
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    target = opts.out or (runs[0] if len(runs) == 1 else Path("report"))
    paths = write_document(doc, target, html=opts.html)
    reports = [*doc["runs"], *([doc["random"]] if doc["random"] is not None else [])]
    table = Table(title="V-ICAL results")
    table.add_column("column")
    for r in reports:
        label = f"{r.name} (random ref.)" if r is doc["random"] else r.name
        table.add_column(f"{label} S", justify="right")
        table.add_column("P%", justify="right")
    for c in TABLE1_COLUMNS:
        cells = []
        for r in reports:
            cell = r.columns[c]
            cells += (
                ["–", "–"] if cell.score is None else [f"{cell.score:.1f}", f"{cell.pass_rate:.0f}"]
            )
        table.add_row(c, *cells)
    console.print(table)
    console.print("S: score 0-100, P%: pass rate, by Table 1 column")
    console.print("report written to " + ", ".join(str(p) for p in paths.values()))


def report_cmd(
    runs: list[Path] = typer.Argument(..., help="One or more run folders, side by side."),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        help="Folder for report.json/report.md/report.html and figures/ (default: the run "
        "folder for one run, ./report for several).",
    ),
    random: Path = typer.Option(
        None,
        "--random",
        help="Run folder of the random reference (vical baseline random): adds its Table-1 "
        "row and the difficulty strata.",
    ),
    strip_task: str = typer.Option(
        None,
        "--strip-task",
        help="Task id for the same-start trajectory strips (default: one every run played).",
    ),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write report.html."),
) -> None:
    """Table 1 for one or more runs side by side, the paper's analyses and figures."""
    write_report(
        ReportOptions(runs=tuple(runs), out=out, random=random, strip_task=strip_task, html=html)
    )
