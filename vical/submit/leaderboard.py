"""The leaderboard: verified submission summaries in ``submissions/`` and a static site.

``add`` stores a summary only after the bundle verifies, and recomputes every
number from the replayed results (never from the bundle's own summary).
``build`` writes ``leaderboard.json``, ``leaderboard.md`` and a self-contained
``index.html`` (sortable columns, category breakdown, reference rows) plus one
report page per submission.

What is ranked: one run per task, run 0, as the protocol plays it; a bundle's
further runs (``runs_per_task`` > 1) are summarised apart and never ranked. A
partial bundle (tasks missing) is listed apart and never ranked beside complete
ones, nor is a run under an ablation condition. Team, model, date and
description cannot be proved by verification: they pass a strict schema
(:func:`vical.submit.labels.check_submitter`) and are shown as the team states
them, escaped in Markdown and HTML. ``add`` and ``build`` either succeed or refuse
one bundle (or one stored entry) with a one-line reason.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vical.errors import VicalError
from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE
from vical.report.table import build_report, render_markdown
from vical.run.results import atomic_write_bytes, file_sha256
from vical.submit.verify import DEFAULT_KEYRING, VerifyError, verify_bundle

SUBMISSIONS = Path("submissions")


class LeaderboardError(VicalError, ValueError):
    pass


def _machine_text(m: dict[str, Any] | None) -> str:
    """A machine in one phrase: CPU, numpy's AVX-512/AVX2 level, self-check status."""
    if not m:
        return "not recorded"
    feats = m.get("numpy_features") or []
    top = next((f for f in ("AVX512F", "AVX2", "AVX", "SSE42") if f in feats), "baseline")
    doctor = m.get("doctor") or {}
    return f"{m.get('cpu_model')}, numpy up to {top}, self-check {doctor.get('status', '?')}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower())[:40].strip("-") or "submission"


def md_escape(text: Any) -> str:
    """``text`` safe in a Markdown table cell: HTML escaped, Markdown punctuation and
    ``|`` backslash-escaped, on one line."""
    out = html.escape(" ".join(str(text).split()), quote=True)
    return re.sub(r"([\\`*_\[\]{}()#+!|~>-])", r"\\\1", out)


