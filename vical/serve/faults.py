"""The fault kinds the server can inject, and what each does to a reply.

See :mod:`vical.serve` for the kinds, the ``fault-<kind>[-<when>]`` model
names and the server-wide fault rate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

FAULT_KINDS = (
    "400",
    "429",
    "500",
    "context-length",
    "malformed",
    "illegal",
    "conflict",
    "empty",
    "slow",
    "hang",
    "not-json",
    "html",
    "binary",
    "null",
    "schemaless",
    "empty-body",
    "401-echo",
    "huge",
)
_FAULT_RE = re.compile(
    "^fault-("
    + "|".join(re.escape(k) for k in sorted(FAULT_KINDS, key=len, reverse=True))
    + r")(?:-(once|always|after-\d+|\d+))?$"
)


def is_fault_model(model: str) -> bool:
    """Whether ``model`` names a fault (``fault-<kind>[-<when>]``)."""
    return _FAULT_RE.match(model) is not None


HANG_LIMIT = 3600.0  # seconds a "hang" fault holds a request when the server is not stopped
HUGE_CHARS = 5 * 1024 * 1024  # characters of filler in a "huge" reply


def check_fault_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """The fault kinds as a tuple; ValueError naming any unknown kind and the known ones."""
    found = tuple(kinds)
    bad = [k for k in found if k not in FAULT_KINDS]
    if bad:
        raise ValueError(
            f"unknown fault kind{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}; "
            f"known kinds: {', '.join(FAULT_KINDS)}"
        )
    return found


def parse_fault_kinds(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of fault kinds (see :func:`check_fault_kinds`)."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if not kinds:
        raise ValueError(f"no fault kind given; known kinds: {', '.join(FAULT_KINDS)}")
    return check_fault_kinds(kinds)


@dataclass
class Fault:
    kind: str
    arg: int | None = None  # slow: milliseconds


def model_fault(model: str, n_assistant: int, n_before: int) -> Fault | None:
    """The fault a ``fault-<kind>[-<when>]`` model name asks for on this request, if any.

    ``n_assistant``: earlier replies in the conversation; ``n_before``: requests
    under this model name before this one.
    """
    m = _FAULT_RE.match(model)
    if not m:
        return None
    kind, when = m.group(1), m.group(2)
    if kind == "slow":
        return Fault("slow", int(when) if when and when.isdigit() else 500)
    if when is None or when == "always":
        active = True
    elif when == "once":
        active = n_before < 1
    elif when.startswith("after-"):
        active = n_assistant >= int(when[len("after-") :])
    else:
        active = n_before < int(when)
    return Fault(kind) if active else None


def faulty_answer(
    kind: str | None, action: str, legal: list[str], seen: str
) -> tuple[str, str] | None:
    """(text, visible reasoning) of a reply spoilt by fault ``kind``; None for a sound reply.

    ``action`` is the policy's legal choice, ``seen`` the reasoning line it would carry.
    """
    if kind == "malformed":
        return f"I would probably go with {action} here.", seen
    if kind == "illegal":
        return "[Action:Teleport]\nThat is my choice.", seen
    if kind == "empty":
        return "", seen
    if kind == "huge":
        filler = "All work and no play makes a long reply. "
        bulk = filler * (HUGE_CHARS // len(filler) + 1)
        return f"[Action:{action}]\n{bulk[:HUGE_CHARS]}", f"{seen}\n{bulk[:HUGE_CHARS]}"
    if kind == "conflict":
        other = next((a for a in legal if a != action), action)
        return f"[Action:{action}]\nOn second thought, [Action:{other}] could also work.", seen
    return None


# status-200 bodies that no provider would send (content type, bytes)
BROKEN_BODIES: dict[str, tuple[str, bytes]] = {
    "not-json": ("text/plain", b"OK"),
    "html": (
        "text/html; charset=utf-8",
        b"<!DOCTYPE html><html><head><title>Welcome</title></head>"
        b"<body><h1>It works!</h1><p>This is a web server, not a model.</p></body></html>",
    ),
    "binary": ("application/json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\xe0"),
    "null": ("application/json", b"null"),
    "schemaless": ("application/json", b"{}"),
    "empty-body": ("application/json", b""),
}
