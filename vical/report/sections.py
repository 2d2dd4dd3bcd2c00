"""The report's tables as data (title, caption, headers, rows of text), one list for all formats.

Markdown and HTML both render from :func:`report_sections`, so the two never
disagree about a number. Each section may name figures (file stems) to show
after its table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vical.outcomes import AGENT_FAILURES, ENVIRONMENT_FAILURES, FAILURE_MODES
from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE
from vical.report.table import RunReport


@dataclass
class Section:
    key: str
    title: str
    caption: str
    headers: list[str]
    rows: list[list[str]]
    figures: list[str] = field(default_factory=list)
    row_classes: list[str] = field(default_factory=list)


def _f(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{x:.{d}f}"


def _pct(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{d}f}%"


def _signed(x: float | None, d: int = 3) -> str:
    return "–" if x is None else f"{x:+.{d}f}"


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def _table1(runs: list[RunReport], random: RunReport | None) -> Section:
    headers = ["Model"] + [f"{c} {m}" for c in TABLE1_COLUMNS for m in ("S", "P%")]
    rows, classes = [], []

    def row(label: str, rep: RunReport) -> list[str]:
        cells = [label]
        for c in TABLE1_COLUMNS:
            cell = rep.columns[c]
            cells += [_f(cell.score), _f(cell.pass_rate, 0)]
        return cells

    for r in runs:
        rows.append(row(f"{r.name} ({r.agent})", r))
        classes.append("run")
    if random is not None:
        rows.append(row(f"Random reference: {random.name}", random))
        classes.append("reference")
    for label, vals in TABLE1_REFERENCE.items():
        rows.append([label] + [x for s, p in vals for x in (f"{s:.1f}", str(p))])
        classes.append("paper")
    return Section(
        "table1",
        "Table 1: score S and pass rate P% by category",
        "S: normalized score (0–100); P%: pass rate. Task scores are averaged over runs, then "
        "over the tasks of each environment; every column weights its environments equally "
        "(an environment with several type tags counts in each). Rows marked (paper) are the "
        "paper's published numbers, for comparison.",
        headers,
        rows,
        row_classes=classes,
    )


def _per_env(runs: list[RunReport], random: RunReport | None) -> Section:
    reps = [*runs, *([random] if random else [])]
    headers = ["Environment", "Tags"] + [f"{r.name} {m}" for r in reps for m in ("S", "P%")]
    envs = sorted({e.env for r in reps for e in r.envs})
    rows = []
    for e in envs:
        tags = next(x.tags for r in reps for x in r.envs if x.env == e)
        cells = [e, "/".join(tags["types"]) + f", {tags['memory']}, {tags['dynamics']}"]
        for r in reps:
            x = next((x for x in r.envs if x.env == e), None)
            cells += [_f(x.score if x else None), _f(x.pass_rate if x else None, 0)]
        rows.append(cells)
    return Section(
        "per_env",
        "Per-environment means",
        "Mean score and pass rate per environment (over tasks, each task averaged over its runs).",
        headers,
        rows,
    )


def report_sections(doc: dict[str, Any]) -> list[Section]:
    a = doc["analyses"]
    out = [_table1(doc["runs"], doc["random"]), _per_env(doc["runs"], doc["random"])]

    # the modes the environment decides first, then those the agent reports
    modes = [m.value for m in FAILURE_MODES if m in ENVIRONMENT_FAILURES] + [
        m.value for m in FAILURE_MODES if m in AGENT_FAILURES
    ]
    out.append(
        Section(
            "failure_modes",
            "Failure modes per run (Appendix 5.1)",
            "A failure is an episode without a pass; each mode is given as a count and its "
            "share of the run's failures. Timeout: the step budget ran out; early termination: "
            "in-environment failure or death; invalid action: three malformed replies; token "
            "overflow: context exceeded; API error: the provider failed.",
            ["Run", "Episodes", "Passed", "Failed", *modes],
            [
                [r["run"], str(r["episodes"]), str(r["passed"]), str(r["failed"])]
                + [f"{r['counts'][m]} ({_pct(r['shares'][m], 0)})" for m in modes]
                for r in a["failure_modes"]
            ],
            figures=["failure_modes"],
        )
    )

    def type_rows(rows):
        return [
            [
                r["type"],
                f"{r['failed']}/{r['episodes']}",
                _pct(r["failure_rate"]),
                _pct(r["early_termination"]),
                _pct(r["timeout"]),
                _pct(r["other"]),
                _signed(r["phi_timeout"]),
            ]
            for r in rows
        ]

    type_headers = [
        "Game type",
        "Failed/all",
        "Failure rate",
        "Early termination",
        "Timeout",
        "Other",
        "φ_timeout",
    ]
    out.append(
        Section(
            "failure_by_type",
            "Game type and failure mode (Table 25)",
            "Pooled over the compared runs. Early-termination, timeout and other shares are "
            "conditional on failure. φ_timeout: correlation between membership in the type "
            "and ending by timeout (rather than early termination) among failed episodes. "
            "Types are multi-label, so rows overlap.",
            type_headers,
            type_rows(a["failure_by_type"]),
            figures=["failure_by_type"],
        )
    )
    if a.get("failure_by_type_random"):
        out.append(
            Section(
                "failure_by_type_random",
                "Game type and failure mode: random reference",
                "The same table over the random reference's episodes.",
                type_headers,
                type_rows(a["failure_by_type_random"]),
            )
        )

    def length_row(label, s):
        return [
            label,
            str(s["n"]),
            f"{s['mean']:.1f} ± {s['sd']:.1f}",
            f"{s['median']:.1f} [{s['q1']:.1f}, {s['q3']:.1f}]",
            f"{s['min']}–{s['max']}",
            _pct(s["early_success"]),
            _pct(s["early_death"]),
            _pct(s["budget_reached"]),
            _pct(s["early_other"]),
        ]

    el = a["episode_length"]
    rows = [length_row(s["run"], s) for s in el["by_model"]]
    if a.get("episode_length_random"):
        rows.append(
            length_row(f"{doc['random_name']} (random reference)", a["episode_length_random"])
        )
    out.append(
        Section(
            "length_by_model",
            "Episode length by run (Table 27)",
            "L: agent steps after the preload; B: the task's step budget. Early success: passed "
            "and L < B; early death: in-environment failure without a pass and L < B; budget "
            "reached: L ≥ B; other early stop: ended before B through the agent (invalid "
            "action, token overflow, API error). SD is the sample SD; quartiles are linearly "
            "interpolated.",
            [
                "Run",
                "n",
                "Mean ± SD",
                "Median [IQR]",
                "Range",
                "Early success",
                "Early death",
                "Budget reached",
                "Other early stop",
            ],
            rows,
            figures=["episode_length"],
        )
    )
    out.append(
        Section(
            "length_by_env",
            "Episode length by environment (Table 28)",
            "Pooled over the compared runs, sorted by mean length. ES: early success; ED: early "
            "death; BR: budget reached.",
            ["Environment", "n", "Mean", "Median [IQR]", "Range", "ES", "ED", "BR"],
            [
                [
                    s["env"],
                    str(s["n"]),
                    f"{s['mean']:.1f}",
                    f"{s['median']:.1f} [{s['q1']:.1f}, {s['q3']:.1f}]",
                    f"{s['min']}–{s['max']}",
                    _pct(s["early_success"]),
                    _pct(s["early_death"]),
                    _pct(s["budget_reached"]),
                ]
                for s in el["by_env"]
            ],
        )
    )
    out.append(
        Section(
            "bias_audit",
            "Action-bias audit (Table 19)",
            "For each run, among run–game groups with at least 20 actions, its largest positive "
            "action-frequency deviation from the pooled distribution of the same game (all "
            "compared runs' actions). TV: total-variation distance of the group from the pool. "
            "Bias flag: excess ≥ 0.20 and TV ≥ 0.20. A diagnostic association, not a causal "
            "claim; with a single run the pool is the run itself and nothing can be flagged.",
            ["Run", "Largest excess", "Run", "Pool", "Excess", "TV", "Bias?"],
            [
                [
                    r["run"],
                    f"{r['env']}: {r['action']}",
                    _pct(r["run_freq"], 0),
                    _pct(r["pool_freq"], 0),
                    f"{r['excess']:+.2f}",
                    f"{r['tv']:.2f}",
                    "Yes" if r["bias"] else "No",
                ]
                for r in a["bias_audit"]["rows"]
            ],
            figures=["action_heatmaps"],
        )
    )
    out.append(
        Section(
            "limitations",
            "Model-specific limitations (Table 22)",
            "Category gaps from Table 1 (Dynamic − Static, Multiple − Single). Fixation proxy: "
            "failed episodes of at least 10 steps with one action at least 90% of the steps. "
            "Conflicting responses: responses with two different bracketed [Action:…] names. "
            "Format-retry episodes: episodes with at least one format retry (from log.jsonl).",
            [
                "Run",
                "Static → Dynamic",
                "Single → Multiple",
                "Token overflow",
                "Fixated failed runs",
                "Conflicting responses",
                "Format-retry episodes",
            ],
            [
                [
                    r["run"],
                    f"{_f(r['static'])} → {_f(r['dynamic'])} ({_signed(r['dynamic_gap'], 1)})",
                    f"{_f(r['single'])} → {_f(r['multiple'])} ({_signed(r['memory_gap'], 1)})",
                    f"{r['token_overflow']}/{r['episodes']}",
                    f"{r['fixated']}/{r['episodes']}",
                    f"{r['conflicting']}/{r['responses']}",
                    f"{r['format_retry_episodes']}/{r['episodes']}",
                ]
                for r in a["limitations"]
            ],
        )
    )
    if a["strata"] is not None:
        out.append(
            Section(
                "strata",
                "Difficulty strata (Eq. 2, Table 23)",
                "Δ_g = max over the compared runs of the run's mean score in g − the random "
                "reference's mean score in g. Easy: Δ > 70; Medium: 30 ≤ Δ ≤ 70; Hard: Δ < 30.",
                ["Environment", "Tier", "Best run", "Best S", "Random S", "Δ"],
                [
                    [
                        r["env"],
                        r["tier"],
                        r["best_run"],
                        _f(r["best_score"]),
                        _f(r["random_score"]),
                        _f(r["delta"]),
                    ]
                    for r in a["strata"]
                ],
                figures=["strata"],
            )
        )
        tiers: dict[str, list[dict[str, Any]]] = {}
        for r in a["strata"]:
            tiers.setdefault(r["tier"], []).append(r)
        out.append(
            Section(
                "strata_summary",
                "Difficulty tiers",
                "Games per tier and the span of Δ within it.",
                ["Tier", "Games", "Δ range", "Environment list"],
                [
                    [
                        t,
                        str(len(rs)),
                        f"{min(x['delta'] for x in rs):.1f}–{max(x['delta'] for x in rs):.1f}",
                        ", ".join(sorted(x["env"] for x in rs)),
                    ]
                    for t, rs in ((t, tiers[t]) for t in ("Easy", "Medium", "Hard") if t in tiers)
                ],
            )
        )
    as_ = a["associations"]
    m, d = as_["memory_score"], as_["dynamics_tokens"]
    rows = [
        [
            "Memory requirement vs score",
            f"Single: {_f(m['group_means']['Single'])}; Multiple: {_f(m['group_means']['Multiple'])}",
            str(m["cells"]),
            "–" if m["r_pb"] is None else f"r_pb = {m['r_pb']:+.3f}",
            _p(m["p"]),
        ],
        [
            "Environment dynamics vs token usage",
            "Static: "
            + _tok(d["group_means"]["Static"])
            + "; Dynamic: "
            + _tok(d["group_means"]["Dynamic"]),
            str(d["cells"]),
            "–" if d["r_pb"] is None else f"r_pb = {d['r_pb']:+.3f}",
            _p(d["p"]),
        ],
    ]
    if a.get("associations_random"):
        rr = a["associations_random"]
        rows.append(
            [
                "Random reference (negative control, Table 1 columns)",
                f"Single {_f(rr['Single'])}, Multiple {_f(rr['Multiple'])}; "
                f"Static {_f(rr['Static'])}, Dynamic {_f(rr['Dynamic'])}",
                "–",
                "–",
                "–",
            ]
        )
    out.append(
        Section(
            "associations",
            "Task-attribute associations (Table 24)",
            "Each cell is one run–environment mean. Memory: Single vs Multiple against score. "
            "Tokens: input + output tokens per episode (output already includes reasoning), "
            "averaged per cell, log-transformed and standardized within run; the group means "
            "shown are untransformed. r_pb: point-biserial correlation (scipy). Runs without "
            "token usage (e.g. the random agent) have no token cells.",
            ["Association", "Group means", "Cells", "Correlation", "p"],
            rows,
            figures=["associations"],
        )
    )
    dc = a.get("demo_context")
    if dc:
        out.append(
            Section(
                "demo_context",
                "Demonstration context (Figure 6)",
                "Sampled demonstration frames per task over its clips: start frame, one per "
                "action, terminal copy (seconds at 1 fps). Paper: 342 tasks, 10–80 frames, mean "
                "45.73, median 45; clips per task 1: 155, 2: 145, 3: 37, 4: 5.",
                ["Tasks", "With demos", "Clips per task", "Min", "Max", "Mean", "Median"],
                [
                    [
                        str(dc["tasks"]),
                        str(len(dc["frames"])),
                        ", ".join(f"{k}: {v}" for k, v in dc["clips_per_task"].items()),
                        str(dc["min"]),
                        str(dc["max"]),
                        _f(dc["mean"], 2),
                        _f(dc["median"], 1),
                    ]
                ],
                figures=["demo_context"],
            )
        )
    if a["trajectories"]:
        out.append(
            Section(
                "trajectories",
                f"Same-start-state trajectories: {a['trajectory_task']} (Figure 9)",
                "Every compared run's episodes of one task (up to three each). Same start: "
                "whether the episode's first frame equals the first row's.",
                ["Run", "Run index", "Outcome", "Score", "Steps", "Same start", "Actions"],
                [
                    [
                        r["run"],
                        str(r["run_index"]),
                        ("Pass" if r["passed"] else "Fail") + f" ({r['outcome']})",
                        _f(r["score"]),
                        f"{len(r['actions'])}/{r['max_steps']}",
                        "yes" if r["same_start"] else "no",
                        " ".join(r["actions"][:30]) + (" …" if len(r["actions"]) > 30 else ""),
                    ]
                    for r in a["trajectories"]
                ],
                figures=["trajectory_strips", "frame_strips"],
            )
        )
    return out


def _tok(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x / 1e6:.3f}M tokens" if x >= 1e5 else f"{x:,.0f} tokens"


def render_sections_markdown(sections: list[Section], figures: dict[str, tuple[str, bytes]]) -> str:
    lines: list[str] = []
    for s in sections:
        lines += [f"## {s.title}", "", s.caption, ""]
        lines.append("| " + " | ".join(s.headers) + " |")
        lines.append("|" + "|".join("---" for _ in s.headers) + "|")
        for row in s.rows:
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        if not s.rows:
            lines.append("| " + " | ".join("–" for _ in s.headers) + " |")
        for f in s.figures:
            if f in figures:
                lines += ["", f"![{figures[f][0]}](figures/{f}.png)"]
        lines.append("")
    return "\n".join(lines)
