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

Markers are found by a left-to-right scan whose work is linear in the reply's
length (:func:`find_markers`), not by a backtracking regular expression: a
model that degenerates into a megabyte of whitespace or of unclosed
``[Action:`` prefixes must not freeze its worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


_NON_SPACE = re.compile(r"\S")


def find_markers(text: str, work: list[int] | None = None) -> list[str]:
    """Every ``[Action:<name>]`` marker of ``text`` in order, as stripped names.

    A marker is ``[``, optional whitespace, ``action`` in any letter case,
    optional whitespace, ``:``, then the name up to the closing ``]`` on the
    same line (whitespace, newlines included, may separate the name from the
    ``]``). Markers do not overlap: the scan resumes after a marker's ``]``.

    The scan is linear in ``len(text)``: the next ``]`` and the next newline are
    found by pointers that only move forward, each whitespace run is skipped by
    at most one marker attempt, and the run after a newline is skipped once.
    ``work``, when given, receives the number of characters the scan passed
    over (a measure the tests hold to a small multiple of the length).
    """
    n = len(text)
    steps = 0
    markers: list[str] = []
    next_close = next_nl = -1  # positions of the next "]" and newline at or after the cursor
    after_nl: dict[int, int] = {}  # newline position -> first non-space after it (or n)

    def skip_space(i: int) -> int:
        nonlocal steps
        m = _NON_SPACE.search(text, i)
        j = m.start() if m else n
        steps += j - i + 1
        return j

    def next_at(ch: str, i: int, cached: int) -> int:
        nonlocal steps
        if cached >= i:
            return cached
        j = text.find(ch, i)
        j = n if j < 0 else j
        steps += j - i + 1
        return j

    pos = text.find("[")
    while 0 <= pos < n:
        steps += 1
        i = skip_space(pos + 1)
        if text[i : i + 6].lower() == "action":
            i = skip_space(i + 6)
            if i < n and text[i] == ":":
                start = skip_space(i + 1)
                next_close = next_at("]", start, next_close)
                next_nl = next_at("\n", start, next_nl)
                end = None
                if next_close < next_nl:
                    end = next_close
                elif next_nl < n:
                    if next_nl not in after_nl:
                        after_nl[next_nl] = skip_space(next_nl + 1)
                    j = after_nl[next_nl]
                    if j < n and text[j] == "]":
                        end = j
                if end is not None:
                    stop = min(end, next_nl)
                    name = text[start:stop].strip()
                    steps += stop - start + 1
                    markers.append(name)
                    pos = text.find("[", end + 1)
                    continue
        pos = text.find("[", pos + 1)
    if work is not None:
        work.append(steps)
    return markers


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
    markers = find_markers(text)
    conflicting = len(set(markers)) > 1
    first = next(line for line in text.splitlines() if line.strip())
    on_first = find_markers(first)
    if not on_first:
        if markers:
            return ParsedReply(
                None,
                NOT_FIRST_LINE,
                "an action marker appeared, but not on the first line",
                markers,
                conflicting,
            )
        return ParsedReply(None, MISSING, "no [Action:<name>] marker was found", markers)
    name = on_first[0]
    if not name:
        return ParsedReply(
            None, EMPTY_NAME, "the marker holds no action name", markers, conflicting
        )
    if name not in legal:
        return ParsedReply(
            None, ILLEGAL, f"{name!r} is not one of the legal actions", markers, conflicting, name
        )
    return ParsedReply(name, None, "", markers, conflicting, name)
