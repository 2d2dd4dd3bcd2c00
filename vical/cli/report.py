"""``vical report``: Table 1 for runs side by side, written with the paper's analyses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from vical.cli._common import console, err, fail
from vical.paper import TABLE1_COLUMNS


@dataclass(frozen=True)
class ReportOptions:
    """What to report and where (``vical report``; ``vical eval`` reports its own run)."""

    runs: tuple[Path, ...]
    out: Path | None = None  # default: the run folder for one run, ./report for several
    random: Path | None = None  # the random reference's run folder
    expert: Path | None = None  # the expert reference's run folder (vical baseline expert)
    strip_task: str | None = None
    html: bool = True
    paired: bool = False  # the first run minus the second, per column, on matched episodes

    def __post_init__(self) -> None:
        if self.paired and len(self.runs) != 2:
            raise typer.BadParameter(
                f"--paired compares exactly two run folders (A B), got {len(self.runs)}",
                param_hint="RUNS",
            )


def task_sets(doc: dict[str, Any]) -> dict[str, set[str]]:
    """The tasks each compared run and the random reference played, by row label."""
    from vical.run.results import load_results

    out = {name: {r.task_id for r in rs} for name, rs in doc["results"].items()}
    name = doc.get("random_name")
    if name is not None and name in doc["folders"]:
        out[f"{name} (random ref.)"] = {r.task_id for r in load_results(doc["folders"][name])}
    return out


def coverage_warning(sets: dict[str, set[str]]) -> str | None:
    """A warning line when the rows of a report played different task sets (their
    columns then average different environments), else None."""
    if len({frozenset(s) for s in sets.values()}) <= 1:
        return None
    sizes = ", ".join(f"{name}: {len(s)} task(s)" for name, s in sets.items())
    return (
        f"warning: these runs played different tasks ({sizes}); each column averages the "
        "environments a run played, so the rows are not comparable; compare runs over "
        "the same --tasks"
    )


def write_report(opts: ReportOptions) -> None:
    """Build and write the report, then print its Table 1 and where it went."""
    from vical.report.document import build_document, write_document

    runs = list(opts.runs)
    try:
        doc = build_document(
            runs, random_dir=opts.random, strip_task=opts.strip_task, expert_dir=opts.expert
        )
    except (FileNotFoundError, ValueError) as e:
        fail(str(e))
    if opts.paired:
        from vical.report.stats import paired_table1

        a, b = (r.name for r in doc["runs"])
        try:
            doc["paired"] = {"a": a, "b": b, **paired_table1(doc["results"][a], doc["results"][b])}
        except ValueError as e:
            fail(f"--paired: {e}")
    target = opts.out or (runs[0] if len(runs) == 1 else Path("report"))
    paths = write_document(doc, target, html=opts.html)
    refs = {"random ref.": doc["random"], "privileged expert": doc.get("expert")}
    reports = [*doc["runs"], *(r for r in refs.values() if r is not None)]
    table = Table(title="V-ICAL results")
    table.add_column("column")
    for r in reports:
        kind = next((k for k, ref in refs.items() if r is ref), None)
        label = f"{r.name} ({kind})" if kind else r.name
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
    console.print(
        "S: score 0-100, P%: pass rate, by Table 1 column; a column is the mean over its "
        "environments of their task means (each environment weighs the same), so it "
        "differs from the running S and P of `vical eval`'s progress line, which are "
        "means over episodes",
        soft_wrap=True,
    )
    warning = coverage_warning(task_sets(doc))
    if warning is not None:
        err.print(warning, markup=False, highlight=False, soft_wrap=True)
    if doc.get("expert") is not None:
        console.print(
            "privileged expert: an upper bound that reads emulator or simulator state and "
            "replays fixed plans on known seeds; not a human baseline",
            soft_wrap=True,
        )
    for r in reports:
        iv = (r.intervals or {}).get("All") or {}
        s, p = iv.get("score"), iv.get("pass_rate")
        if s and p and s["low"] is not None and p["low"] is not None:
            console.print(
                f"{r.name}: All S {s['estimate']:.1f} [{s['low']:.1f}, {s['high']:.1f}], "
                f"P% {p['estimate']:.0f} [{p['low']:.0f}, {p['high']:.0f}] "
                f"({100 * s['level']:.0f}% interval, environments resampled)",
                soft_wrap=True,
            )
    if doc.get("paired"):
        _print_paired(doc["paired"])
    if doc.get("table5"):
        from vical.report.sections import table5_rows

        headers, rows, _ = table5_rows(doc["table5"])
        t5 = Table(title="Table 5: demonstration video and rule specificity (S / P%)")
        for i, head in enumerate(headers):
            t5.add_column(head, justify="left" if i == 0 else "right")
        for row in rows:
            t5.add_row(*row)
        console.print(t5)
    console.print("report written to " + ", ".join(str(p) for p in paths.values()))


def _print_paired(paired: dict[str, Any]) -> None:
    """The per-column difference A - B with its interval."""
    table = Table(title=f"Paired: {paired['a']} minus {paired['b']}")
    for head in ("column", "Δ S", "interval", "Δ P%", "interval"):
        table.add_column(head, justify="left" if head == "column" else "right")
    for c in TABLE1_COLUMNS:
        cell = paired["columns"][c]
        s, p = cell["score"], cell["pass_rate"]
        if s is None:
            table.add_row(c, "–", "–", "–", "–")
            continue
        table.add_row(
            c,
            f"{s['estimate']:+.1f}",
            _span(s, 1),
            f"{p['estimate']:+.0f}",
            _span(p, 0),
        )
    console.print(table)
    console.print(
        f"{paired['matched_episodes']} matched episodes over {paired['matched_tasks']} tasks "
        f"(same task and run index); left out: {paired['only_a']} only in {paired['a']}, "
        f"{paired['only_b']} only in {paired['b']}. Intervals: 95%, environments resampled "
        "with each task's pair kept together.",
        soft_wrap=True,
    )


def _span(iv: dict[str, Any], d: int) -> str:
    if iv.get("low") is None:
        return "–"
    return f"[{iv['low']:+.{d}f}, {iv['high']:+.{d}f}]"


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
    expert: Path = typer.Option(
        None,
        "--expert",
        help="Run folder of the expert reference (vical baseline expert): adds its own "
        "table after Table 1, labelled a privileged upper bound (its plans read emulator or "
        "simulator state and replay on known seeds; not a human row); it is not pooled into "
        "the runs or the analyses.",
    ),
    strip_task: str = typer.Option(
        None,
        "--strip-task",
        help="Task id for the same-start trajectory strips (default: one every run played).",
    ),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write report.html."),
    paired: bool = typer.Option(
        False,
        "--paired",
        help="With two runs A B over the same tasks: A minus B per Table-1 column on the "
        "episodes both played (matched by task and run index), with a 95% interval that "
        "resamples environments.",
    ),
) -> None:
    """Table 1 for one or more runs side by side, the paper's analyses and figures.

    Writes report.json, report.md, report.html and figures/ into the run folder
    for one run, and into ./report/ (under the current directory) for several;
    --out chooses another folder. The last line printed names the files.
    """
    write_report(
        ReportOptions(
            runs=tuple(runs),
            out=out,
            random=random,
            expert=expert,
            strip_task=strip_task,
            html=html,
            paired=paired,
        )
    )
