"""The report's tables as data (title, caption, headers, rows of text), one list for all formats.

Markdown and HTML both render from :func:`report_sections`, so the two never
disagree about a number. Each section may name figures (file stems) to show
after its table.
"""

from __future__ import annotations

from typing import Any

from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE
from vical.report import appendix
from vical.report.cells import Section, num, signed
from vical.report.table import CONDITION_TITLES, CONDITIONS, RunReport

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


def _table1_headers() -> list[str]:
    return ["Model"] + [f"{c} {m}" for c in TABLE1_COLUMNS for m in ("S", "P%")]


def _table1_cells(rep: RunReport) -> list[str]:
    cells = []
    for c in TABLE1_COLUMNS:
        cell = rep.columns[c]
        cells += [num(cell.score), num(cell.pass_rate, 0)]
    return cells


def _table1(runs: list[RunReport], random: RunReport | None) -> Section:
    """Table 1: the compared runs, the random reference and the paper's rows.

    The expert reference is not a row here (:func:`_expert_reference`): this table
    holds the paper's Human row, and a privileged program must not stand beside it.
    """
    headers = _table1_headers()
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
    headers = _table1_headers()
    rows = [[f"{EXPERT_LABEL}: {expert.name}", *_table1_cells(expert)]]
    if expert.intervals:
        level = _level(_first_interval([expert]))
        rows.append([f"{level} interval (environments resampled)", *_interval_cells(expert)])
    return Section(
        "expert_reference",
        "Expert reference: a privileged upper bound",
        EXPERT_NOTE + " Its scores bound the scale from above; they are not pooled into the "
        "compared runs or the analyses.",
        headers,
        rows,
        row_classes=["reference expert"] * len(rows),
    )


def _first_interval(reps: list[RunReport]) -> dict[str, Any] | None:
    """The first interval the runs hold (they all share its level and resamples)."""
    return next(
        (iv for r in reps for cell in (r.intervals or {}).values() for iv in cell.values() if iv),
        None,
    )


def _level(first: dict[str, Any] | None) -> str:
    return f"{100 * first['level']:.0f}%" if first else "95%"


def _interval_cells(rep: RunReport) -> list[str]:
    """A run's Table-1 intervals, score and pass rate per column."""
    cells = []
    for c in TABLE1_COLUMNS:
        iv = (rep.intervals or {}).get(c) or {}
        cells += [_span(iv.get("score"), 1), _span(iv.get("pass_rate"), 0)]
    return cells


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
    first = _first_interval(reps)
    level = _level(first)
    resamples = f"{first['resamples']:,}" if first else "10,000"
    headers = _table1_headers()
    rows = []
    for r in reps:
        label = _ref_label(r, random, None) or f"{r.name} ({r.agent})"
        rows.append([label, *_interval_cells(r)])
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
            cells.append(f"{num(c['score'])} / {num(c['pass_rate'], 0)}")
            d = c.get("delta")
            if d is None:
                deltas.append("baseline" if key == "basic+video" else "–")
                continue
            paired = (d.get("paired") or {}).get("score")
            deltas.append(
                f"{signed(d['score'], 1)} / {signed(d['pass_rate'], 0)}"
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
            cells += [num(x.score if x else None), num(x.pass_rate if x else None, 0)]
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
        appendix.failure_modes(a["failure_modes"]),
        appendix.failure_by_type(a["failure_by_type"]),
        appendix.failure_by_type_random(a.get("failure_by_type_random")),
        appendix.length_by_model(
            a["episode_length"]["by_model"], a.get("episode_length_random"), doc["random_name"]
        ),
        appendix.length_by_env(a["episode_length"]["by_env"]),
        appendix.bias_audit(a["bias_audit"]["rows"]),
        appendix.limitations(a["limitations"]),
        appendix.strata(a["strata"]),
        appendix.strata_summary(a["strata"]),
        appendix.associations(a["associations"], a.get("associations_random")),
        appendix.demo_context(a.get("demo_context")),
        appendix.trajectories(a["trajectories"], a["trajectory_task"]),
        _usage(doc.get("usage")),
    ]
    return [s for s in sections if s is not None]


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
