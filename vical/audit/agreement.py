"""How often the auditor agrees with a person (paper Tables 11-14).

Four judgments are compared case by case: rule transfer, strategy transfer
three-way (correct / underfit / overfit) and binary (correct against the other
two), and stage attribution. For each (Table 11): the matches, exact agreement
with its 95% percentile interval from an environment-clustered bootstrap (each
resample draws as many environments as were sampled, with replacement, and
keeps every case of each drawn environment: :func:`vical.report.stats.cluster_bootstrap`,
10,000 resamples by default), and Cohen's kappa. Table 12 gives the agreement
per acting run (model); Tables 13 and 14 the confusion matrices of the
three-way strategy labels and of the stages, rows the person's labels and
columns the auditor's. Also reported: the pooled agreement over the three
primary decisions (rule, binary strategy, stage), which is descriptive only
since a case's decisions are correlated, and the cases where all three agree.

Only labelled cases count. A case whose auditor verdict is no longer valid
(its run was audited again since the sample was drawn) is an error, never
dropped silently.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical.audit.label import load_labels
from vical.audit.runner import VALID, load_audit
from vical.audit.sample import case_run, load_sample
from vical.audit.verdict import ATTRIBUTION, STAGES, STRATEGY_LABELS, TRANSFER, strategy_binary
from vical.errors import RunFolderError

JUDGMENTS = ("rule_transfer", "strategy_three_way", "strategy_binary", "stage_attribution")
PRIMARY = ("rule_transfer", "strategy_binary", "stage_attribution")
TITLES = {
    "rule_transfer": "Rule transfer",
    "strategy_three_way": "Strategy transfer (three-way)",
    "strategy_binary": "Strategy transfer (binary)",
    "stage_attribution": "Stage attribution",
}


@dataclass(frozen=True)
class Pair:
    """One labelled case: the person's and the auditor's labels for the four judgments."""

    case: str
    run: str  # the acting run (model) it came from
    env: str
    human: dict[str, str]
    auditor: dict[str, str]


def judgments(rule: str, strategy: str, stage: str) -> dict[str, str]:
    """The four compared judgments from the three labels."""
    return {
        "rule_transfer": rule,
        "strategy_three_way": strategy,
        "strategy_binary": strategy_binary(strategy),
        "stage_attribution": stage,
    }


def _run_name(run_dir: Path) -> str:
    from vical.run.results import run_model

    model = run_model(run_dir)
    return f"{run_dir.name} ({model})" if model else run_dir.name


def load_pairs(sample_path: Path, labels_path: Path) -> list[Pair]:
    """The labelled cases of a sample with the auditor's verdicts, in sample order."""
    sample = load_sample(sample_path)
    labels = load_labels(labels_path, sample_path)["labels"]
    out: list[Pair] = []
    for case in sample["cases"]:
        human = labels.get(case["case"])
        if human is None:
            continue
        run = case_run(sample, case)
        crit = (load_audit(run, case["episode"]) or {}).get("criteria") or {}
        if any((crit.get(c) or {}).get("status") != VALID for c in (TRANSFER, ATTRIBUTION)):
            raise RunFolderError(
                f"case {case['case']} ({run / 'audit' / case['episode']}.json) no longer holds "
                "valid verdicts of both criteria; draw a new sample"
            )
        t, a = crit[TRANSFER]["verdict"], crit[ATTRIBUTION]["verdict"]
        out.append(
            Pair(
                case=case["case"],
                run=_run_name(run),
                env=case["env"],
                human=judgments(
                    human["rule_transfer"],
                    human["strategy_transfer"],
                    human["player_failure_stage"],
                ),
                auditor=judgments(
                    t["rule_transfer"]["label"],
                    t["strategy_transfer"]["label"],
                    a["player_failure_stage"]["label"],
                ),
            )
        )
    return out


def confusion(pairs: list[Pair], judgment: str, labels: tuple[str, ...]) -> dict[str, Any]:
    """Rows: the person's labels; columns: the auditor's; with row and column totals."""
    counts = Counter((p.human[judgment], p.auditor[judgment]) for p in pairs)
    rows = [[counts[(h, a)] for a in labels] for h in labels]
    return {
        "labels": list(labels),
        "rows": rows,
        "row_totals": [sum(r) for r in rows],
        "column_totals": [sum(r[j] for r in rows) for j in range(len(labels))],
        "total": len(pairs),
    }