def add(
    bundle: Path,
    pubkeys: list[Path] | None = None,
    keyring: Path | None = DEFAULT_KEYRING,
    submissions: Path = SUBMISSIONS,
    workers: int | None = None,
    progress: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Verify ``bundle`` and store its summary; returns the summary file.
    ``on_progress(done, total)`` follows the replay (:func:`verify_bundle`).

    Refuses (:class:`LeaderboardError`, one line) a bundle that fails verification, an
    entry that exists already (the id holds the bundle's full sha256, so only the same
    bundle can collide) and, as a last resort, any exception the checks did not foresee,
    named in the line."""
    from vical.run.pool import Interrupted

    try:
        return _add(bundle, pubkeys, keyring, submissions, workers, progress, on_progress)
    except (VerifyError, LeaderboardError, Interrupted, MemoryError):
        raise
    except Exception as e:  # RecursionError included
        from vical.submit.verify import UnexpectedError

        raise UnexpectedError(e) from e


def _add(
    bundle: Path,
    pubkeys: list[Path] | None,
    keyring: Path | None,
    submissions: Path,
    workers: int | None,
    progress: bool,
    on_progress: Callable[[int, int], None] | None,
) -> Path:
    verdict = verify_bundle(
        bundle,
        pubkeys=pubkeys,
        keyring=keyring,
        workers=workers,
        progress=progress,
        on_progress=on_progress,
    )
    if not verdict.ok:
        bad = ", ".join(e.episode for e in verdict.mismatches[:5])
        machines = verdict.machines or {}
        sides = "; ".join(
            f"{who}: {_machine_text(machines.get(key))}"
            for who, key in (("submitter", "submitter"), ("this machine", "verifier"))
        )
        raise LeaderboardError(
            f"{bundle} failed replay verification ({bad}); not added. Machines: {sides}"
        )
    m = verdict.manifest
    sub = m["submitter"]
    from vical.submit.labels import check_submitter

    try:
        check_submitter(sub)
    except VerifyError as e:
        raise LeaderboardError(f"{bundle}: {e}") from None
    digest = file_sha256(Path(bundle))
    sid = f"{_slug(sub['team'])}--{_slug(str(sub['model']))}--{digest}"
    out = Path(submissions) / f"{sid}.json"
    if out.exists():
        raise LeaderboardError(f"{bundle}: already added as {out}; an entry is never replaced")
    condition = verdict.condition
    # the protocol's one run per task is ranked; further runs are shown apart
    first = [r for r in verdict.results if r.run_index == 0]
    further = [r for r in verdict.results if r.run_index > 0]
    if not first:
        raise LeaderboardError(f"{bundle}: no episode of run 0; nothing to rank")
    try:
        report = build_report(first, sid, condition=condition)
        further_report = build_report(further, sid, condition=condition) if further else None
    except Exception as e:  # a report that cannot be made is a refusal, never a crash
        raise LeaderboardError(
            f"{bundle}: cannot summarise the results ({type(e).__name__})"
        ) from None
    entry = {
        "id": sid,
        "team": sub["team"],
        "model": sub["model"],
        "endpoint_kind": sub["endpoint_kind"],
        "generation": sub.get("generation", {}),
        "date": sub.get("date"),
        "description": sub.get("description"),
        "runs_per_task": 1 + max(r.run_index for r in verdict.results),
        "tasks": len(first),
        "further_runs": None if further_report is None else further_report.model_dump(),
        "verified_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "verified": True,
        "partial": verdict.partial,
        "signer": verdict.signer,
        "bundle_sha256": digest,
        "vical_version": m["fingerprint"].get("vical_version"),
        "condition": condition,
        # the run's agent: its kind (vical.submit.kinds) decides whether it can be ranked
        "agent": verdict.agent,
        "report": report.model_dump(),
    }
    _create(out, (json.dumps(entry, indent=2, sort_keys=True) + "\n").encode())
    return out


def _create(out: Path, data: bytes) -> None:
    """Write a new entry file; :class:`LeaderboardError` when it exists (never replaced,
    even by two ``add`` of the same bundle at once)."""
    import os
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".entry-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, out)  # fails if the name exists: no overwrite
        except FileExistsError:
            raise LeaderboardError(f"{out} exists already; an entry is never replaced") from None
    finally:
        os.unlink(tmp)


def entry_problem(e: Any) -> str | None:
    """Why a stored entry cannot be shown (None when it can)."""
    from vical.report.table import RunReport
    from vical.submit.labels import check_submitter

    if not isinstance(e, dict):
        return "not a JSON object"
    for key in ("id", "signer", "bundle_sha256", "verified_at"):
        if not isinstance(e.get(key), str) or not re.fullmatch(r"[A-Za-z0-9:+._-]{1,200}", e[key]):
            return f"field {key!r} is missing or malformed"
    sub = {k: e.get(k) for k in ("team", "model", "endpoint_kind", "date", "description")}
    sub = {k: v for k, v in sub.items() if v is not None}
    try:
        check_submitter(sub)
    except VerifyError as ve:
        return str(ve)
    try:
        RunReport.model_validate(e.get("report"))
        if e.get("further_runs") is not None:
            RunReport.model_validate(e["further_runs"])
        _all_score(e)
    except (ValueError, TypeError, KeyError) as ex:
        return f"report unreadable ({type(ex).__name__})"
    if e.get("agent") is not None and not isinstance(e.get("agent"), str):
        return "field 'agent' is not a string"
    if not isinstance(e.get("partial", False), bool):
        return "field 'partial' is not a boolean"
    cond = e.get("condition")
    if cond is not None and not (
        isinstance(cond, dict)
        and cond.get("rules") in ("basic", "detailed")
        and isinstance(cond.get("demos"), bool)
    ):
        return "field 'condition' is malformed"
    return None


def _all_score(e: dict[str, Any]) -> float:
    score = e["report"]["columns"]["All"]["score"]
    if score is not None and not isinstance(score, int | float):
        raise TypeError("score")
    return float(score or 0.0)


def load_entries(
    submissions: Path = SUBMISSIONS, skipped: list[str] | None = None
) -> list[dict[str, Any]]:
    """The stored entries, best overall score first; an entry that cannot be shown
    is left out, with a one-line reason appended to ``skipped``."""
    entries = []
    for p in sorted(Path(submissions).glob("*.json")):
        try:
            e = json.loads(p.read_bytes())
        except (OSError, ValueError, RecursionError) as ex:
            problem: str | None = f"unreadable ({type(ex).__name__})"
        else:
            problem = entry_problem(e)
        if problem:
            if skipped is not None:
                skipped.append(f"{p.name}: {problem}"[:300])
            continue
        entries.append(e)
    entries.sort(key=lambda e: -_all_score(e))
    return entries


BASE_CONDITION = {"rules": "basic", "demos": True}
REFERENCE_TEXT = (
    "Runs of the random and expert references (their actions are re-derived from the "
    "seed or the packaged plans, never a model's), or of an entry that does not name its "
    "agent: verified, never ranked."
)

# The entries shown below the ranking, each group under its own heading.
UNRANKED_TITLES = {
    "references": "Reference agents",
    "partial": "Partial submissions",
    "further": "Further runs",
    "ablations": "Ablation runs",
}
PARTIAL_TEXT = (
    "Bundles that leave out some tasks: verified on the tasks they hold, never "
    "ranked beside complete ones."
)
FURTHER_TEXT = (
    "The ranking uses one run per task (run 0), as the protocol plays it; these "
    "are the same submissions' other runs."
)


# the ablation group's sentence on the page and in the Markdown board
ABLATIONS_PAGE_TEXT = (
    "Runs under another condition of the paper's ablation (Table 5): detailed "
    "rules and/or no demonstration video. They are verified like any run but not "
    "ranked, since only basic rules with the video is the benchmark's setting."
)
ABLATIONS_BOARD_TEXT = (
    "Other conditions of the paper's ablation (Table 5: detailed rules and/or "
    "no demonstration video); verified, but only basic rules with the video is ranked."
)


def _unranked(
    entries: list[dict[str, Any]], order: tuple[str, ...], ablations_text: str
) -> Iterator[tuple[str, str, str, list[dict[str, Any]]]]:
    """Each unranked group of UNRANKED_TITLES that has entries, in ``order``: its key,
    heading, sentence and rows (an entry can be in two groups: a partial bundle with
    further runs; the further runs' group shows those runs' report)."""
    groups = {
        "references": [e for e in entries if is_reference_run(e)],
        "partial": [e for e in entries if not is_ablation(e) and e.get("partial")],
        "further": [e for e in entries if e.get("further_runs")],
        "ablations": [e for e in entries if is_ablation(e)],
    }
    texts = {
        "references": REFERENCE_TEXT,
        "partial": PARTIAL_TEXT,
        "further": FURTHER_TEXT,
        "ablations": ablations_text,
    }
    for key in order:
        if groups[key]:
            report = "further_runs" if key == "further" else "report"
            rows = _rows(groups[key], references=False, report=report)
            yield key, f"{UNRANKED_TITLES[key]} (not ranked)", texts[key], rows


def is_ablation(entry: dict[str, Any]) -> bool:
    """Whether an entry ran under another condition than the paper's default (basic
    rules with the demonstration videos, Table 5's baseline). Entries made before
    conditions were recorded played the default one."""
    return (entry.get("condition") or BASE_CONDITION) != BASE_CONDITION


def is_ranked(entry: dict[str, Any]) -> bool:
    """Whether an entry competes: a complete bundle (every task) under the paper's
    default condition, played by an agent whose kind can be ranked
    (:func:`vical.submit.kinds.is_ranked_agent`: the random and expert references never
    are, nor an entry that does not name its agent); the others are listed apart."""
    from vical.submit.kinds import is_ranked_agent

    return is_main(entry) and is_ranked_agent(entry.get("agent"))


def is_main(entry: dict[str, Any]) -> bool:
    """A complete bundle under the paper's default condition (ranked unless its agent
    is a reference)."""
    return not is_ablation(entry) and not entry.get("partial", False)


def is_reference_run(entry: dict[str, Any]) -> bool:
    """A complete default-condition bundle whose agent is never ranked (listed apart)."""
    return is_main(entry) and not is_ranked(entry)


def condition_label(condition: dict[str, Any] | None) -> str:
    """A condition as Table 5 names it, e.g. "Detailed rules, no video"."""
    c = condition or BASE_CONDITION
    rules = "Detailed rules" if c.get("rules") == "detailed" else "Base rules"
    label = f"{rules}, {'video' if c.get('demos', True) else 'no video'}"
    wm = c.get("world_model")  # a coupled run (vical wm couple)
    if isinstance(wm, dict):
        label += f", world model {wm.get('name')}"
    return label


def _all_interval(e: dict[str, Any]) -> dict[str, Any] | None:
    """The environment-clustered interval of an entry's overall score, if it has one."""
    iv = ((e["report"].get("intervals") or {}).get("All") or {}).get("score")
    return iv if iv and iv.get("low") is not None else None


