"""The analyses' sections of the report (Appendix Tables 19-28, Figures 4-9): failure
modes, episode lengths, action bias, limitations, difficulty strata, associations,
demonstration context and same-start trajectories, one function each, read by
:func:`vical.report.sections.report_sections`."""

from __future__ import annotations

from typing import Any

from vical.outcomes import AGENT_FAILURES, ENVIRONMENT_FAILURES, FAILURE_MODES
from vical.report.cells import Section, num, p_value, pct, signed, tokens


def failure_modes(rows: list[dict[str, Any]]) -> Section:
    # the modes the environment decides first, then those the agent reports
    modes = [m.value for m in FAILURE_MODES if m in ENVIRONMENT_FAILURES] + [
        m.value for m in FAILURE_MODES if m in AGENT_FAILURES
    ]
    return Section(
        "failure_modes",
        "Failure modes per run (Appendix 5.1)",
        "A failure is an episode without a pass; each mode is given as a count and its "
        "share of the run's failures. Timeout: the step budget ran out; early termination: "
        "in-environment failure or death; invalid action: three malformed replies; token "
        "overflow: context exceeded; API error: the provider failed.",
        ["Run", "Episodes", "Passed", "Failed", *modes],
        [
            [r["run"], str(r["episodes"]), str(r["passed"]), str(r["failed"])]
            + [f"{r['counts'][m]} ({pct(r['shares'][m], 0)})" for m in modes]
            for r in rows
        ],
        figures=["failure_modes"],
    )


_TYPE_HEADERS = [
    "Game type",
    "Failed/all",
    "Failure rate",
    "Early termination",
    "Timeout",
    "Other",
    "φ_timeout",
]


def _type_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            r["type"],
            f"{r['failed']}/{r['episodes']}",
            pct(r["failure_rate"]),
            pct(r["early_termination"]),
            pct(r["timeout"]),
            pct(r["other"]),
            signed(r["phi_timeout"]),
        ]
        for r in rows
    ]


def failure_by_type(rows: list[dict[str, Any]]) -> Section:
    return Section(
        "failure_by_type",
        "Game type and failure mode (Table 25)",
        "Pooled over the compared runs. Early-termination, timeout and other shares are "
        "conditional on failure. φ_timeout: correlation between membership in the type "
        "and ending by timeout (rather than early termination) among failed episodes. "
        "Types are multi-label, so rows overlap.",
        _TYPE_HEADERS,
        _type_rows(rows),
        figures=["failure_by_type"],
    )


def failure_by_type_random(rows: list[dict[str, Any]] | None) -> Section | None:
    if not rows:
        return None
    return Section(
        "failure_by_type_random",
        "Game type and failure mode: random reference",
        "The same table over the random reference's episodes.",
        _TYPE_HEADERS,
        _type_rows(rows),
    )


def _length_cells(s: dict[str, Any]) -> list[str]:
    """The cells Tables 27 and 28 share: median [IQR], range, early success/death, budget."""
    return [
        f"{s['median']:.1f} [{s['q1']:.1f}, {s['q3']:.1f}]",
        f"{s['min']}–{s['max']}",
        pct(s["early_success"]),
        pct(s["early_death"]),
        pct(s["budget_reached"]),
    ]


def length_by_model(
    by_model: list[dict[str, Any]], random: dict[str, Any] | None, random_name: str | None
) -> Section:
    def row(label: str, s: dict[str, Any]) -> list[str]:
        return [
            label,
            str(s["n"]),
            f"{s['mean']:.1f} ± {s['sd']:.1f}",
            *_length_cells(s),
            pct(s["early_other"]),
        ]

    rows = [row(s["run"], s) for s in by_model]
    if random:
        rows.append(row(f"{random_name} (random reference)", random))
    return Section(
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


def length_by_env(by_env: list[dict[str, Any]]) -> Section:
    return Section(
        "length_by_env",
        "Episode length by environment (Table 28)",
        "Pooled over the compared runs, sorted by mean length. ES: early success; ED: early "
        "death; BR: budget reached.",
        ["Environment", "n", "Mean", "Median [IQR]", "Range", "ES", "ED", "BR"],
        [[s["env"], str(s["n"]), f"{s['mean']:.1f}", *_length_cells(s)] for s in by_env],
    )


def bias_audit(rows: list[dict[str, Any]]) -> Section:
    return Section(
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
                pct(r["run_freq"], 0),
                pct(r["pool_freq"], 0),
                f"{r['excess']:+.2f}",
                f"{r['tv']:.2f}",
                "Yes" if r["bias"] else "No",
            ]
            for r in rows
        ],
        figures=["action_heatmaps"],
    )


