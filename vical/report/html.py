"""A self-contained HTML report: every table, every figure embedded as a base64 PNG.

No scripts, no external stylesheets, fonts or images: the file opens offline
and can be attached or archived on its own.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from html import escape
from typing import Any

from vical import __version__
from vical.report.cells import Section
from vical.report.sections import EXPERT_LABEL, report_sections

_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1280px; padding: 0 1rem; color: #1d1d1f; }
h1 { margin-bottom: 0.2rem; }
nav { margin: 1rem 0 2rem; display: flex; flex-wrap: wrap; gap: 0.3rem 1rem; }
nav a { white-space: nowrap; }
section { margin-bottom: 2.5rem; }
p.caption { color: #444; max-width: 70rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d0d7; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f0f0f5; position: sticky; top: 0; }
td:first-child, th:first-child { text-align: left; }
tr.reference td { background: #fff8e1; }
tr.expert td { background: #eef4ff; }
tr.paper td { color: #666; font-style: italic; }
/* Table 1's All S and All P% (its last two columns) stay in view at the right edge of
   the table's box, so a narrow window shows them without scrolling sideways */
#t-table1 :is(th, td):nth-last-child(-n+2),
#t-expert_reference :is(th, td):nth-last-child(-n+2) {
  position: sticky; width: 5.5rem; min-width: 5.5rem; max-width: 5.5rem;
  box-sizing: border-box; white-space: nowrap; z-index: 1; }
#t-table1 td:nth-last-child(-n+2), #t-expert_reference td:nth-last-child(-n+2) {
  background: #fff; }
#t-table1 tr.reference td:nth-last-child(-n+2) { background: #fff8e1; }
#t-expert_reference tr.expert td:nth-last-child(-n+2) { background: #eef4ff; }
#t-table1 :is(th, td):last-child, #t-expert_reference :is(th, td):last-child { right: 0; }
#t-table1 :is(th, td):nth-last-child(2), #t-expert_reference :is(th, td):nth-last-child(2) {
  right: calc(5.5rem - 2px); box-shadow: -2px 0 0 #d0d0d7; }
#t-table1 th:nth-last-child(-n+2), #t-expert_reference th:nth-last-child(-n+2) { z-index: 2; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #e0e0e6; }
figcaption { font-size: 0.85rem; color: #444; }
footer { color: #777; font-size: 0.8rem; margin-top: 3rem; }
"""


def _table(s: Section) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in s.headers)
    body = []
    for i, row in enumerate(s.rows):
        cls = s.row_classes[i] if i < len(s.row_classes) else ""
        attr = f' class="{cls}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    if not s.rows:
        body.append(f'<tr><td colspan="{len(s.headers)}">no data</td></tr>')
    return (
        f'<div class="scroll"><table id="t-{s.key}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _figure(stem: str, caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode()
    return (
        f'<figure id="f-{stem}"><img alt="{escape(caption)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{escape(caption)}</figcaption></figure>'
    )


def render_html(
    doc: dict[str, Any], figures: dict[str, tuple[str, bytes]], viewer: str | None = None
) -> str:
    """The report page: a header, a table of contents, then each section with its figures.

    ``viewer`` is the relative address of an exported episode viewer (``vical view
    --export``), linked from the header when given.
    """
    sections = report_sections(doc)
    shown: set[str] = set()
    parts = []
    for s in sections:
        figs = []
        for f in s.figures:
            if f in figures:
                figs.append(_figure(f, *figures[f]))
                shown.add(f)
        parts.append(
            f'<section id="{s.key}"><h2>{escape(s.title)}</h2>'
            f'<p class="caption">{escape(s.caption)}</p>{_table(s)}{"".join(figs)}</section>'
        )
    rest = [f for f in figures if f not in shown]
    if rest:
        parts.append(
            '<section id="other-figures"><h2>Other figures</h2>'
            + "".join(_figure(f, *figures[f]) for f in rest)
            + "</section>"
        )
    runs = ", ".join(
        f"{escape(r.name)} ({escape(r.agent)}, {r.n_episodes} episodes)" for r in doc["runs"]
    )
    ref_line = "".join(
        f"<p>{escape(kind)}: {escape(ref.name)} ({ref.n_episodes} episodes)</p>"
        for kind, ref in (
            ("Random reference", doc["random"]),
            (EXPERT_LABEL + ", not a human baseline", doc.get("expert")),
        )
        if ref
    )
    nav = "".join(f'<a href="#{s.key}">{escape(s.title)}</a>' for s in sections)
    if viewer:
        ref_line += (
            f'<p>Episodes: <a id="viewer-link" href="{escape(viewer)}">every episode, '
            "frame by frame, in the viewer</a></p>"
        )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>V-ICAL report</title><style>{_CSS}</style></head><body>"
        f"<h1>V-ICAL report</h1><p>Runs: {runs}</p>{ref_line}<nav>{nav}</nav>"
        + "".join(parts)
        + f"<footer>vical {escape(__version__)} · generated {stamp} from result files only"
        "</footer></body></html>\n"
    )
