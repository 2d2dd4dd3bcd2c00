"""World-model tables: the controls and their targets, the index, one table per scenario.

Each row is a run (a model or a reference model, under the case's own
intervention or a control intervention). The index table gives each column's
mean of the scenario values with its 95% interval (:func:`vical.wm.score.summarize`);
the scenario tables are descriptive, with the range of their environments'
values. The WM index (the action skill) comes first, then the MSE skill, the share of
differing futures the model tells apart (a run below the floor is flagged), and
the descriptive columns (counterfactual, specification, case score, SSIM, PSNR).
A part a run does not score is ``n/a``. Runs are listed in the order given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vical.wm.controls import TARGETS
from vical.wm.evaluate import SUMMARY
from vical.wm.models import ADVERSARIES, CONTROLS
from vical.wm.score import COLUMNS as PARTS

COLUMNS = {
    "action_skill": "WM index (action skill)",
    "mse_skill": "MSE skill",
    "response": "responds (%)",
    "counterfactual": "counterfactual",
    "spec": "specification",
    "score": "case score",
    "fidelity": "SSIM x100",
    "psnr": "PSNR dB",
}

# the control models: what each predicts, its target, what it tests
CONTROL_MODELS = (
    (
        "copy-last",
        "the last context frame, once per action",
        "the case's truth",
        "persistence: the zero of every skill score",
    ),
    (
        "simulator",
        "the simulator's frames for the actions it is given",
        "the run's target",
        "the ceiling: 100 on every skill score",
    ),
    (
        "branch-swap",
        "the simulator's frames for another branch's intervention (cross-branch swap)",
        "the case's truth",
        "a perfect simulator given the wrong actions: counterfactual discrimination",
    ),
    (
        "fixed-action",
        "the simulator's frames under one fixed action (its NOOP, else the first action)",
        "the case's truth",
        "action-blind: at most 0 on the index",
    ),
    (
        "all-action-average",
        "the per-pixel mean of the simulator's frames under every action",
        "the case's truth",
        "action-blind: at most 0 on the index",
    ),
    (
        "other-case",
        "another context's true frames (same branch, same game)",
        "the case's truth",
        "real frames of the wrong situation",
    ),
    (
        "context-mean",
        "the per-pixel mean of the context frames",
        "the case's truth",
        "action-blind: at most 0 on the index",
    ),
    (
        "blurred-copy-last",
        "the last context frame blurred (radius 1)",
        "the case's truth",
        "action-blind: at most 0 on the index",
    ),
    (
        "blurred-truth",
        "the simulator's frames blurred (radius 1)",
        "the run's target",
        "every action right, every frame soft: above every action-blind model",
    ),
)


def load_summary(run: Path) -> dict[str, Any]:
    path = Path(run) / SUMMARY
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not a scored world-model run; make one with `vical wm eval --out {run}`"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _cell(entry: dict[str, Any], cases: int, interval: bool) -> str:
    """``mean [95% interval]`` (the index) or ``mean (environments' lowest to highest)``
    (a scenario, descriptive); ``n/a`` where the run has no value."""
    if entry["mean"] is None:
        return "n/a"
    text = f"{entry['mean']:.1f}"
    lo, hi = entry["ci95"] if interval else entry.get("range", [None, None])
    if lo is not None and hi is not None:
        text += f" [{lo:.1f}, {hi:.1f}]" if interval else f" ({lo:.1f} to {hi:.1f})"
    n = entry.get("n", cases)
    return text if n >= cases else f"{text} ({cases - n} without)"


def _label(summary: dict[str, Any]) -> str:
    model = str(summary["model"])
    kind = "control" if model in CONTROLS else "reference" if model in ADVERSARIES else None
    label = f"{model} ({kind})" if kind else model
    control = summary.get("control", "own")
    label = label if control == "own" else f"{label}, {control} intervention"
    return label + (" **FLAGGED**" if summary.get("flag") else "")


def _row(summary: dict[str, Any], entry: dict[str, Any], cases: int, interval: bool) -> str:
    cells = " | ".join(_cell(entry[p], cases, interval) for p in PARTS)
    return f"| {_label(summary)} | {cells} |"


def report_markdown(runs: list[Path]) -> str:
    """The Markdown report of the runs: the controls, the index table, one table per scenario."""
    summaries = [load_summary(r) for r in runs]
    header = (
        "| run | "
        + " | ".join(COLUMNS[p] for p in PARTS)
        + " |\n|---|"
        + "---|" * len(PARTS)
        + "\n"
    )
    out = ["# World-model results", ""]
    out += ["", "## Controls and their targets", ""]
    out += ["| control | predicts | target | tests |", "|---|---|---|---|"]
    for name, predicts, target, tests in CONTROL_MODELS:
        out.append(f"| {name} (model) | {predicts} | {target} | {tests} |")
    for control, (target, tests) in TARGETS.items():
        if control != "own":
            out.append(f"| {control} intervention | any model's frames | {target} | {tests} |")
    out += ["", "Runs and their targets:", ""]
    for s in summaries:
        control = s.get("control", "own")
        out.append(f"- {_label(s)}: scored against {s.get('target', TARGETS[control][0])}")
    out += [
        "",
        "## Index (mean of the scenario means)",
        "",
        "WM index = action skill: squared errors of the branch-to-branch differences, "
        "pooled over a scenario's cases before the ratio (copy-last 0, simulator 100, any "
        "action-blind model exactly 0). MSE skill: the same over whole frames (an "
        "action-blind model can climb it). 95% intervals: stratified "
        "delete-one-environment jackknife, t quantile.",
        "",
        header.rstrip("\n"),
    ]
    for s in summaries:
        out.append(_row(s, s["index"], s["cases"], True))
    flags = [f"- {_label(s)}: {s['flag']}" for s in summaries if s.get("flag")]
    if flags:
        out += ["", "Flagged runs:", "", *flags]
    out += [
        "",
        "Scenario rows are descriptive: a scenario has two to four environments, too few "
        "for an interval; in parentheses, its environments' lowest and highest values.",
    ]
    scenarios = sorted(
        {sc for s in summaries for sc in s["scenarios"]}
        | {sc for s in summaries for sc in s.get("unavailable", {})}
    )
    for sc in scenarios:
        out += ["", f"## {sc}", "", header.rstrip("\n")]
        for s in summaries:
            entry = s["scenarios"].get(sc)
            missing = s.get("unavailable", {}).get(sc)
            if entry is None:
                why = "; ".join(missing["reasons"]) if missing else "not run"
                out.append(f"| {_label(s)} | {why} |" + " |" * (len(PARTS) - 1))
                continue
            row = _row(s, entry, entry["cases"], False)
            if missing:
                row += f" {missing['cases']} case(s) without a target: " + "; ".join(
                    missing["reasons"]
                )
            out.append(row)
    return "\n".join(out) + "\n"
