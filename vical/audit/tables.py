"""The audit tables: Table 3 (transfer), Table 4 (attribution), Figure 4 with Table 15.

Every rate is a percentage macro-averaged over environments, as in the paper:
within an environment the share of its episodes with a label, then the plain
mean over the environments that have at least one valid verdict of that
criterion, so an environment with many tasks weighs the same as one with few.
Only ``valid`` verdicts count; how many episodes had none (refused replies,
context overflow, not audited yet) is reported beside each run, never filled in.
Strategy transfer is reported as binary: ``correct`` is successful,
``underfit`` and ``overfit`` unsuccessful.

Score and pass rate are the run's Table-1 "All" column (:mod:`vical.report.table`).

Figure 4 (paper Appendix 3.6): for each run and transfer condition *c* (rule
successful, rule unsuccessful, strategy successful, strategy unsuccessful) and
stage *s*, the share of the condition's episodes attributed to *s* is taken
within each environment that has such episodes, then averaged over those
environments. Only episodes with valid verdicts of both criteria enter.
Table 15 gives each condition's denominators: contributing environments /
episodes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from vical.audit.runner import VALID, load_audits
from vical.audit.verdict import ATTRIBUTION, STAGES, TRANSFER, strategy_binary

CONDITIONS = (
    "rule successful",
    "rule unsuccessful",
    "strategy successful",
    "strategy unsuccessful",
)
STAGE_TITLES = {
    "knowledge_induction": "Knowledge induction",
    "state_grounding": "State grounding",
    "planning": "Planning",
    "action_commitment": "Commitment",
    "none": "None",
}


@dataclass
class EpisodeLabels:
    """One scored episode's valid labels (None where its verdict is not valid)."""

    episode: str
    env: str
    task_id: str
    rule: str | None = None
    strategy: str | None = None  # three-way label
    stage: str | None = None


@dataclass
class RunAudit:
    """One run's audit tables."""

    name: str
    model: str | None
    score: float
    pass_rate: float
    episodes: int
    coverage: dict[str, dict[str, int]]  # criterion -> {"valid", "invalid", "context_length", ...}
    rule: dict[str, float | None]  # successful/unsuccessful -> macro %
    strategy: dict[str, float | None]
    stages: dict[str, float | None]  # stage -> macro %
    joint: dict[str, dict[str, float | None]]  # condition -> stage -> macro %
    denominators: dict[str, tuple[int, int]]  # condition -> (environments, episodes)
    labels: list[EpisodeLabels] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.name,
            "model": self.model,
            "score": self.score,
            "pass_rate": self.pass_rate,
            "episodes": self.episodes,
            "coverage": self.coverage,
            "rule_transfer": self.rule,
            "strategy_transfer": self.strategy,
            "failure_attribution": self.stages,
            "joint": self.joint,
            "joint_denominators": {
                c: {"environments": e, "episodes": n} for c, (e, n) in self.denominators.items()
            },
        }


def _macro(per_env: dict[str, list[str]], value: str) -> float | None:
    shares = [100.0 * sum(x == value for x in xs) / len(xs) for xs in per_env.values() if xs]
    return mean(shares) if shares else None


def episode_labels(run_dir: Path) -> tuple[list[EpisodeLabels], dict[str, dict[str, int]]]:
    """Each scored episode's valid labels, and per criterion how many had each status."""
    from vical.outcomes import episode_name
    from vical.run.results import load_results

    audits = load_audits(run_dir)
    out: list[EpisodeLabels] = []
    coverage: dict[str, dict[str, int]] = {c: defaultdict(int) for c in (TRANSFER, ATTRIBUTION)}
    for r in load_results(run_dir):
        name = episode_name(r.task_id, r.run_index)
        labels = EpisodeLabels(episode=name, env=r.env, task_id=r.task_id)
        criteria = (audits.get(name) or {}).get("criteria") or {}
        for criterion in (TRANSFER, ATTRIBUTION):
            rec = criteria.get(criterion) or {}
            status = rec.get("status") or "not_audited"
            coverage[criterion][status] += 1
            if status != VALID:
                continue
            verdict = rec["verdict"]
            if criterion == TRANSFER:
                labels.rule = verdict["rule_transfer"]["label"]
                labels.strategy = verdict["strategy_transfer"]["label"]
            else:
                labels.stage = verdict["player_failure_stage"]["label"]
        out.append(labels)
    return out, {c: dict(v) for c, v in coverage.items()}


def _condition(e: EpisodeLabels, condition: str) -> bool:
    kind, outcome = condition.split()
    if kind == "rule":
        return e.rule == outcome
    return e.strategy is not None and strategy_binary(e.strategy) == outcome