def limitations(rows: list[dict[str, Any]]) -> Section:
    return Section(
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
                f"{num(r['static'])} → {num(r['dynamic'])} ({signed(r['dynamic_gap'], 1)})",
                f"{num(r['single'])} → {num(r['multiple'])} ({signed(r['memory_gap'], 1)})",
                f"{r['token_overflow']}/{r['episodes']}",
                f"{r['fixated']}/{r['episodes']}",
                f"{r['conflicting']}/{r['responses']}",
                f"{r['format_retry_episodes']}/{r['episodes']}",
            ]
            for r in rows
        ],
    )


def strata(strata: list[dict[str, Any]] | None) -> Section | None:
    if strata is None:
        return None
    return Section(
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
                num(r["best_score"]),
                num(r["random_score"]),
                num(r["delta"]),
            ]
            for r in strata
        ],
        figures=["strata"],
    )


def strata_summary(strata: list[dict[str, Any]] | None) -> Section | None:
    if strata is None:
        return None
    tiers: dict[str, list[dict[str, Any]]] = {}
    for r in strata:
        tiers.setdefault(r["tier"], []).append(r)
    return Section(
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


def associations(as_: dict[str, Any], random: dict[str, float | None] | None) -> Section:
    m, d = as_["memory_score"], as_["dynamics_tokens"]
    rows = [
        [
            "Memory requirement vs score",
            f"Single: {num(m['group_means']['Single'])}; Multiple: {num(m['group_means']['Multiple'])}",
            str(m["cells"]),
            "–" if m["r_pb"] is None else f"r_pb = {m['r_pb']:+.3f}",
            p_value(m["p"]),
        ],
        [
            "Environment dynamics vs token usage",
            "Static: "
            + tokens(d["group_means"]["Static"])
            + "; Dynamic: "
            + tokens(d["group_means"]["Dynamic"]),
            str(d["cells"]),
            "–" if d["r_pb"] is None else f"r_pb = {d['r_pb']:+.3f}",
            p_value(d["p"]),
        ],
    ]
    if random:
        rows.append(
            [
                "Random reference (negative control, Table 1 columns)",
                f"Single {num(random['Single'])}, Multiple {num(random['Multiple'])}; "
                f"Static {num(random['Static'])}, Dynamic {num(random['Dynamic'])}",
                "–",
                "–",
                "–",
            ]
        )
    return Section(
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


def demo_context(dc: dict[str, Any] | None) -> Section | None:
    if not dc:
        return None
    return Section(
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
                num(dc["mean"], 2),
                num(dc["median"], 1),
            ]
        ],
        figures=["demo_context"],
    )


def trajectories(rows: list[dict[str, Any]], task: str | None) -> Section | None:
    if not rows:
        return None
    return Section(
        "trajectories",
        f"Same-start-state trajectories: {task} (Figure 9)",
        "Every compared run's episodes of one task (up to three each). Same start: "
        "whether the episode's first frame equals the first row's.",
        ["Run", "Run index", "Outcome", "Score", "Steps", "Same start", "Actions"],
        [
            [
                r["run"],
                str(r["run_index"]),
                ("Pass" if r["passed"] else "Fail") + f" ({r['outcome']})",
                num(r["score"]),
                f"{len(r['actions'])}/{r['max_steps']}",
                "yes" if r["same_start"] else "no",
                " ".join(r["actions"][:30]) + (" …" if len(r["actions"]) > 30 else ""),
            ]
            for r in rows
        ],
        figures=["trajectory_strips", "frame_strips"],
    )
