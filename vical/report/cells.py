"""What every section of the report is made of: :class:`Section` (a table as text,
for Markdown and HTML alike) and the formatters of its cells ("–" where a value is
missing)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Section:
    """One table of the report: its anchor ``key``, title, caption, column headers and
    rows of text, the figures (file stems) shown after it, and a CSS class per row."""

    key: str
    title: str
    caption: str
    headers: list[str]
    rows: list[list[str]]
    figures: list[str] = field(default_factory=list)
    row_classes: list[str] = field(default_factory=list)


def num(x: float | None, d: int = 1) -> str:
    """``x`` with ``d`` decimals."""
    return "–" if x is None else f"{x:.{d}f}"


def pct(x: float | None, d: int = 1) -> str:
    """A fraction as a percentage with ``d`` decimals."""
    return "–" if x is None else f"{100 * x:.{d}f}%"


def signed(x: float | None, d: int = 3) -> str:
    """``x`` with its sign and ``d`` decimals."""
    return "–" if x is None else f"{x:+.{d}f}"


def p_value(x: float | None) -> str:
    """A p-value: two significant digits below 0.001, else three decimals."""
    if x is None:
        return "–"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def tokens(x: float | None) -> str:
    """A token count, in millions from 100,000 up."""
    if x is None:
        return "–"
    return f"{x / 1e6:.3f}M tokens" if x >= 1e5 else f"{x:,.0f} tokens"
