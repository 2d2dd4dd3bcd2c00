"""The full report: Table 1 for runs side by side, every analysis, figures; JSON, Markdown, HTML.

:func:`build_document` reads run folders and computes; :func:`write_document`
renders ``report.json``, ``report.md``, ``report.html`` and ``figures/*.png``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from vical.outcomes import episode_name
from vical.paper import TABLE19_GAMES
from vical.report import analyses as an
from vical.report.table import RunReport, ablation_table, build_report, run_condition
from vical.report.usage import manifest_model, report_usage, run_usage
from vical.run.results import (
    EvalResult,
    atomic_write_bytes,
    load_infrastructure_failures,
    load_results,
)


def _unique_names(dirs: list[Path]) -> list[str]:
    names: list[str] = []
    for d in dirs:
        base = Path(d).resolve().name or str(d)
        name, k = base, 2
        while name in names:
            name, k = f"{base}#{k}", k + 1
        names.append(name)
    return names


def _clean(x: Any) -> Any:
    """JSON-safe: NaN/inf become None, tuples lists, numpy scalars Python numbers."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, str | bytes):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def build_document(
    run_dirs: list[Path],
    random_dir: Path | None = None,
    strip_task: str | None = None,
    demo_context: bool = True,
    expert_dir: Path | None = None,
) -> dict[str, Any]:
    """Load the runs (and the random and expert references) and compute Table 1 and
    every analysis.

    The references get their own labelled rows in Table 1, its intervals and the
    per-environment means; neither is pooled into the compared runs. The random
    reference also feeds the analyses made against it (difficulty strata, failure
    modes); the expert reference (``vical baseline expert``) only gets its own table,
    labelled a privileged upper bound. ``analyses["provenance"]`` counts who made the
    compared runs' tasks' start sequences and demo clips.

    Raises FileNotFoundError / ValueError for a missing or empty run folder.
    """
    dirs = [Path(d) for d in run_dirs]
    refs = [Path(d) for d in (random_dir, expert_dir) if d is not None]
    names = _unique_names(dirs + refs)
    run_names = names[: len(dirs)]
    runs: dict[str, list[EvalResult]] = {}
    folders: dict[str, Path] = {}
    reports: list[RunReport] = []
    for name, d in zip(run_names, dirs, strict=True):
        results = load_results(d)
        reports.append(build_report(results, name, condition=run_condition(d)))
        runs[name] = results
        folders[name] = d
    random_report = random_results = None
    random_name = None
    if random_dir is not None:
        random_name = names[len(dirs)]
        random_results = load_results(Path(random_dir))
        random_report = build_report(
            random_results, random_name, condition=run_condition(Path(random_dir))
        )
        folders[random_name] = Path(random_dir)
    expert_report = None
    expert_name = None
    if expert_dir is not None:
        expert_name = names[-1]
        expert_report = build_report(
            load_results(Path(expert_dir)), expert_name, condition=run_condition(Path(expert_dir))
        )

    # per-run tables include the random reference as a last, labelled row
    with_ref = dict(runs)
    if random_name is not None and random_results is not None:
        with_ref[random_name] = random_results
    pooled = [r for rs in runs.values() for r in rs]
    audits = {name: an.log_audit(folders[name]) for name in with_ref}
    columns = {
        rep.name: {c: cell.score for c, cell in rep.columns.items()}
        for rep in [*reports, *([random_report] if random_report else [])]
    }
    task = strip_task or an.pick_strip_task(runs)
    if strip_task and not any(r.task_id == strip_task for rs in runs.values() for r in rs):
        raise ValueError(
            f"--strip-task {strip_task}: no compared run played this task "
            f"(for example: {an.pick_strip_task(runs)})"
        )
    analyses: dict[str, Any] = {
        "failure_modes": an.failure_modes(with_ref),
        "failure_by_type": an.failure_by_type(pooled),
        "failure_by_type_random": (
            an.failure_by_type(random_results) if random_results is not None else None
        ),
        "episode_length": an.episode_lengths(runs),
        "episode_length_random": (
            an.length_stats(random_results) if random_results is not None else None
        ),
        "action_distributions": an.action_distributions(runs),
        "bias_audit": an.bias_audit(runs),
        "fixation": an.action_fixation(with_ref),
        "log_audit": audits,
        "limitations": an.limitations(with_ref, columns, audits),
        "strata": (
            an.difficulty_strata(runs, random_results) if random_results is not None else None
        ),
        "associations": an.attribute_associations(runs),
        "associations_random": (
            {c: random_report.columns[c].score for c in ("Single", "Multiple", "Static", "Dynamic")}
            if random_report is not None
            else None
        ),
        "demo_context": an.demo_context() if demo_context else None,
        "provenance": an.provenance(r.task_id for r in pooled),
        "trajectory_task": task,
        "trajectories": an.trajectory_rows(runs, task) if task else [],
    }
    infra_results = {name: load_infrastructure_failures(folders[name]) for name in with_ref}
    infra = {
        name: [{"episode": episode_name(r.task_id, r.run_index), "task": r.task_id} for r in rs]
        for name, rs in infra_results.items()
    }
    usage = report_usage(
        [
            run_usage(
                name,
                rs,
                infra_results[name],
                manifest_model(folders[name]),
                reference=name == random_name,
            )
            for name, rs in with_ref.items()
        ]
    )
    return {
        "runs": reports,
        "random": random_report,
        "random_name": random_name,
        "expert": expert_report,
        "expert_name": expert_name,
        "results": runs,
        "folders": folders,
        "analyses": analyses,
        # episodes the endpoint or network ended: not results, left out of every figure
        "infrastructure_failures": {k: v for k, v in infra.items() if v},
        "usage": usage,
        # Table 5, when the runs hold one model under several ablation conditions
        "table5": ablation_table(
            reports, runs, {name: manifest_model(folders[name]) for name in runs}
        ),
    }


