"""Reading an action out of a model's reply.

The answer contract: the first non-empty line carries ``[Action:<name>]`` and
``<name>`` must equal one of the task's legal action names exactly (case and
spelling). Anything after the first line is free reasoning. Requiring the
marker on the first line means an action name that merely appears in the
reasoning is never executed by accident.

Tolerated, because they do not change which action was meant: spaces around
the colon and the name, the keyword in any letter case (``[action: Up]``),
and markdown decoration around the marker on its line (``**[Action:Up]**``).
A leading ``<think>…</think>`` block, which some self-hosted models emit in
the answer text, is split off as visible reasoning before parsing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MARKER_RE = re.compile(r"\[\s*action\s*:\s*([^\]\n]*?)\s*\]", re.IGNORECASE)
_THINK_RE = re.compile(r"^\s*<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)

# parse error codes
MISSING = "missing_marker"  # no marker anywhere
NOT_FIRST_LINE = "marker_not_on_first_line"
EMPTY = "empty_reply"
EMPTY_NAME = "empty_action_name"
ILLEGAL = "illegal_action"


@dataclass(frozen=True)
class ParsedReply:
    """The outcome of parsing one reply.

    ``action`` is the legal action to execute, or None with ``error`` set.
    ``markers`` lists every bracketed action name found anywhere in the reply,
    in order; ``conflicting`` is true when they name more than one distinct action.
    """

    action: str | None
    error: str | None = None
    detail: str = ""
    markers: list[str] = field(default_factory=list)
    conflicting: bool = False
    name: str | None = None  # the name in the first-line marker, legal or not

    def as_record(self) -> dict:
        return {
            "action": self.action,
            "error": self.error,
            "detail": self.detail,
            "markers": self.markers,
            "conflicting": self.conflicting,
            "name": self.name,
        }


def split_think(text: str) -> tuple[str, str | None]:
    """Split a leading ``<think>…</think>`` block off a reply: (answer, reasoning)."""
    m = _THINK_RE.match(text)
    if not m:
        return text, None
    return text[m.end() :], m.group(1).strip()


def parse_action(text: str | None, legal: list[str]) -> ParsedReply:
    """Parse a reply against the legal action names (exact match)."""
    if text is None or not text.strip():
        return ParsedReply(None, EMPTY, "the reply was empty")
    markers = [m.group(1) for m in MARKER_RE.finditer(text)]
    conflicting = len(set(markers)) > 1
    first = next(line for line in text.splitlines() if line.strip())
    m = MARKER_RE.search(first)
    if m is None:
        if markers:
            return ParsedReply(
                None,
                NOT_FIRST_LINE,
                "an action marker appeared, but not on the first line",
                markers,
                conflicting,
            )
        return ParsedReply(None, MISSING, "no [Action:<name>] marker was found", markers)
    name = m.group(1)
    if not name:
        return ParsedReply(
            None, EMPTY_NAME, "the marker holds no action name", markers, conflicting
        )
    if name not in legal:
        return ParsedReply(
            None, ILLEGAL, f"{name!r} is not one of the legal actions", markers, conflicting, name
        )
    return ParsedReply(name, None, "", markers, conflicting, name)
