"""Reading an action out of a model's reply.

The answer contract: the first non-empty line of the answer *is* the marker
``[Action:<name>]`` — nothing else of substance on that line — and
``<name>`` equals one of the task's legal action names exactly (case and
spelling). Anything after the first line is free reasoning. Requiring the
marker alone on the first line means that an action name merely mentioned in
the reasoning, or in a sentence such as ``I would never pick
[Action:North]``, is never executed by accident.

Tolerated on the marker line, because they do not change which action was
meant: whitespace around the line, around the colon and around the name; the
keyword in any letter case (``[action: Up]``); markdown decoration around the
marker (``**[Action:Up]**``, ``` `[Action:Up]` ```, ``> [Action:Up]``,
``# [Action:Up]``); and trailing punctuation (``[Action:Up].``).

Rejected, each with its own error code (:data:`MISSING`,
:data:`NOT_FIRST_LINE`, :data:`NOT_ALONE`, :data:`EMPTY`,
:data:`EMPTY_NAME`, :data:`ILLEGAL`): no marker at all; a marker only on a
later line; a first line holding a marker *and* other words
(``[Action:Up] because ...`` or ``I pick [Action:Up]``); an empty reply; an
empty name; a name outside the legal list.

Reasoning in the answer text: a leading ``<think>…</think>`` block, which
some self-hosted models emit, is split off as visible reasoning before
parsing (:func:`split_think`). A reply that opens ``<think>`` and never
closes it is reasoning from end to end: it holds no answer, and a marker
inside it is not executed (:func:`parse_reply` reports :data:`MISSING`).

Markers are found by a left-to-right scan whose work is linear in the reply's
length (:func:`find_markers`), not by a backtracking regular expression: a
model that degenerates into a megabyte of whitespace or of unclosed
``[Action:`` prefixes must not freeze its worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"

# parse error codes
MISSING = "missing_marker"  # no marker anywhere (or only inside unclosed reasoning)
NOT_FIRST_LINE = "marker_not_on_first_line"
NOT_ALONE = "marker_not_alone"  # the first line holds a marker and other words
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

    def as_record(self) -> dict[str, Any]:
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
    """Split a leading ``<think>`` block off a reply: (answer, reasoning).

    ``<think>R</think>A`` gives ``(A, R)`` (the tags in any letter case,
    whitespace before ``<think>`` allowed). A ``<think>`` that is never closed
    makes the whole rest of the reply reasoning: ``("", R)``. A reply that does
    not open with ``<think>`` is all answer: ``(text, None)``. Linear time.
    """
    i = len(text) - len(text.lstrip())
    if text[i : i + len(_THINK_OPEN)].lower() != _THINK_OPEN:
        return text, None
    body = i + len(_THINK_OPEN)
    end = text.lower().find(_THINK_CLOSE, body)
    if end < 0:
        return "", text[body:].strip()
    return text[end + len(_THINK_CLOSE) :], text[body:end].strip()


# decoration tolerated around a marker on its line: markdown emphasis, code, quote,
# heading and list marks before it; the same and sentence punctuation after it
_LEAD_DECOR = " \t*_`~>#-"
_TRAIL_DECOR = " \t*_`~.,;:!"


def _marker_alone(line: str) -> bool:
    """True when ``line`` is one marker and nothing else but tolerated decoration."""
    core = line.strip(_LEAD_DECOR).rstrip(_TRAIL_DECOR)
    return (
        core.startswith("[")
        and core.endswith("]")
        and core.count("[") == 1
        and core.count("]") == 1
        and len(find_markers(core)) == 1
    )


def parse_reply(text: str | None, legal: list[str]) -> ParsedReply:
    """Parse a whole reply: split off leading reasoning, then :func:`parse_action`.

    A reply that is only reasoning (an unclosed ``<think>``, or a closed one with
    nothing after it) has no answer: :data:`MISSING`.
    """
    if text is None or not text.strip():
        return ParsedReply(None, EMPTY, "the reply was empty")
    answer, reasoning = split_think(text)
    if reasoning is not None and not answer.strip():
        return ParsedReply(
            None,
            MISSING,
            "the reply was all reasoning (a <think> block with no answer after it)",
        )
    return parse_action(answer, legal)


def parse_action(text: str | None, legal: list[str]) -> ParsedReply:
    """Parse an answer (reasoning already split off) against the legal action
    names (exact match), under the contract in the module docstring."""
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
    if not _marker_alone(first):
        return ParsedReply(
            None,
            NOT_ALONE,
            "the first line held other words besides the [Action:<name>] marker",
            markers,
            conflicting,
            on_first[0],
        )
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