def make_figures(doc: dict[str, Any]) -> dict[str, tuple[str, bytes]]:
    """Every figure the data supports: {file stem: (caption, PNG bytes)}."""
    from vical.report import plots

    a = doc["analyses"]
    figs: dict[str, tuple[str, bytes]] = {}
    figs["failure_modes"] = (
        "Episode outcomes and failure modes per run (Appendix 5.1).",
        plots.failure_modes_figure(a["failure_modes"]),
    )
    if a["failure_by_type"]:
        figs["failure_by_type"] = (
            "How failures end by game type, pooled over the runs (Table 25); "
            "φ: type membership vs timeout among failures.",
            plots.failure_by_type_figure(a["failure_by_type"]),
        )
    figs["episode_length"] = (
        "Episode length per run and its early success / early death / budget reached "
        "split (Table 27).",
        plots.episode_length_figure(
            {n: [r.steps for r in rs] for n, rs in doc["results"].items()},
            a["episode_length"]["by_model"],
        ),
    )
    if a["action_distributions"]:
        dists = a["action_distributions"]
        order = [e for e in TABLE19_GAMES if e in dists]
        order += sorted(
            (e for e in dists if e not in order), key=lambda e: -len(dists[e]["actions"])
        )
        figs["action_heatmaps"] = (
            "Action frequencies per run and environment (Figure 8); rows sum to one, "
            "blank cells were never executed. The paper's four games first, then by "
            "vocabulary size (at most 12 games).",
            plots.action_heatmaps_figure({e: dists[e] for e in order}),
        )
    if a["strata"]:
        figs["strata"] = (
            "Learnability gap Δ per environment against the random reference (Eq. 2, Table 23).",
            plots.strata_figure(a["strata"]),
        )
    if a["associations"]["memory_score"]["cells"]:
        figs["associations"] = (
            "Task-attribute associations on model–environment cells (Table 24).",
            plots.associations_figure(a["associations"]),
        )
    dc = a["demo_context"]
    if dc and dc["frames"]:
        figs["demo_context"] = (
            "Demonstration context per task: sampled frames (start + one per action + "
            "terminal, over the task's clips) (Figure 6).",
            plots.demo_context_figure(list(dc["frames"].values()), n_tasks=dc["tasks"]),
        )
    if a["trajectories"]:
        task = a["trajectory_task"]
        figs["trajectory_strips"] = (
            f"Decision trajectories of every run on {task} from the same start state (Figure 9).",
            plots.trajectory_strip_figure(a["trajectories"], task),
        )
        frames = plots.frame_strip_figure(a["trajectories"], doc["folders"], task)
        if frames is not None:
            figs["frame_strips"] = (
                f"Frames of each episode on {task} (evenly spaced steps).",
                frames,
            )
    return figs


