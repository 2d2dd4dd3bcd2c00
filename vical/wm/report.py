"""World-model tables: one per scenario plus the index, a column group per run.

Each row is a run (a model or a control); its cells are the scenario's means of
the case score and of its parts with their 95% environment-clustered intervals.
Runs are listed in the order given; the controls are marked as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vical.wm.evaluate import SUMMARY
from vical.wm.models import CONTROLS
from vical.wm.score import PARTS


def load_summary(run: Path) -> dict[str, Any]:
    path = Path(run) / SUMMARY
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not a scored world-model run; make one with `vical wm eval --out {run}`"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _cell(entry: dict[str, Any]) -> str:
    lo, hi = entry["ci95"]
    return f"{entry['mean']:.1f} [{lo:.1f}, {hi:.1f}]"


def _label(summary: dict[str, Any]) -> str:
    model = str(summary["model"])
    return f"{model} (control)" if model in CONTROLS else model


def report_markdown(runs: list[Path]) -> str:
    """The Markdown report of the runs: the index table, then one table per scenario."""
    summaries = [load_summary(r) for r in runs]
    header = "| model | " + " | ".join(PARTS) + " |\n|---|" + "---|" * len(PARTS) + "\n"
    out = ["# World-model results", "", "Means with 95% intervals (environments resampled).", ""]
    out += ["## Index (mean of the scenario scores)", "", header.rstrip("\n")]
    for s in summaries:
        out.append(f"| {_label(s)} | " + " | ".join(_cell(s["index"][p]) for p in PARTS) + " |")
    scenarios = sorted({sc for s in summaries for sc in s["scenarios"]})
    for sc in scenarios:
        out += ["", f"## {sc}", "", header.rstrip("\n")]
        for s in summaries:
            entry = s["scenarios"].get(sc)
            if entry is None:
                out.append(f"| {_label(s)} | " + " | ".join("not run" for _ in PARTS) + " |")
                continue
            out.append(f"| {_label(s)} | " + " | ".join(_cell(entry[p]) for p in PARTS) + " |")
    return "\n".join(out) + "\n"