def joint_table(
    labels: list[EpisodeLabels],
) -> tuple[dict[str, dict[str, float | None]], dict[str, tuple[int, int]]]:
    """Figure 4's cells (condition -> stage -> macro %) and Table 15's denominators."""
    both = [e for e in labels if e.rule is not None and e.strategy is not None and e.stage]
    cells: dict[str, dict[str, float | None]] = {}
    denominators: dict[str, tuple[int, int]] = {}
    for c in CONDITIONS:
        per_env: dict[str, list[str]] = defaultdict(list)
        for e in both:
            if _condition(e, c):
                assert e.stage is not None
                per_env[e.env].append(e.stage)
        cells[c] = {s: _macro(per_env, s) for s in STAGES}
        denominators[c] = (len(per_env), sum(len(v) for v in per_env.values()))
    return cells, denominators


def run_audit(run_dir: Path) -> RunAudit:
    """The audit tables of one run folder."""
    from vical.report.table import report_run
    from vical.run.results import run_model

    run_dir = Path(run_dir)
    table1 = report_run(run_dir).columns["All"]
    model = run_model(run_dir)
    labels, coverage = episode_labels(run_dir)
    rules: dict[str, list[str]] = defaultdict(list)
    strategies: dict[str, list[str]] = defaultdict(list)
    stages: dict[str, list[str]] = defaultdict(list)
    for e in labels:
        if e.rule is not None and e.strategy is not None:
            rules[e.env].append(e.rule)
            strategies[e.env].append(strategy_binary(e.strategy))
        if e.stage is not None:
            stages[e.env].append(e.stage)
    joint, denominators = joint_table(labels)
    return RunAudit(
        name=run_dir.name,
        model=model,
        score=float(table1.score or 0.0),
        pass_rate=float(table1.pass_rate or 0.0),
        episodes=len(labels),
        coverage=coverage,
        rule={k: _macro(rules, k) for k in ("successful", "unsuccessful")},
        strategy={k: _macro(strategies, k) for k in ("successful", "unsuccessful")},
        stages={s: _macro(stages, s) for s in STAGES},
        joint=joint,
        denominators=denominators,
        labels=labels,
    )


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}"


def _label(r: RunAudit) -> str:
    return r.name if not r.model else f"{r.name} ({r.model})"


def render_markdown(runs: list[RunAudit]) -> str:
    """Tables 3 and 4, Figure 4's cells and Table 15, and each run's verdict coverage."""
    lines = [
        "Table 3: information transfer (% macro-averaged over environments)",
        "",
        "| Run | Score | Pass rate | Rule succ. | Rule unsucc. | Strategy succ. "
        "| Strategy unsucc. |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {_label(r)} | {r.score:.1f} | {r.pass_rate:.0f} | {_pct(r.rule['successful'])} "
            f"| {_pct(r.rule['unsuccessful'])} | {_pct(r.strategy['successful'])} "
            f"| {_pct(r.strategy['unsuccessful'])} |"
        )
    head = " | ".join(STAGE_TITLES[s] for s in STAGES)
    lines += [
        "",
        "Table 4: sequential failure attribution (% macro-averaged over environments)",
        "",
        f"| Run | Score | Pass rate | {head} |",
        "|---|---:|---:|" + "---:|" * len(STAGES),
    ]
    for r in runs:
        cells = " | ".join(_pct(r.stages[s]) for s in STAGES)
        lines.append(f"| {_label(r)} | {r.score:.1f} | {r.pass_rate:.0f} | {cells} |")
    lines += [
        "",
        "Figure 4: stage attribution by transfer outcome (% macro-averaged over contributing "
        "environments)",
        "",
        f"| Run | Condition | {head} |",
        "|---|---|" + "---:|" * len(STAGES),
    ]
    for r in runs:
        for c in CONDITIONS:
            cells = " | ".join(_pct(r.joint[c][s]) for s in STAGES)
            lines.append(f"| {_label(r)} | {c} | {cells} |")
    lines += [
        "",
        "Table 15: Figure 4 denominators (contributing environments / episodes)",
        "",
        "| Condition | " + " | ".join(_label(r) for r in runs) + " |",
        "|---|" + "---:|" * len(runs),
    ]
    for c in CONDITIONS:
        cells = " | ".join(f"{r.denominators[c][0]} / {r.denominators[c][1]}" for r in runs)
        lines.append(f"| {c} | {cells} |")
    lines += ["", "Verdicts per criterion (only valid verdicts enter the tables):", ""]
    for r in runs:
        for criterion, counts in r.coverage.items():
            said = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            lines.append(f"- {_label(r)}, {criterion}: {said} (of {r.episodes} episodes)")
    return "\n".join(lines) + "\n"
