"""A reply as it comes off the wire: the checks on its body, and what is kept of it.

A backend reads the provider's HTTP reply into a :class:`Reply`. Before that,
:func:`check_json_body` makes sure a status-200 body really is a reply of the
provider's API — a JSON object holding the provider's field (``choices``,
``output``, ``candidates``) — and otherwise raises the retryable
:func:`~vical.agent.failures.malformed_reply`, worded with
:func:`describe_body`. An empty, non-UTF-8, non-JSON or ``null`` body is never
taken for the model's answer.

Size cap: a reply's text, and separately its visible reasoning, longer than
:data:`MAX_REPLY_CHARS` characters is cut to that length as soon as it arrives
(:func:`keep_reply`) — before it is parsed, logged or appended to the history —
so the log, the conversation sent back to the model and a re-rendering by
:mod:`vical.agent.replay` all hold the same capped text; the response record
keeps the original length (``text_truncated_from``,
``reasoning_truncated_from``). Every string a server can influence (reply text,
reasoning, model name, finish reason) passes through
:func:`vical.agent.redact.redact_text` on the way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from vical.agent.failures import malformed_reply
from vical.agent.redact import redact_text

# Longest reply text (and, separately, visible reasoning) kept, in characters. A
# longer one is cut to this length before it is parsed, logged or put back into
# the conversation; the response record keeps the original length.
MAX_REPLY_CHARS = 65536


@dataclass
class Reply:
    """One successful reply: final answer text, visible reasoning, token usage."""

    text: str
    reasoning: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str | None = None


def describe_body(content: bytes | None, content_type: str | None) -> str:
    """A short description of a reply body for an error message."""
    data = content or b""
    ctype = (content_type or "no content type").split(";")[0].strip()
    if not data:
        return f"an empty body ({ctype})"
    try:
        text = data[:120].decode("utf-8")
    except UnicodeDecodeError:
        return f"{len(data)} bytes of {ctype} that are not UTF-8 text"
    excerpt = " ".join(text.split())[:60]
    return f"{len(data)} bytes of {ctype} starting {excerpt!r}"


def check_json_body(content: bytes | None, content_type: str | None, needs: str) -> Any:
    """Raise :func:`~vical.agent.failures.malformed_reply` unless a reply body is a
    JSON object holding the field ``needs``; return the decoded object."""
    what = describe_body(content, content_type)
    try:
        obj = json.loads((content or b"").decode("utf-8"))
    except UnicodeDecodeError:
        raise malformed_reply(f"the body is not UTF-8 text ({what})") from None
    except ValueError:
        raise malformed_reply(f"the body is not JSON ({what})") from None
    if not isinstance(obj, dict):
        raise malformed_reply(f"the body is JSON {type(obj).__name__}, not an object ({what})")
    if obj.get(needs) is None:
        raise malformed_reply(f"the JSON object has no {needs!r} field ({what})")
    return obj


def cap_text(text: str | None, limit: int = MAX_REPLY_CHARS) -> tuple[str | None, int | None]:
    """(text cut to ``limit`` characters, original length if it was cut else None)."""
    if text is None or len(text) <= limit:
        return text, None
    return text[:limit], len(text)


def _redact_capped(text: str | None, secrets: tuple[str, ...]) -> tuple[str | None, int | None]:
    """(redacted text cut to MAX_REPLY_CHARS, its original length if it was cut)."""
    if text is None:
        return None, None
    longest = max((len(s) for s in secrets), default=0)
    # redact a little beyond the cap, so that no secret is cut in half at the edge
    head = redact_text(text[: MAX_REPLY_CHARS + longest + 256], secrets) or ""
    capped, _ = cap_text(head)
    return capped, (len(text) if len(text) > MAX_REPLY_CHARS else None)


def keep_reply(reply: Reply, secrets: tuple[str, ...]) -> tuple[Reply, dict[str, int]]:
    """The reply as the protocol keeps it — text and reasoning capped at
    :data:`MAX_REPLY_CHARS`, every server-made string redacted of ``secrets`` —
    and the notes for its response record (``text_truncated_from``,
    ``reasoning_truncated_from``, present only when a cut was made)."""
    text, text_from = _redact_capped(reply.text, secrets)
    reasoning, reasoning_from = _redact_capped(reply.reasoning, secrets)
    notes: dict[str, int] = {}
    if text_from is not None:
        notes["text_truncated_from"] = text_from
    if reasoning_from is not None:
        notes["reasoning_truncated_from"] = reasoning_from
    clean = Reply(
        text=text or "",
        reasoning=reasoning,
        usage=reply.usage,
        finish_reason=redact_text(reply.finish_reason, secrets),
        model=redact_text(reply.model, secrets),
    )
    return clean, notes