def _span(iv: dict[str, Any] | None, d: int = 1) -> str:
    return "–" if iv is None else f"[{iv['low']:.{d}f}, {iv['high']:.{d}f}]"


def _rows(
    entries: list[dict[str, Any]], references: bool = True, report: str = "report"
) -> list[dict[str, Any]]:
    rows = []
    from vical.submit.labels import mixed_script

    for e in entries:
        cols = e[report]["columns"]
        name = f"{e['model']} ({e['team']})"
        if mixed_script(name):  # a look-alike of another name, perhaps: say so
            name += " [mixed scripts: letters of several alphabets in one word]"
        rows.append(
            {
                "name": name,
                "id": e["id"],
                "date": str(e.get("date") or ""),
                "verified": e.get("verified", False),
                "partial": e.get("partial", False),
                "reference": False,
                "cells": [(cols[c]["score"], cols[c]["pass_rate"]) for c in TABLE1_COLUMNS],
                "interval": _all_interval(e) if report == "report" else None,
                "condition": condition_label(e.get("condition")),
            }
        )
    for label, vals in TABLE1_REFERENCE.items() if references else ():
        rows.append(
            {
                "name": label,
                "id": None,
                "date": "",
                "verified": False,
                "partial": False,
                "reference": True,
                "cells": [(float(s), float(p)) for s, p in vals],
                "interval": None,
                "condition": "",
            }
        )
    return rows


