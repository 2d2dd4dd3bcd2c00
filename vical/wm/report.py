"""World-model tables: the controls and their targets, the index, one table per scenario.

Each row is a run (a model or a control model, under the case's own intervention
or a control intervention); its cells are the scenario's means with their 95%
environment-clustered intervals. The skill scores come first (relative to
persistence: copy-last 0, the simulator 100, below 0 shown as it is); raw SSIM
and PSNR follow as secondary columns; counterfactual discrimination is its own
column. A part a run does not score is ``n/a``; a skill mean that leaves cases
out (copy-last already exact: nothing to predict) says how many. A scenario whose
every case the run's control has no target for says why instead of a number.
Runs are listed in the order given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vical.wm.controls import TARGETS
from vical.wm.evaluate import SUMMARY
from vical.wm.models import CONTROLS
from vical.wm.score import PARTS

COLUMNS = {
    "ssim_skill": "SSIM skill",
    "psnr_skill": "PSNR skill",
    "counterfactual": "counterfactual",
    "spec": "specification",
    "score": "case score",
    "fidelity": "SSIM (raw)",
    "psnr": "PSNR dB (raw)",
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
)


def load_summary(run: Path) -> dict[str, Any]:
    path = Path(run) / SUMMARY
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: not a scored world-model run; make one with `vical wm eval --out {run}`"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _cell(entry: dict[str, Any], cases: int) -> str:
    if entry["mean"] is None:
        return "n/a"
    lo, hi = entry["ci95"]
    text = f"{entry['mean']:.1f} [{lo:.1f}, {hi:.1f}]"
    n = entry.get("n", cases)
    return text if n >= cases else f"{text} ({cases - n} excluded)"


def _label(summary: dict[str, Any]) -> str:
    model = str(summary["model"])
    label = f"{model} (control)" if model in CONTROLS else model
    control = summary.get("control", "own")
    return label if control == "own" else f"{label}, {control} intervention"


def _row(summary: dict[str, Any], entry: dict[str, Any], cases: int) -> str:
    return f"| {_label(summary)} | " + " | ".join(_cell(entry[p], cases) for p in PARTS) + " |"


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
    out = ["# World-model results", "", "Means with 95% intervals (environments resampled)."]
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
        "Skill = 100 (m - m(copy-last)) / (m(simulator) - m(copy-last)) per case: "
        "copy-last 0, simulator 100.",
        "",
        header.rstrip("\n"),
    ]
    for s in summaries:
        out.append(_row(s, s["index"], s["cases"]))
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
            row = _row(s, entry, entry["cases"])
            if missing:
                row += f" {missing['cases']} case(s) without a target: " + "; ".join(
                    missing["reasons"]
                )
            out.append(row)
    return "\n".join(out) + "\n"
