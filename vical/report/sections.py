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
from vical.report.table import CONDITION_TITLES, CONDITIONS, RunReport


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


# The expert reference's label and what it reads, wherever the report shows it.
EXPERT_LABEL = "Expert reference (privileged upper bound)"
EXPERT_NOTE = (
    "The expert reference is a privileged upper bound, not a human baseline. Its "
    "actions were planned offline by players that read what an agent never sees: the "
    "emulator's or simulator's save and restore (searching future frames), the game's "
    "RAM and the simulator's internal state (positions, the vehicle list, the board, "
    "the grid), and they are replayed as fixed action lists on each task's known seed, "
    "which works only because every task starts the same way. vical has no human row "
    "of its own: the Human row in Table 1 is the paper's, and a person's `vical play` "
    "run appears there as 'Human: <run>'."
)


def _ref_label(r: RunReport, random: RunReport | None, expert: RunReport | None) -> str | None:
    """A reference run's row label ("Random reference: <run>"), None for a compared run."""
    if r is random:
        return f"Random reference: {r.name}"
    if r is expert:
        return f"{EXPERT_LABEL}: {r.name}"
    return None


def _table1_cells(rep: RunReport) -> list[str]:
    cells = []
    for c in TABLE1_COLUMNS:
        cell = rep.columns[c]
        cells += [_f(cell.score), _f(cell.pass_rate, 0)]
    return cells


def _table1(runs: list[RunReport], random: RunReport | None) -> Section:
    """Table 1: the compared runs, the random reference and the paper's rows.

    The expert reference is not a row here (:func:`_expert_reference`): this table
    holds the paper's Human row, and a privileged program must not stand beside it.
    """
    headers = ["Model"] + [f"{c} {m}" for c in TABLE1_COLUMNS for m in ("S", "P%")]
    rows, classes = [], []
    for r in runs:
        # a `vical play` run (agent human) is a Human row, beside the paper's Human row
        human = r.agent == "human"
        label = f"Human: {r.name}" if human else f"{r.name} ({r.agent})"
        rows.append([label, *_table1_cells(r)])
        classes.append("run human" if human else "run")
    if random is not None:
        rows.append([f"Random reference: {random.name}", *_table1_cells(random)])
        classes.append("reference")
    for label, vals in TABLE1_REFERENCE.items():
        rows.append([label] + [x for s, p in vals for x in (f"{s:.1f}", str(p))])
        classes.append("paper")
    return Section(
        "table1",
        "Table 1: score S and pass rate P% by category",
        "S: normalized score (0–100); P%: pass rate. Task scores are averaged over runs, then "
        "over the tasks of each environment; every column weights its environments equally "
        "(an environment with several type tags counts in each). The random reference row is "
        "not pooled into the compared runs. Rows marked (paper) are the paper's published "
        "numbers, for comparison: its Human row is the paper's participants, not a vical run. "
        "The expert reference, when given, has its own table below.",
        headers,
        rows,
        row_classes=classes,
    )


def _expert_reference(expert: RunReport | None) -> Section | None:
    """The expert reference in a table of its own, labelled a privileged upper bound."""
    if expert is None:
        return None
    headers = ["Model"] + [f"{c} {m}" for c in TABLE1_COLUMNS for m in ("S", "P%")]
    rows = [[f"{EXPERT_LABEL}: {expert.name}", *_table1_cells(expert)]]
    if expert.intervals:
        cells = [f"{_level(expert)} interval (environments resampled)"]
        for c in TABLE1_COLUMNS:
            iv = expert.intervals.get(c) or {}
            cells += [_span(iv.get("score"), 1), _span(iv.get("pass_rate"), 0)]
        rows.append(cells)
    return Section(
        "expert_reference",
        "Expert reference: a privileged upper bound",
        EXPERT_NOTE + " Its scores bound the scale from above; they are not pooled into the "
        "compared runs or the analyses.",
        headers,
        rows,
        row_classes=["reference expert"] * len(rows),
    )


def _level(r: RunReport) -> str:
    first = next((iv for cell in (r.intervals or {}).values() for iv in cell.values() if iv), None)
    return f"{100 * first['level']:.0f}%" if first else "95%"


def _span(iv: dict[str, Any] | None, d: int) -> str:
    """An interval as "[low, high]"; "–" when there is none (a single environment)."""
    if not iv or iv.get("low") is None or iv.get("high") is None:
        return "–"
    return f"[{iv['low']:.{d}f}, {iv['high']:.{d}f}]"


