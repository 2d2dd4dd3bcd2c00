"""Reports: Table-1 aggregation and the paper's analyses, computed from result files only.

``table`` aggregates Table 1; ``analyses`` holds one pure function per analysis
of the paper; ``usage`` sums the episodes' tokens and cost per run and per
environment; ``plots`` draws the figures; ``sections`` lays every table out
once for ``document`` (Markdown, JSON) and ``html`` (the self-contained page).
"""

from vical.report.document import build_document, write_document
from vical.report.table import RunReport, build_report, render_markdown

__all__ = ["RunReport", "build_document", "build_report", "render_markdown", "write_document"]
