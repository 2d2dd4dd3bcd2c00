"""The leaderboard: verified submission summaries in ``submissions/`` and a static site.

``add`` stores a summary only after the bundle verifies, and recomputes every
number from the replayed results (never from the bundle's own summary).
``build`` writes ``leaderboard.json``, ``leaderboard.md`` and a self-contained
``index.html`` (sortable columns, category breakdown, reference rows) plus one
report page per submission.
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vical.errors import VicalError
from vical.paper import TABLE1_COLUMNS, TABLE1_REFERENCE
from vical.report.table import build_report, render_markdown
from vical.run.results import atomic_write_bytes, file_sha256
from vical.submit.verify import DEFAULT_KEYRING, verify_bundle

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
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "submission"


def add(
    bundle: Path,
    pubkeys: list[Path] | None = None,
    keyring: Path | None = DEFAULT_KEYRING,
    submissions: Path = SUBMISSIONS,
    workers: int | None = None,
    progress: bool = True,
) -> Path:
    """Verify ``bundle`` and store its summary; returns the summary file."""
    verdict = verify_bundle(
        bundle, pubkeys=pubkeys, keyring=keyring, workers=workers, progress=progress
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
    digest = file_sha256(Path(bundle))
    sid = f"{_slug(sub['team'])}--{_slug(str(sub['model']))}--{digest[:8]}"
    condition = verdict.condition
    report = build_report(verdict.results, sid, condition=condition)
    entry = {
        "id": sid,
        "team": sub["team"],
        "model": sub["model"],
        "endpoint_kind": sub["endpoint_kind"],
        "generation": sub.get("generation", {}),
        "date": sub.get("date"),
        "verified_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "verified": True,
        "partial": verdict.partial,
        "signer": verdict.signer,
        "bundle_sha256": digest,
        "vical_version": m["fingerprint"].get("vical_version"),
        "condition": condition,
        "report": report.model_dump(),
    }
    out = Path(submissions) / f"{sid}.json"
    atomic_write_bytes(out, (json.dumps(entry, indent=2, sort_keys=True) + "\n").encode())
    return out


def load_entries(submissions: Path = SUBMISSIONS) -> list[dict[str, Any]]:
    entries = []
    for p in sorted(Path(submissions).glob("*.json")):
        entries.append(json.loads(p.read_text()))
    entries.sort(key=lambda e: -(e["report"]["columns"]["All"]["score"] or 0.0))
    return entries


BASE_CONDITION = {"rules": "basic", "demos": True}


def is_ranked(entry: dict[str, Any]) -> bool:
    """Whether an entry competes: only runs under the paper's default condition (basic
    rules with the demonstration videos, Table 5's baseline) are ranked; the other three
    cells of Table 5 are ablations. Entries made before conditions were recorded played
    the default one."""
    return (entry.get("condition") or BASE_CONDITION) == BASE_CONDITION


def condition_label(condition: dict[str, Any] | None) -> str:
    """A condition as Table 5 names it, e.g. "Detailed rules, no video"."""
    c = condition or BASE_CONDITION
    rules = "Detailed rules" if c.get("rules") == "detailed" else "Base rules"
    return f"{rules}, {'video' if c.get('demos', True) else 'no video'}"


def _all_interval(e: dict[str, Any]) -> dict[str, Any] | None:
    """The environment-clustered interval of an entry's overall score, if it has one."""
    iv = ((e["report"].get("intervals") or {}).get("All") or {}).get("score")
    return iv if iv and iv.get("low") is not None else None


def _span(iv: dict[str, Any] | None, d: int = 1) -> str:
    return "–" if iv is None else f"[{iv['low']:.{d}f}, {iv['high']:.{d}f}]"


def _rows(entries: list[dict[str, Any]], references: bool = True) -> list[dict[str, Any]]:
    rows = []
    for e in entries:
        cols = e["report"]["columns"]
        rows.append(
            {
                "name": f"{e['model']} ({e['team']})",
                "id": e["id"],
                "date": e.get("date") or "",
                "verified": e.get("verified", False),
                "partial": e.get("partial", False),
                "reference": False,
                "cells": [(cols[c]["score"], cols[c]["pass_rate"]) for c in TABLE1_COLUMNS],
                "interval": _all_interval(e),
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
    ablations = [e for e in entries if not is_ranked(e)]
    extra = ""
    if ablations:
        extra = (
            "<h2>Ablation runs (not ranked)</h2>"
            "<p>Runs under another condition of the paper's ablation (Table 5): detailed "
            "rules and/or no demonstration video. They are verified like any run but not "
            "ranked, since only basic rules with the video is the benchmark's setting.</p>"
            + _html_table("ablations", _rows(ablations, references=False), condition=True)
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
        f"({esc(entry['team'])})</h1><p>bundle sha256 {esc(entry['bundle_sha256'])}, signer "
        f"{esc(entry['signer'])}, verified {esc(entry['verified_at'])}; condition: "
        f"{esc(condition_label(entry.get('condition')))}"
        f"{'' if is_ranked(entry) else ' (an ablation, not ranked)'}</p>"
        "<table><tr><th class='name'>Environment</th><th>S</th><th>P%</th><th>tasks</th></tr>"
        f"{rows}</table><pre>{esc(md)}</pre>"
        + (f"<p><a href='{esc(viewer)}'>Every episode in the viewer</a></p>" if viewer else "")
        + "<p><a href='../index.html'>back</a></p>"
        "</body></html>\n"
    )


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
        name = f"*{r['name']}*" if r["reference"] else r["name"]
        cond = f" {r['condition']} |" if condition else ""
        lines.append(
            f"| {name} | {r['date'][:10]} | {'yes' if r['verified'] else ''} | "
            f"{_span(r['interval'])} |{cond} {cells} |"
        )
    return lines


def render_markdown_board(entries: list[dict[str, Any]]) -> str:
    lines = ["# V-ICAL leaderboard", ""]
    lines += _markdown_rows(_rows([e for e in entries if is_ranked(e)]))
    ablations = [e for e in entries if not is_ranked(e)]
    if ablations:
        lines += [
            "",
            "## Ablation runs (not ranked)",
            "",
            "Other conditions of the paper's ablation (Table 5: detailed rules and/or no "
            "demonstration video); verified, but only basic rules with the video is ranked.",
            "",
            *_markdown_rows(_rows(ablations, references=False), condition=True),
        ]
    return "\n".join(lines) + "\n"


def build(out: Path, submissions: Path = SUBMISSIONS) -> Path:
    """Write the static site; returns the path of index.html."""
    out = Path(out)
    entries = load_entries(submissions)
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