def _table1_intervals(runs: list[RunReport], random: RunReport | None) -> Section | None:
    refs = [r for r in (random,) if r is not None]
    reps = [r for r in [*runs, *refs] if r.intervals]
    if not reps:
        return None
    first = next(
        (iv for r in reps for cell in (r.intervals or {}).values() for iv in cell.values() if iv),
        None,
    )
    level = f"{100 * first['level']:.0f}%" if first else "95%"
    resamples = f"{first['resamples']:,}" if first else "10,000"
    headers = ["Model"] + [f"{c} {m}" for c in TABLE1_COLUMNS for m in ("S", "P%")]
    rows = []
    for r in reps:
        assert r.intervals is not None
        label = _ref_label(r, random, None) or f"{r.name} ({r.agent})"
        cells = [label]
        for c in TABLE1_COLUMNS:
            iv = r.intervals.get(c) or {}
            cells += [_span(iv.get("score"), 1), _span(iv.get("pass_rate"), 0)]
        rows.append(cells)
    return Section(
        "table1_intervals",
        f"Table 1 uncertainty: {level} intervals",
        f"The {level} interval of every Table-1 cell above, from a bootstrap that resamples "
        f"environments ({resamples} resamples, seed 0): tasks of one environment move "
        "together, since they share a game, its rules and its demonstrations. A column "
        "with a single environment has no interval (–).",
        headers,
        rows,
        row_classes=["reference" if any(r is x for x in refs) else "run" for r in reps],
    )


def _signed_span(iv: dict[str, Any] | None, d: int) -> str:
    if not iv or iv.get("low") is None or iv.get("high") is None:
        return "–"
    return f"[{iv['low']:+.{d}f}, {iv['high']:+.{d}f}]"


def _paired(paired: dict[str, Any] | None) -> Section | None:
    if not paired:
        return None
    rows = []
    for c in TABLE1_COLUMNS:
        s, p = paired["columns"][c]["score"], paired["columns"][c]["pass_rate"]
        rows.append(
            [c, "–", "–", "–", "–"]
            if s is None
            else [
                c,
                f"{s['estimate']:+.1f}",
                _signed_span(s, 1),
                f"{p['estimate']:+.0f}",
                _signed_span(p, 0),
            ]
        )
    return Section(
        "paired",
        f"Paired comparison: {paired['a']} minus {paired['b']}",
        f"Differences per Table-1 column on the {paired['matched_episodes']} episodes both "
        f"runs played ({paired['matched_tasks']} tasks, matched by task and run index; "
        f"{paired['only_a']} episode(s) only in {paired['a']} and {paired['only_b']} only "
        f"in {paired['b']} are left out). The 95% interval resamples environments, keeping "
        "each task's two episodes together; an interval that excludes 0 is a difference "
        "the environments sampled here support.",
        ["Column", "Δ S", "Δ S interval", "Δ P%", "Δ P% interval"],
        rows,
    )


