"""Table 1: score S and pass rate P% by category, from ``eval_result.json`` files.

Aggregation (paper Section 3.3): a task's score is the mean over its runs;
an environment's score is the mean over its tasks; every column is the
equal-weight mean over the environments it contains (an environment with
several type tags counts in each). Pass rate follows the same path.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from pydantic import BaseModel

from vical.errors import RunFolderError
from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE
from vical.report.stats import paired_table1, table1_intervals
from vical.run.results import EvalResult, RunManifest, load_results


class Cell(BaseModel):
    score: float | None
    pass_rate: float | None
    n_envs: int


class EnvRow(BaseModel):
    env: str
    score: float
    pass_rate: float
    n_tasks: int
    n_episodes: int
    tags: dict[str, Any]


class RunReport(BaseModel):
    name: str
    agent: str
    n_episodes: int
    n_tasks: int
    n_envs: int
    columns: dict[str, Cell]
    envs: list[EnvRow]
    # per column, score and pass rate with their environment-clustered bootstrap
    # interval (vical.report.stats.table1_intervals); None in summaries made before them
    intervals: dict[str, dict[str, dict[str, Any] | None]] | None = None
    # the ablation condition the run was played under (rules text, demonstrations)
    condition: dict[str, Any] | None = None


def _column_members(tags: dict[str, Any]) -> list[str]:
    return [*tags["types"], tags["memory"], tags["dynamics"], "All"]


def build_report(
    results: list[EvalResult],
    name: str,
    intervals: bool = True,
    condition: dict[str, Any] | None = None,
) -> RunReport:
    """Aggregate one run's results into Table-1 columns and per-environment rows.

    With ``intervals`` every column also gets its environment-clustered 95%
    bootstrap interval (10,000 resamples, seed 0). ``condition`` is recorded
    as given (see :func:`run_condition`).
    """
    if not results:
        raise RunFolderError(f"{name}: no finished episodes to report")
    by_task: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    by_env: dict[str, list[tuple[float, float]]] = defaultdict(list)
    env_tags: dict[str, dict[str, Any]] = {}
    env_eps: dict[str, int] = defaultdict(int)
    for rs in by_task.values():
        env = rs[0].env
        by_env[env].append((mean(r.score for r in rs), mean(float(r.passed) for r in rs)))
        env_tags[env] = rs[0].tags
        env_eps[env] += len(rs)
    env_rows = [
        EnvRow(
            env=e,
            score=mean(s for s, _ in v),
            pass_rate=100 * mean(p for _, p in v),
            n_tasks=len(v),
            n_episodes=env_eps[e],
            tags=env_tags[e],
        )
        for e, v in sorted(by_env.items())
    ]
    cols: dict[str, list[EnvRow]] = {c: [] for c in TABLE1_COLUMNS}
    for row in env_rows:
        for c in _column_members(row.tags):
            cols[c].append(row)
    columns = {
        c: Cell(
            score=mean(r.score for r in rows) if rows else None,
            pass_rate=mean(r.pass_rate for r in rows) if rows else None,
            n_envs=len(rows),
        )
        for c, rows in cols.items()
    }
    agents = sorted({r.agent for r in results})
    return RunReport(
        name=name,
        agent=",".join(agents),
        n_episodes=len(results),
        n_tasks=len(by_task),
        n_envs=len(env_rows),
        columns=columns,
        envs=env_rows,
        intervals=table1_intervals(results) if intervals else None,
        condition=condition,
    )


def run_condition(run_dir: Path) -> dict[str, Any] | None:
    """The ablation condition of a run folder, from its manifest: ``{"rules": "basic" or
    "detailed", "demos": bool}``; None for a folder without a readable manifest."""
    path = Path(run_dir) / "manifest.json"
    try:
        m = RunManifest.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
    return {"rules": m.rules, "demos": m.demos}


def report_run(run_dir: Path) -> RunReport:
    run_dir = Path(run_dir)
    return build_report(load_results(run_dir), run_dir.name, condition=run_condition(run_dir))


def _fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _span(iv: dict[str, Any] | None, digits: int) -> str:
    if not iv or iv.get("low") is None or iv.get("high") is None:
        return "–"
    return f"[{iv['low']:.{digits}f}, {iv['high']:.{digits}f}]"


def render_markdown(reports: list[RunReport], reference: bool = True) -> str:
    """Table 1 layout: one row per run, S and P% per column; per-environment means below."""
    head = "| Model | " + " | ".join(f"{c} S | {c} P%" for c in TABLE1_COLUMNS) + " |"
    sep = "|---|" + "---:|" * (2 * len(TABLE1_COLUMNS))
    lines = [
        "# Results (Table 1 layout)",
        "",
        "S: normalized score (0–100); P%: pass rate. Task scores are averaged over runs, "
        "then over the tasks of each environment; every column weights its "
        "environments equally.",
        "",
        head,
        sep,
    ]
    for r in reports:
        cells = []
        for c in TABLE1_COLUMNS:
            cell = r.columns[c]
            cells += [_fmt(cell.score), _fmt(cell.pass_rate, 0)]
        lines.append(f"| {r.name} ({r.agent}) | " + " | ".join(cells) + " |")
    if reference:
        for label, vals in TABLE1_REFERENCE.items():
            cells = [f"{s:.1f} | {p}" for s, p in vals]
            lines.append(f"| *{label}* | " + " | ".join(cells) + " |")
    lines += ["", "## Coverage", ""]
    for r in reports:
        lines.append(
            f"- {r.name}: {r.n_episodes} episodes over {r.n_tasks} tasks in "
            f"{r.n_envs} environments; environments per column: "
            + ", ".join(f"{c} {r.columns[c].n_envs}" for c in TABLE1_COLUMNS)
        )
    with_intervals = [r for r in reports if r.intervals]
    if with_intervals:
        lines += [
            "",
            "## 95% intervals",
            "",
            "Each column's interval from a bootstrap over environments (10,000 resamples, "
            "seed 0); – where a column has a single environment.",
            "",
            head,
            sep,
        ]
        for r in with_intervals:
            cells = []
            for c in TABLE1_COLUMNS:
                iv = (r.intervals or {}).get(c) or {}
                cells += [_span(iv.get("score"), 1), _span(iv.get("pass_rate"), 0)]
            lines.append(f"| {r.name} ({r.agent}) | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per environment",
        "",
        "| Environment | " + " | ".join(f"{r.name} S | {r.name} P%" for r in reports) + " |",
        "|---|" + "---:|" * (2 * len(reports)),
    ]
    envs = sorted({e.env for r in reports for e in r.envs})
    for e in envs:
        cells = []
        for r in reports:
            row = next((x for x in r.envs if x.env == e), None)
            cells += [_fmt(row.score if row else None), _fmt(row.pass_rate if row else None, 0)]
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_reports(reports: list[RunReport], out_dir: Path) -> tuple[Path, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    from vical.run.results import atomic_write_bytes

    jpath, mpath = out_dir / "report.json", out_dir / "report.md"
    payload = {"runs": [r.model_dump() for r in reports]}
    atomic_write_bytes(jpath, (json.dumps(payload, indent=2) + "\n").encode())
    atomic_write_bytes(mpath, render_markdown(reports).encode())
    return jpath, mpath


# Table 5 (paper Section 4.4): one model under the four conditions of the ablation
CONDITIONS: tuple[tuple[str, str, bool], ...] = (
    ("basic+video", "basic", True),
    ("basic+no-video", "basic", False),
    ("detailed+video", "detailed", True),
    ("detailed+no-video", "detailed", False),
)
CONDITION_TITLES = {
    "basic+video": "Base rules, video",
    "basic+no-video": "Base rules, no video",
    "detailed+video": "Detailed rules, video",
    "detailed+no-video": "Detailed rules, no video",
}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def condition_key(condition: dict[str, Any] | None) -> str | None:
    """The condition's key ("basic+video", ...); None when it is unknown."""
    if not condition:
        return None
    return f"{condition['rules']}+{'video' if condition['demos'] else 'no-video'}"