def agreement_report(
    pairs: list[Pair], *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """Tables 11-14 as data (percentages 0-100; kappa None where it is undefined)."""
    import math

    from vical.report.stats import agreement_interval, cohen_kappa

    if not pairs:
        raise ValueError("no labelled case: label some with `vical audit label` first")
    envs = [p.env for p in pairs]
    table11: dict[str, dict[str, Any]] = {}
    for j in JUDGMENTS:
        h = [p.human[j] for p in pairs]
        a = [p.auditor[j] for p in pairs]
        iv = agreement_interval(h, a, envs, resamples=resamples, seed=seed, level=level)
        kappa = cohen_kappa(h, a)
        table11[j] = {
            "matches": sum(x == y for x, y in zip(h, a, strict=True)),
            "n": len(pairs),
            "agreement": 100.0 * iv.estimate,
            "ci_low": None if math.isnan(iv.low) else 100.0 * iv.low,
            "ci_high": None if math.isnan(iv.high) else 100.0 * iv.high,
            "kappa": None if math.isnan(kappa) else kappa,
        }
    by_run: dict[str, dict[str, Any]] = {}
    for run in sorted({p.run for p in pairs}):
        mine = [p for p in pairs if p.run == run]
        by_run[run] = {"n": len(mine)} | {
            j: 100.0 * sum(p.human[j] == p.auditor[j] for p in mine) / len(mine) for j in JUDGMENTS
        }
    pooled = sum(table11[j]["matches"] for j in PRIMARY)
    all_three = sum(all(p.human[j] == p.auditor[j] for j in PRIMARY) for p in pairs)
    return {
        "n": len(pairs),
        "environments": len(set(envs)),
        "resamples": resamples,
        "seed": seed,
        "level": level,
        "judgments": table11,
        "by_run": by_run,
        "strategy_confusion": confusion(pairs, "strategy_three_way", STRATEGY_LABELS),
        "stage_confusion": confusion(pairs, "stage_attribution", STAGES),
        "pooled_primary": {"matches": pooled, "n": 3 * len(pairs)},
        "all_primary_agree": {"matches": all_three, "n": len(pairs)},
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f}%"


def _matrix(title: str, m: dict[str, Any]) -> list[str]:
    head = " | ".join(m["labels"])
    lines = [
        title,
        "",
        f"| Person \\ Auditor | {head} | Total |",
        "|---|" + "---:|" * (len(m["labels"]) + 1),
    ]
    for label, row, total in zip(m["labels"], m["rows"], m["row_totals"], strict=True):
        lines.append(f"| {label} | " + " | ".join(str(x) for x in row) + f" | {total} |")
    lines.append(
        "| Total | " + " | ".join(str(x) for x in m["column_totals"]) + f" | {m['total']} |"
    )
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    """Tables 11-14 as Markdown."""
    level = round(100 * report["level"])
    lines = [
        f"Table 11: auditor-person agreement ({report['n']} cases, {report['environments']} "
        f"environments; {level}% intervals from {report['resamples']} environment-clustered "
        "bootstrap resamples)",
        "",
        f"| Judgment | Matches | Agreement | {level}% CI | Cohen's kappa |",
        "|---|---:|---:|---:|---:|",
    ]
    for j in JUDGMENTS:
        r = report["judgments"][j]
        ci = "–" if r["ci_low"] is None else f"{r['ci_low']:.1f}–{r['ci_high']:.1f}%"
        kappa = "–" if r["kappa"] is None else f"{r['kappa']:.3f}"
        lines.append(
            f"| {TITLES[j]} | {r['matches']}/{r['n']} | {_pct(r['agreement'])} | {ci} | {kappa} |"
        )
    lines += [
        "",
        "Table 12: agreement by acting run",
        "",
        "| Run | Cases | " + " | ".join(TITLES[j] for j in JUDGMENTS) + " |",
        "|---|---:|" + "---:|" * len(JUDGMENTS),
    ]
    for run, r in report["by_run"].items():
        lines.append(f"| {run} | {r['n']} | " + " | ".join(_pct(r[j]) for j in JUDGMENTS) + " |")
    for title, key in (
        ("Table 13: three-way strategy-transfer confusion", "strategy_confusion"),
        ("Table 14: stage-attribution confusion", "stage_confusion"),
    ):
        lines += ["", *_matrix(title, report[key])]
    p, a = report["pooled_primary"], report["all_primary_agree"]
    lines += [
        "",
        f"Rule, binary strategy and stage together: {p['matches']} of {p['n']} labels agree "
        f"({100 * p['matches'] / p['n']:.1f}%, descriptive); all three agree on "
        f"{a['matches']} of {a['n']} cases ({100 * a['matches'] / a['n']:.1f}%).",
    ]
    return "\n".join(lines) + "\n"
