"""Re-render a logged episode into the exact sequence of requests it sent.

An episode folder holds ``log.jsonl`` and ``media/<sha256>.<ext>``. The
agent's ``agent_session`` record names the backend and its settings; every
``request`` record lists the messages appended since the previous request
(media by sha256) and the sha256 of the body that went out. Folding the
appended messages and rendering them with the backend's own pure renderer
gives back each request body; its digest is checked against the logged one,
so a mismatch (an edited log, a missing or altered media file, a renderer
that changed since the run) is reported, never silently replayed.

``python -m vical.agent.replay EPISODE_DIR`` prints the requests as JSON
lines, with media replaced by their sha256 unless ``--inline-media``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vical.agent.base import _MODULES, _REGISTRY
from vical.agent.bodies import payload_sha256
from vical.agent.messages import Message
from vical.agent.protocol import ProtocolAgent


class ReplayError(ValueError):
    """A log cannot be re-rendered into the requests it records."""


@dataclass(frozen=True)
class ReplayedRequest:
    """One re-rendered request."""

    request_index: int
    step: int
    transport_attempt: int
    payload: dict[str, Any]
    sha256: str


def _backend_class(name: str) -> type[ProtocolAgent]:
    if name not in _REGISTRY:
        module = _MODULES.get(name)
        if module is None:
            raise ReplayError(f"the log names backend {name!r}, which is not registered")
        importlib.import_module(module)
    cls = _REGISTRY[name]
    if not (isinstance(cls, type) and issubclass(cls, ProtocolAgent)):
        raise ReplayError(f"backend {name!r} does not speak the request protocol")
    return cls


def load_media(media_dir: Path, sha: str, mime: str) -> tuple[bytes, str]:
    """(bytes, MIME type) of the media file named by its sha256 in an episode's
    ``media/`` folder; :class:`ReplayError` when it is missing or does not match."""
    hits = sorted(media_dir.glob(f"{sha}.*"))
    if not hits:
        raise ReplayError(f"media {sha} is missing from {media_dir}")
    data = hits[0].read_bytes()
    if hashlib.sha256(data).hexdigest() != sha:
        raise ReplayError(f"media file {hits[0]} does not match its sha256")
    return data, mime


def iter_requests(episode_dir: str | Path, verify: bool = True) -> Iterator[ReplayedRequest]:
    """Yield the requests of an episode in the order they were sent."""
    episode_dir = Path(episode_dir)
    log = episode_dir / "log.jsonl"
    media_dir = episode_dir / "media"
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    session = next((r for r in records if r.get("type") == "agent_session"), None)
    if session is None:
        raise ReplayError(f"{log}: no agent_session record (was this a model backend run?)")
    cls = _backend_class(session["backend"])
    settings = session["settings"]
    messages: list[Message] = []
    media: dict[str, tuple[bytes, str]] = {}
    for rec in records:
        if rec.get("type") != "request":
            continue
        for msg in rec["append"]:
            for part in msg["content"]:
                sha = part.get("sha256")
                if sha and sha not in media:
                    media[sha] = load_media(media_dir, sha, part["mime"])
            messages.append(msg)
        payload = cls.render_payload(messages, media, settings)
        digest = payload_sha256(payload)
        if verify and digest != rec["request_sha256"]:
            raise ReplayError(
                f"{log}: request {rec['request_index']} re-renders to sha256 {digest}, "
                f"but the log records {rec['request_sha256']}"
            )
        yield ReplayedRequest(
            request_index=rec["request_index"],
            step=rec["step"],
            transport_attempt=rec["transport_attempt"],
            payload=payload,
            sha256=digest,
        )


def replay_requests(episode_dir: str | Path, verify: bool = True) -> list[dict[str, Any]]:
    """The request bodies of an episode, in order (retries and resends included)."""
    return [r.payload for r in iter_requests(episode_dir, verify)]


def _printable(obj: Any, inline: bool) -> Any:
    if isinstance(obj, bytes):
        if inline:
            return base64.b64encode(obj).decode("ascii")
        return f"<{len(obj)} bytes sha256:{hashlib.sha256(obj).hexdigest()}>"
    if isinstance(obj, str) and obj.startswith("data:") and ";base64," in obj and not inline:
        head, b64 = obj.split(",", 1)
        data = base64.b64decode(b64)
        return f"{head},<{len(data)} bytes sha256:{hashlib.sha256(data).hexdigest()}>"
    if isinstance(obj, dict):
        return {k: _printable(v, inline) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_printable(v, inline) for v in obj]
    return obj


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m vical.agent.replay", description=__doc__)
    ap.add_argument("episode_dir")
    ap.add_argument("--inline-media", action="store_true", help="print media as base64")
    args = ap.parse_args(argv)
    try:
        for r in iter_requests(args.episode_dir):
            line = {
                "request_index": r.request_index,
                "step": r.step,
                "transport_attempt": r.transport_attempt,
                "sha256": r.sha256,
                "payload": _printable(r.payload, args.inline_media),
            }
            print(json.dumps(line))
    except ReplayError as e:
        sys.exit(f"replay: {e}")


if __name__ == "__main__":
    main()