def table5_rows(table5: list[dict[str, Any]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Table 5 as text: headers, rows (a model's S / P% per condition, then its change
    against Base + Video with the paired interval of the score change), row classes."""
    headers = ["Model", *(CONDITION_TITLES[k] for k, _, _ in CONDITIONS)]
    rows: list[list[str]] = []
    classes: list[str] = []
    for row in table5:
        cells = [row["model"]]
        deltas = ["  change against Base + Video"]
        for key, _, _ in CONDITIONS:
            c = row["cells"].get(key)
            if c is None:
                cells.append("–")
                deltas.append("–")
                continue
            cells.append(f"{_f(c['score'])} / {_f(c['pass_rate'], 0)}")
            d = c.get("delta")
            if d is None:
                deltas.append("baseline" if key == "basic+video" else "–")
                continue
            paired = (d.get("paired") or {}).get("score")
            deltas.append(
                f"{_signed(d['score'], 1)} / {_signed(d['pass_rate'], 0)}"
                + (f" {_signed_span(paired, 1)}" if paired else "")
            )
        rows += [cells, deltas]
        classes += ["run", "reference"]
    return headers, rows, classes


def _table5(table5: list[dict[str, Any]] | None) -> Section | None:
    if not table5:
        return None
    headers, rows, classes = table5_rows(table5)
    return Section(
        "table5",
        "Table 5: demonstration video and rule specificity",
        "Each cell: normalized score S / pass rate P% of one run of the model under one "
        "condition (rules text: --rules basic|detailed; video: --demos/--no-demos). Base "
        "rules with the video is the baseline; the line below a model gives each "
        "condition's change against it (ΔS / ΔP%) and, in brackets, the 95% interval of "
        "ΔS on the episodes both runs played, environments resampled.",
        headers,
        rows,
        row_classes=classes,
    )


def _per_env(
    runs: list[RunReport], random: RunReport | None, expert: RunReport | None = None
) -> Section:
    reps = [*runs, *(r for r in (random, expert) if r is not None)]

    def name(r: RunReport) -> str:
        return f"{r.name} (privileged expert)" if r is expert else r.name

    headers = ["Environment", "Tags"] + [f"{name(r)} {m}" for r in reps for m in ("S", "P%")]
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
        "Mean score and pass rate per environment (over tasks, each task averaged over its runs)."
        + (
            " The privileged expert's columns are an upper bound (see the expert reference)."
            if expert is not None
            else ""
        ),
        headers,
        rows,
    )


def _failure_modes(rows: list[dict[str, Any]]) -> Section:
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
            + [f"{r['counts'][m]} ({_pct(r['shares'][m], 0)})" for m in modes]
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
            _pct(r["failure_rate"]),
            _pct(r["early_termination"]),
            _pct(r["timeout"]),
            _pct(r["other"]),
            _signed(r["phi_timeout"]),
        ]
        for r in rows
    ]


def _failure_by_type(rows: list[dict[str, Any]]) -> Section:
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


def _failure_by_type_random(rows: list[dict[str, Any]] | None) -> Section | None:
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
        _pct(s["early_success"]),
        _pct(s["early_death"]),
        _pct(s["budget_reached"]),
    ]


def _length_by_model(
    by_model: list[dict[str, Any]], random: dict[str, Any] | None, random_name: str | None
) -> Section:
    def row(label: str, s: dict[str, Any]) -> list[str]:
        return [
            label,
            str(s["n"]),
            f"{s['mean']:.1f} ± {s['sd']:.1f}",
            *_length_cells(s),
            _pct(s["early_other"]),
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


def _length_by_env(by_env: list[dict[str, Any]]) -> Section:
    return Section(
        "length_by_env",
        "Episode length by environment (Table 28)",
        "Pooled over the compared runs, sorted by mean length. ES: early success; ED: early "
        "death; BR: budget reached.",
        ["Environment", "n", "Mean", "Median [IQR]", "Range", "ES", "ED", "BR"],
        [[s["env"], str(s["n"]), f"{s['mean']:.1f}", *_length_cells(s)] for s in by_env],
    )


def _bias_audit(rows: list[dict[str, Any]]) -> Section:
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
                _pct(r["run_freq"], 0),
                _pct(r["pool_freq"], 0),
                f"{r['excess']:+.2f}",
                f"{r['tv']:.2f}",
                "Yes" if r["bias"] else "No",
            ]
            for r in rows
        ],
        figures=["action_heatmaps"],
    )


def _limitations(rows: list[dict[str, Any]]) -> Section:
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
                f"{_f(r['static'])} → {_f(r['dynamic'])} ({_signed(r['dynamic_gap'], 1)})",
                f"{_f(r['single'])} → {_f(r['multiple'])} ({_signed(r['memory_gap'], 1)})",
                f"{r['token_overflow']}/{r['episodes']}",
                f"{r['fixated']}/{r['episodes']}",
                f"{r['conflicting']}/{r['responses']}",
                f"{r['format_retry_episodes']}/{r['episodes']}",
            ]
            for r in rows
        ],
    )


def _strata(strata: list[dict[str, Any]] | None) -> Section | None:
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
                _f(r["best_score"]),
                _f(r["random_score"]),
                _f(r["delta"]),
            ]
            for r in strata
        ],
        figures=["strata"],
    )


def _strata_summary(strata: list[dict[str, Any]] | None) -> Section | None:
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


def _associations(as_: dict[str, Any], random: dict[str, float | None] | None) -> Section:
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
    if random:
        rows.append(
            [
                "Random reference (negative control, Table 1 columns)",
                f"Single {_f(random['Single'])}, Multiple {_f(random['Multiple'])}; "
                f"Static {_f(random['Static'])}, Dynamic {_f(random['Dynamic'])}",
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


def _demo_context(dc: dict[str, Any] | None) -> Section | None:
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
                _f(dc["mean"], 2),
                _f(dc["median"], 1),
            ]
        ],
        figures=["demo_context"],
    )


def _trajectories(rows: list[dict[str, Any]], task: str | None) -> Section | None:
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
                _f(r["score"]),
                f"{len(r['actions'])}/{r['max_steps']}",
                "yes" if r["same_start"] else "no",
                " ".join(r["actions"][:30]) + (" …" if len(r["actions"]) > 30 else ""),
            ]
            for r in rows
        ],
        figures=["trajectory_strips", "frame_strips"],
    )


def _usd(x: float | None) -> str:
    return "unknown" if x is None else f"{x:,.4f}"


def _usage(usage: dict[str, Any] | None) -> Section | None:
    if not usage:
        return None

    def row(label: str, u: dict[str, Any]) -> list[str]:
        return [
            label,
            str(u["episodes"]),
            f"{u['input_tokens']:,}",
            f"{u['cached_tokens']:,}",
            f"{u['output_tokens']:,}",
            _usd(u["cost_usd"]),
        ]

    rows, classes = [], []
    for r in usage["runs"]:
        label = f"Random reference: {r['run']}" if r["reference"] else f"{r['run']} ({r['agent']})"
        rows.append([*row(label, r), r["price_entry"] or "–"])
        classes.append("reference" if r["reference"] else "run")
    if len(usage["runs"]) > 1:
        rows.append([*row("Total", usage["total"]), "–"])
        classes.append("")
    return Section(
        "usage",
        "Tokens and cost per run",
        "Summed over the scored episodes as each recorded them. Cached tokens are part of "
        "the input tokens; output tokens include reasoning. Cost in USD, priced when the "
        "episode was played from the price table entry shown; unknown when the model had no "
        "entry and the episode used tokens (an episode without tokens costs 0). report.json "
        "has the same figures per environment and for episodes ended by an infrastructure "
        "failure.",
        ["Run", "Episodes", "Input tokens", "Cached", "Output tokens", "Cost (USD)", "Price entry"],
        rows,
        row_classes=classes,
    )


def provenance_sentence(prov: dict[str, Any]) -> str:
    """The evaluated tasks' provenance in one sentence (shares of starts and clips)."""
    share = _share
    st, cl = prov["starts"], prov["clips"]
    n_st, n_cl = sum(st.values()), sum(cl.values())
    text = (
        f"Of the {prov['tasks']} evaluated tasks, {n_st} start from a replayed start "
        f"sequence: {share(st['paper'], n_st)} the paper's, {share(st['generated'], n_st)} "
        f"generated by seeded recipes, {share(st['human'], n_st)} recorded by people. Their "
        f"{n_cl} distinct demonstration clips: {share(cl['search'], n_cl)} from search "
        f"experts, {share(cl['scripted'], n_cl)} from scripted programs, "
        f"{share(cl['human'], n_cl)} from people."
    )
    if prov["unknown"]:
        text += (
            f" {len(prov['unknown'])} task(s) are not in the installed task data and are "
            "not counted."
        )
    return text


def _provenance(prov: dict[str, Any] | None) -> Section | None:
    """Who made the evaluated tasks' start sequences and demo clips (shares by origin)."""
    headers = ["Material", "Count", "Paper", "Generated", "Human", "Search", "Scripted"]
    if not prov or not (prov["tasks"] or prov["unknown"]):
        return None
    if not prov["tasks"]:
        return Section(
            "provenance",
            "Provenance of the start states and demonstrations",
            f"None of the {len(prov['unknown'])} evaluated task ids is in the installed task "
            f"data (digest {prov['digest'][:12]}…): who made their start states and "
            "demonstrations is not known here.",
            headers,
            [],
        )
    st, cl = prov["starts"], prov["clips"]
    rows = [
        ["start sequences", str(sum(st.values()))]
        + [_share(st[o], sum(st.values())) for o in ("paper", "generated", "human")]
        + ["–", "–"],
        ["demonstration clips", str(sum(cl.values()))]
        + ["–", "–", _share(cl["human"], sum(cl.values()))]
        + [_share(cl[o], sum(cl.values())) for o in ("search", "scripted")],
    ]
    return Section(
        "provenance",
        "Provenance of the start states and demonstrations",
        provenance_sentence(prov)
        + " Counted from the installed task data (digest "
        + f"{prov['digest'][:12]}…) over the compared runs' tasks; a clip shown with "
        "several tasks of an environment counts once. The paper's human-initialized starts "
        "and its clips were made by people; `vical tasks show <task>` names each one's "
        "source.",
        headers,
        rows,
    )


def _share(part: int, whole: int) -> str:
    return f"{part} ({100 * part / whole:.0f}%)" if whole else str(part)


def report_sections(doc: dict[str, Any]) -> list[Section]:
    """Every section of the report, in reading order; optional ones only when their data exists."""
    a = doc["analyses"]
    runs, random, expert = doc["runs"], doc["random"], doc.get("expert")
    sections = [
        _table1(runs, random),
        _table1_intervals(runs, random),
        _expert_reference(expert),
        _provenance(a.get("provenance")),
        _paired(doc.get("paired")),
        _table5(doc.get("table5")),
        _per_env(runs, random, expert),
        _failure_modes(a["failure_modes"]),
        _failure_by_type(a["failure_by_type"]),
        _failure_by_type_random(a.get("failure_by_type_random")),
        _length_by_model(
            a["episode_length"]["by_model"], a.get("episode_length_random"), doc["random_name"]
        ),
        _length_by_env(a["episode_length"]["by_env"]),
        _bias_audit(a["bias_audit"]["rows"]),
        _limitations(a["limitations"]),
        _strata(a["strata"]),
        _strata_summary(a["strata"]),
        _associations(a["associations"], a.get("associations_random")),
        _demo_context(a.get("demo_context")),
        _trajectories(a["trajectories"], a["trajectory_task"]),
        _usage(doc.get("usage")),
    ]
    return [s for s in sections if s is not None]


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