def ablation_table(
    reports: list[RunReport],
    results: dict[str, list[EvalResult]],
    models: dict[str, str | None],
) -> list[dict[str, Any]] | None:
    """Table 5: each model's runs under the ablation conditions, side by side.

    Runs are grouped by model (the manifest's ``--model`` and the backend); a
    group needs at least two conditions to be a row. Each cell holds the run's
    overall score S and pass rate P%, and, for every condition but Base + Video
    (the baseline), the change against the baseline with a paired interval over
    the episodes both runs played (:func:`vical.report.stats.paired_table1`,
    environments resampled). Returns None when no model has two conditions.
    """
    groups: dict[str, dict[str, RunReport]] = {}
    for r in reports:
        key = condition_key(r.condition)
        if key is None:
            continue
        base_name = f"{models.get(r.name) or r.agent} ({r.agent})"
        model, k = base_name, 2
        # a second run of a condition already filled goes to the model's next row
        while key in groups.setdefault(model, {}):
            model, k = f"{base_name} #{k}", k + 1
        groups[model][key] = r
    rows = []
    for model, runs in groups.items():
        if len(runs) < 2:
            continue
        base = runs.get("basic+video")
        cells: dict[str, dict[str, Any] | None] = {}
        for key, _, _ in CONDITIONS:
            run = runs.get(key)
            if run is None:
                cells[key] = None
                continue
            overall = run.columns["All"]
            cell: dict[str, Any] = {
                "run": run.name,
                "score": overall.score,
                "pass_rate": overall.pass_rate,
                "n_episodes": run.n_episodes,
                "delta": None,
            }
            if base is not None and run is not base:
                try:
                    paired = paired_table1(results[run.name], results[base.name])
                except ValueError:
                    paired = None
                b = base.columns["All"]
                cell["delta"] = {
                    "score": _diff(overall.score, b.score),
                    "pass_rate": _diff(overall.pass_rate, b.pass_rate),
                    # on the episodes both runs played (None when they share none)
                    "paired": paired["columns"]["All"] if paired else None,
                    "matched_episodes": paired["matched_episodes"] if paired else 0,
                }
            cells[key] = cell
        rows.append({"model": model, "baseline": base.name if base else None, "cells": cells})
    return rows or None
