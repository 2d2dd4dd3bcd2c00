"""Request bodies: their digest, their bytes on the wire, and a per-episode cache.

A request body is the provider payload for the whole conversation so far,
re-sent every turn. Rendering, serialising and hashing it from scratch makes
each turn cost more than the one before; :class:`ConversationCache` does
that work once per message instead and produces exactly what the from-scratch
path produces:

* the payload itself, equal to ``render_payload`` of the same messages;
* its digest, equal to :func:`payload_sha256` (sha256 of the canonical JSON:
  keys sorted, compact separators, UTF-8, ``bytes`` as base64), computed by
  feeding each message's canonical JSON once into a running sha256 whose
  state is kept after every message;
* for a backend that sends JSON itself, the body bytes, equal to
  :func:`compact_json` of the payload (what the ``openai`` SDK sends:
  compact separators, UTF-8, no NaN), joined from each message's bytes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vical.agent.messages import Message


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, bytes):
        return {"$bytes_b64": base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON of ``obj`` that request digests are taken over."""
    text = json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode()


def payload_sha256(payload: Mapping[str, Any]) -> str:
    """sha256 of a request body in canonical JSON (bytes as base64)."""
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def compact_json(obj: Any) -> bytes:
    """``obj`` as the ``openai`` SDK serialises a request body: compact, UTF-8, no NaN."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(frozen=True)
class PreparedRequest:
    """One request ready to send: the payload, its digest and, for a backend
    that serialises the body itself, the exact bytes to send."""

    payload: dict[str, Any]
    sha256: str
    body: bytes | None = None


@dataclass
class _Entry:
    message: Message  # the conversation's own object: reuse is decided by identity
    item: dict[str, Any]  # the message as the provider renders it
    state: Any  # sha256 of the canonical body up to and including this item
    wire: bytes | None = None  # compact JSON of the item, made on first use


class ConversationCache:
    """One episode's request bodies, each message rendered, serialised and hashed once.

    ``render(message)`` gives a message's item; ``assemble(items, settings)``
    gives the payload with that very list under ``field``. The conversation
    only grows, so the messages of a request that are the same objects, in
    the same places, as in the previous request reuse its work; from the
    first one that differs on, everything is redone. A message must not be
    changed in place once it has been in a request (the protocol never does:
    it only appends new ones). When the payload does
    not hold the items list itself under ``field`` (options replaced it), the
    request is rendered, hashed and serialised whole.
    """

    def __init__(
        self,
        render: Callable[[Message], dict[str, Any]],
        assemble: Callable[[list[dict[str, Any]], Mapping[str, Any]], dict[str, Any]],
        field: str,
    ):
        self._render = render
        self._assemble = assemble
        self._field = field
        self._entries: list[_Entry] = []
        self._prefix: bytes | None = None
        self._base: Any = None

    def prepare(
        self, messages: list[Message], settings: Mapping[str, Any], *, body: bool
    ) -> PreparedRequest:
        """The request for ``messages``; ``body``: also make the bytes to send."""
        kept = 0
        for entry, message in zip(self._entries, messages, strict=False):
            if entry.message is not message:
                break
            kept += 1
        del self._entries[kept:]
        new = [(m, self._render(m)) for m in messages[kept:]]
        items = [e.item for e in self._entries] + [item for _, item in new]
        payload = self._assemble(items, settings)
        if payload.get(self._field) is not items:
            self._entries.clear()
            self._prefix = None
            wire = compact_json(payload) if body else None
            return PreparedRequest(payload, payload_sha256(payload), wire)
        prefix, suffix = self._frame(payload)
        if prefix != self._prefix:  # other options: every kept state is rehashed
            self._prefix = prefix
            self._base = hashlib.sha256(prefix)
            kept_items = [(e.message, e.item) for e in self._entries]
            self._entries.clear()
            new = kept_items + new
        for message, item in new:
            state = (self._entries[-1].state if self._entries else self._base).copy()
            if self._entries:
                state.update(b",")
            state.update(canonical_json(item))
            self._entries.append(_Entry(message, item, state))
        final = (self._entries[-1].state if self._entries else self._base).copy()
        final.update(suffix)
        return PreparedRequest(payload, final.hexdigest(), self._body(payload) if body else None)

    def _frame(self, payload: Mapping[str, Any]) -> tuple[bytes, bytes]:
        """The canonical JSON of ``payload`` before and after the items' own JSON."""
        pieces = {
            k: json.dumps(k, ensure_ascii=False).encode() + b":" + canonical_json(v)
            for k, v in payload.items()
            if k != self._field
        }
        keys = sorted(pieces)
        name = json.dumps(self._field, ensure_ascii=False).encode()
        prefix = b"{" + b"".join(pieces[k] + b"," for k in keys if k < self._field) + name + b":["
        suffix = b"]" + b"".join(b"," + pieces[k] for k in keys if k > self._field) + b"}"
        return prefix, suffix

    def _body(self, payload: Mapping[str, Any]) -> bytes:
        """:func:`compact_json` of ``payload``, the items joined from their own bytes."""
        for entry in self._entries:
            if entry.wire is None:
                entry.wire = compact_json(entry.item)
        # one join into one buffer: the items are most of the body, copied once
        chunks: list[bytes] = [b"{"]
        for k, v in payload.items():
            if len(chunks) > 1:
                chunks.append(b",")
            chunks.append(json.dumps(k, ensure_ascii=False).encode() + b":")
            if k != self._field:
                chunks.append(compact_json(v))
                continue
            chunks.append(b"[")
            for i, entry in enumerate(self._entries):
                if i:
                    chunks.append(b",")
                chunks.append(entry.wire or b"")
            chunks.append(b"]")
        chunks.append(b"}")
        return b"".join(chunks)
