"""Reports: Table-1 aggregation and the paper's analyses, computed from result files only."""

from vical.report.table import RunReport, build_report, render_markdown

__all__ = ["RunReport", "build_report", "render_markdown"]