def _num(x: float | None, d: int = 1) -> str:
    return "–" if x is None else f"{x:.{d}f}"


PAGE_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#111}
table{border-collapse:collapse;font-size:13px}
th,td{border:1px solid #ccc;padding:4px 6px;text-align:right}
th{background:#f2f2f2;cursor:pointer;user-select:none}
td.name,th.name{text-align:left}
tr.reference td{font-style:italic;color:#555;background:#fafafa}
.group th{cursor:default}
.ok{color:#0a7a0a;font-weight:bold}
"""

SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th[data-col]').forEach(function(th){
    th.addEventListener('click',function(){
      var col=+th.dataset.col, asc=th.dataset.dir!=='desc';
      th.dataset.dir=asc?'desc':'asc';
      var body=t.tBodies[0], rows=Array.from(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[col].dataset.v, y=b.cells[col].dataset.v;
        var nx=parseFloat(x), ny=parseFloat(y);
        if(!isNaN(nx)&&!isNaN(ny)) return asc?ny-nx:nx-ny;
        return asc?String(x).localeCompare(y):String(y).localeCompare(x);
      });
      rows.forEach(function(r){body.appendChild(r);});
    });
  });
});
"""


def _html_table(table_id: str, rows: list[dict[str, Any]], condition: bool = False) -> str:
    """One sortable board table; with ``condition`` a column names each row's condition."""
    esc = html.escape
    head1 = [
        '<th class="name" rowspan="2" data-col="0">Model</th>',
        '<th rowspan="2" data-col="1">Date</th>',
        '<th rowspan="2" data-col="2">Verified</th>',
        '<th rowspan="2" data-col="3">All 95% interval</th>',
    ]
    col = 4
    if condition:
        head1.append(f'<th rowspan="2" data-col="{col}">Condition</th>')
        col += 1
    head2 = []
    for c in TABLE1_COLUMNS:
        head1.append(f'<th colspan="2" class="grp">{esc(c)}</th>')
        head2.append(f'<th data-col="{col}">S</th><th data-col="{col + 1}">P%</th>')
        col += 2
    body = []
    for r in rows:
        name = esc(r["name"])
        if r["id"]:
            name = f'<a href="reports/{esc(r["id"])}.html">{name}</a>'
        if r["partial"]:
            name += " (partial)"
        verified = '<span class="ok">✓ verified</span>' if r["verified"] else ""
        tds = [
            f'<td class="name" data-v="{esc(r["name"])}">{name}</td>',
            f'<td data-v="{esc(r["date"])}">{esc(r["date"][:10])}</td>',
            f'<td data-v="{int(r["verified"])}">{verified}</td>',
            f'<td data-v="{iv["low"] if (iv := r["interval"]) else ""}">{_span(iv)}</td>',
        ]
        if condition:
            tds.append(f'<td data-v="{esc(r["condition"])}">{esc(r["condition"])}</td>')
        for s, p in r["cells"]:
            tds.append(f'<td data-v="{"" if s is None else s}">{_num(s)}</td>')
            tds.append(f'<td data-v="{"" if p is None else p}">{_num(p, 0)}</td>')
        cls = ' class="reference"' if r["reference"] else ""
        body.append(f"<tr{cls}>" + "".join(tds) + "</tr>")
    return (
        f'<table class="sortable" id="{table_id}"><thead><tr>{"".join(head1)}</tr>'
        f"<tr>{''.join(head2)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def render_html(entries: list[dict[str, Any]]) -> str:
    ranked = [e for e in entries if is_ranked(e)]
    order = ("references", "partial", "further", "ablations")
    extra = "".join(
        f"<h2>{title}</h2><p>{text}</p>" + _html_table(key, rows, condition=key == "ablations")
        for key, title, text, rows in _unranked(entries, order, ABLATIONS_PAGE_TEXT)
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>V-ICAL leaderboard</title>"
        f"<style>{PAGE_CSS}</style></head><body>"
        "<h1>V-ICAL leaderboard</h1>"
        "<p>S: normalized score (0–100); P%: pass rate. Environment means weighted "
        "equally. Verified rows were replayed action by action in the simulator. Click a "
        "column header to sort. Reference rows (italic) are the paper's random and "
        "human scores. The 95% interval of the overall score comes from a bootstrap over "
        "environments (10,000 resamples); each submission's page gives the interval of "
        "every column.</p>"
        + _html_table("board", _rows(ranked))
        + extra
        + f"<script>{SORT_JS}</script></body></html>\n"
    )


def _report_page(entry: dict[str, Any], viewer: str | None = None) -> str:
    """One submission's page; ``viewer`` links its exported episode viewer when there is one."""
    from vical.report.table import RunReport

    md = render_markdown([RunReport.model_validate(entry["report"])], reference=False)
    esc = html.escape
    rows = "".join(
        f"<tr><td class='name'>{esc(e['env'])}</td><td>{e['score']:.1f}</td>"
        f"<td>{e['pass_rate']:.0f}</td><td>{e['n_tasks']}</td></tr>"
        for e in entry["report"]["envs"]
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(entry['id'])}</title>"
        f"<style>{PAGE_CSS}</style></head><body><h1>{esc(str(entry['model']))} "
        f"({esc(entry['team'])})</h1>"
        + (
            f"<p>{esc(entry['description'])} (as stated by the team)</p>"
            if entry.get("description")
            else ""
        )
        + f"<p>bundle sha256 {esc(entry['bundle_sha256'])}, signer "
        f"{esc(entry['signer'])}, verified {esc(entry['verified_at'])}; condition: "
        f"{esc(condition_label(entry.get('condition')))}"
        f"{' (an ablation, not ranked)' if is_ablation(entry) else ''}{' (partial, not ranked)' if entry.get('partial') else ''}</p>"
        "<table><tr><th class='name'>Environment</th><th>S</th><th>P%</th><th>tasks</th></tr>"
        f"{rows}</table><pre>{esc(md)}</pre>"
        + (f"<p><a href='{esc(viewer)}'>Every episode in the viewer</a></p>" if viewer else "")
        + "<p><a href='../index.html'>back</a></p>"
        "</body></html>\n"
    )


report_page = _report_page  # one submission's page, for the hub's live site (vical.hub.pages)


def _markdown_rows(rows: list[dict[str, Any]], condition: bool = False) -> list[str]:
    head = (
        "| Model | Date | Verified | All 95% interval | "
        + ("Condition | " if condition else "")
        + " | ".join(f"{c} S | {c} P%" for c in TABLE1_COLUMNS)
        + " |"
    )
    rule = "|---|---|---|---|" + ("---|" if condition else "") + "---:|" * (2 * len(TABLE1_COLUMNS))
    lines = [head, rule]
    for r in rows:
        cells = " | ".join(f"{_num(s)} | {_num(p, 0)}" for s, p in r["cells"])
        name = f"*{md_escape(r['name'])}*" if r["reference"] else md_escape(r["name"])
        if r["partial"]:
            name += " (partial)"
        cond = f" {md_escape(r['condition'])} |" if condition else ""
        lines.append(
            f"| {name} | {md_escape(r['date'][:10])} | {'yes' if r['verified'] else ''} | "
            f"{_span(r['interval'])} |{cond} {cells} |"
        )
    return lines


def render_markdown_board(entries: list[dict[str, Any]]) -> str:
    lines = ["# V-ICAL leaderboard", ""]
    lines += _markdown_rows(_rows([e for e in entries if is_ranked(e)]))
    order = ("partial", "references", "further", "ablations")
    for key, title, text, rows in _unranked(entries, order, ABLATIONS_BOARD_TEXT):
        lines += [
            "",
            f"## {title}",
            "",
            text,
            "",
            *_markdown_rows(rows, condition=key == "ablations"),
        ]
    return "\n".join(lines) + "\n"


def build(out: Path, submissions: Path = SUBMISSIONS, skipped: list[str] | None = None) -> Path:
    """Write the static site; returns the path of index.html. An entry that cannot be
    shown is left out with a one-line reason appended to ``skipped``."""
    out = Path(out)
    entries = load_entries(submissions, skipped)
    atomic_write_bytes(
        out / "leaderboard.json", (json.dumps({"entries": entries}, indent=2) + "\n").encode()
    )
    atomic_write_bytes(out / "leaderboard.md", render_markdown_board(entries).encode())
    for e in entries:
        # a viewer exported next to the board (vical view BUNDLE --export OUT/view/<id>)
        has_view = (out / "view" / e["id"] / "index.html").is_file()
        viewer = f"../view/{e['id']}/index.html" if has_view else None
        atomic_write_bytes(out / "reports" / f"{e['id']}.html", _report_page(e, viewer).encode())
    index = out / "index.html"
    atomic_write_bytes(index, render_html(entries).encode())
    return index