def document_json(doc: dict[str, Any], figures: dict[str, tuple[str, bytes]]) -> dict[str, Any]:
    from vical.report.sections import EXPERT_NOTE

    out: dict[str, Any] = _clean(
        {
            "runs": [r.model_dump() for r in doc["runs"]],
            "random": doc["random"].model_dump() if doc["random"] else None,
            "expert": doc["expert"].model_dump() if doc.get("expert") else None,
            # what the expert reads: a privileged upper bound, not a human baseline
            **({"expert_note": EXPERT_NOTE} if doc.get("expert") else {}),
            "analyses": doc["analyses"],
            "infrastructure_failures": doc.get("infrastructure_failures", {}),
            "usage": doc.get("usage"),
            "figures": {k: f"figures/{k}.png" for k in figures},
            # only with `vical report A B --paired` / several conditions of one model
            **({"paired": doc["paired"]} if doc.get("paired") else {}),
            **({"table5": doc["table5"]} if doc.get("table5") else {}),
        }
    )
    return out


def render_document_markdown(doc: dict[str, Any], figures: dict[str, tuple[str, bytes]]) -> str:
    from vical.report.sections import render_sections_markdown, report_sections

    head = [
        "# V-ICAL report",
        "",
        "Runs: "
        + ", ".join(
            f"{r.name} ({r.agent}, {r.n_episodes} episodes, {r.n_tasks} tasks, "
            f"{r.n_envs} environments)"
            for r in doc["runs"]
        ),
    ]
    if doc["random"] is not None:
        rr = doc["random"]
        head.append(f"Random reference: {rr.name} ({rr.n_episodes} episodes, {rr.n_tasks} tasks)")
    if doc.get("expert") is not None:
        from vical.report.sections import EXPERT_LABEL

        er = doc["expert"]
        head.append(
            f"{EXPERT_LABEL}: {er.name} ({er.n_episodes} episodes, {er.n_tasks} tasks; "
            "not a human baseline)"
        )
    for name, eps in (doc.get("infrastructure_failures") or {}).items():
        head.append(
            f"Not scored: {len(eps)} episode(s) of {name} ended in an infrastructure "
            "failure (the endpoint or network failed); resume the run to retry them."
        )
    head.append("")
    return "\n".join(head) + "\n" + render_sections_markdown(report_sections(doc), figures)


def write_document(doc: dict[str, Any], out_dir: Path, html: bool = True) -> dict[str, Path]:
    """Write report.json, report.md, figures/*.png and (by default) report.html."""
    from vical.report.html import render_html

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = make_figures(doc)
    for stem, (_, png) in figures.items():
        atomic_write_bytes(out_dir / "figures" / f"{stem}.png", png)
    paths = {"json": out_dir / "report.json", "md": out_dir / "report.md"}
    payload = document_json(doc, figures)
    atomic_write_bytes(paths["json"], (json.dumps(payload, indent=2) + "\n").encode())
    atomic_write_bytes(paths["md"], render_document_markdown(doc, figures).encode())
    if html:
        paths["html"] = out_dir / "report.html"
        # a viewer exported next to the report (vical view --export DIR/view) is linked
        viewer = "view/index.html" if (out_dir / "view" / "index.html").is_file() else None
        atomic_write_bytes(paths["html"], render_html(doc, figures, viewer).encode())
    return paths
