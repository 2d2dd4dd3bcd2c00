"""Every request of a protocol backend's log rebuilt rather than read.

For a backend that speaks the request protocol
(:class:`vical.agent.protocol.ProtocolAgent`), :class:`ProtocolCheck` follows the
log's records decision by decision for :func:`vical.submit.logcheck.check_log`: every
user message is rebuilt from this vical's task data, the run's declared condition
(rules text, whether demonstrations were shown, the backend's demonstration
transport) and the logged replies, with the protocol's own pure builders
(:func:`vical.agent.messages.first_message` and the others); the logged ``append``
of every request must equal the rebuilt messages exactly, and the request body
rendered from them with the backend's own renderer must have the logged
``request_sha256``. Each reply is parsed again: the parse, the retries and the
decision must be what the protocol makes of that reply. So a relabelled condition
(demonstrations claimed but never shown, or shown in a ``--no-demos`` run; basic
rules declared detailed or the reverse) fails unless every request of every episode
was forged to match.

The demonstrations a session lists must be the task data's own clips, rendered here
(:func:`canonical_demo_media`). In a coupled run, the imagined frames a request
showed are rebuilt from the logged replies of the world model (JPEG-encoded as the
protocol encodes a frame, :func:`vical.agent.messages.imagination_parts`), so a
request that showed other imagined frames fails like any other altered request.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vical.submit.kinds import AgentKind, protocol_backend
from vical.submit.verdict import VerifyError

if TYPE_CHECKING:
    from vical.submit.cursor import Cursor

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_MIME_EXT = {"image/jpeg": "jpg", "image/png": "png", "video/mp4": "mp4"}


def _int(v: Any) -> bool:
    return type(v) is int


def _media_part(part: Any, kinds: tuple[str, ...]) -> bool:
    return (
        isinstance(part, dict)
        and set(part) == {"type", "sha256", "mime"}
        and part["type"] in kinds
        and isinstance(part["sha256"], str)
        and bool(_HEX64.match(part["sha256"]))
        and part["mime"] in _MIME_EXT
    )


class _Media(dict[str, tuple[bytes, str]]):
    """An episode's media files by sha256, read when a request first names them."""

    def __init__(self, folder: Path, rel: str):
        super().__init__()
        self.folder = folder
        self.rel = rel

    def need(self, part: dict[str, Any]) -> None:
        sha, mime = part["sha256"], part["mime"]
        if sha in self:
            return
        p = self.folder / "media" / f"{sha}.{_MIME_EXT[mime]}"
        if not p.is_file():
            raise VerifyError("log", f"{self.rel}: a request shows media {sha[:12]}, not in media/")
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise VerifyError("log", f"{self.rel}: media/{p.name} does not match its sha256")
        self[sha] = (data, mime)


def imagined_part(jpeg_sha256: str) -> dict[str, Any]:
    """The JPEG part the protocol shows for an imagined frame (as for a live frame)."""
    return {"type": "image", "sha256": jpeg_sha256, "mime": "image/jpeg"}


class ProtocolCheck:
    """The request protocol of one episode, rebuilt decision by decision."""

    def __init__(self, cur: Cursor, task: Any, run: Any, folder: Path, log: str, kind: AgentKind):
        self.cur = cur
        self.task = task
        self.run = run
        self.log = log
        self.cls = protocol_backend(kind)
        self.media = _Media(folder, log)
        self.history: list[dict[str, Any]] = []
        self.logged = 0
        self.requests = 0
        self.settings: dict[str, Any] = {}
        self.demos: list[list[dict[str, Any]]] = []
        self.transport = "frames"
        self.jpeg_of: dict[str, str] = {}  # frame sha256 -> JPEG sha256 (one per frame)
        self.cache: Any = None

    # -- the session: the condition the run declares -----------------------------------
    def session(self, rec: dict[str, Any], settings: dict[str, Any]) -> None:
        from vical.agent.bodies import ConversationCache

        cur, run, task = self.cur, self.run, self.task
        if rec.get("backend") != run.agent or settings.get("backend", run.agent) != run.agent:
            raise cur.fail(rec, f"the session's backend is not the run's {run.agent!r}")
        if rec.get("task") != task.id:
            raise cur.fail(rec, "the session names another task")
        if rec.get("rules") != run.rules:
            raise cur.fail(
                rec,
                f"an agent session ran with {str(rec.get('rules'))[:20]} rules, the run declares {run.rules}",
            )
        self.transport = settings.get("demo_transport", self.cls.demo_transport)
        if self.transport not in ("frames", "video"):
            raise cur.fail(rec, "unknown demonstration transport")
        demos = rec.get("demos")
        clips = [c for c in task.variant.demos] if run.demos else []
        if not isinstance(demos, list) or len(demos) != len(clips):
            shown = len(demos) if isinstance(demos, list) else "no"
            raise cur.fail(
                rec,
                f"the session lists {shown} demonstration(s), the run's condition "
                f"(demos {'on' if run.demos else 'off'}) gives this task {len(clips)}",
            )
        for i, (d, clip) in enumerate(zip(demos, clips, strict=True), start=1):
            if not isinstance(d, dict) or d.get("clip_id") != _clip_id(clip):
                raise cur.fail(rec, f"demonstration {i} is not this task's clip {_clip_id(clip)!r}")
            if self.transport == "video":
                sha = d.get("mp4_sha256")
                parts = [{"type": "video", "sha256": sha, "mime": "video/mp4"}]
            else:
                shas = d.get("frames_jpeg_sha256")
                if not isinstance(shas, list) or not shas:
                    raise cur.fail(rec, f"demonstration {i} lists no frames")
                parts = [{"type": "image", "sha256": s, "mime": "image/jpeg"} for s in shas]
            for p in parts:
                if not _media_part(p, ("image", "video")):
                    raise cur.fail(rec, f"demonstration {i} names no media by sha256")
            if [p["sha256"] for p in parts] != canonical_demo_media(task, clip, self.transport):
                raise cur.fail(
                    rec,
                    f"demonstration {i}'s media are not the rendering of clip "
                    f"{_clip_id(clip)!r} (frames edited, added or left out)",
                )
            self.demos.append(parts)
        self.settings = settings
        media = self.media

        def render(m: dict[str, Any]) -> dict[str, Any]:
            return self.cls.render_message(m, media)

        self.cache = ConversationCache(render, self.cls.assemble, self.cls.conversation_field)

    # -- one decision -------------------------------------------------------------------
    def _frame(
        self, step: int, hashes: list[Any], jpegs: dict[int, str], logged: Any
    ) -> dict[str, Any]:
        """The frame part the logged message holds where the rebuilt one has a frame."""
        if not _media_part(logged, ("image",)) or logged["mime"] != "image/jpeg":
            raise VerifyError("log", f"{self.log}: the frame of step {step} is not a JPEG part")
        frame = hashes[step] if step < len(hashes) else None
        if not isinstance(frame, str):
            raise VerifyError(
                "log", f"{self.log}: a request shows step {step}, past the result's frames"
            )
        known = self.jpeg_of.setdefault(frame, logged["sha256"])
        if known != logged["sha256"]:
            raise VerifyError("log", f"{self.log}: one frame sent as two different JPEGs")
        jpegs.setdefault(step, logged["sha256"])
        return dict(logged)

    def _expect(
        self,
        step: int,
        turn: int,
        prev: str | None,
        hashes: list[Any],
        jpegs: dict[int, str],
        got: Any,
        rollouts: list[Any] | None = None,
    ) -> dict[str, Any]:
        """The rebuilt user message of a turn, its frame part taken from ``got`` and, in a
        coupled run, its imagined frames rebuilt from the logged ``rollouts``."""
        from vical.agent.messages import first_message, imagination_parts, next_message

        imagined = imagination_parts(
            [(r.action, [imagined_part(j) for j in r.jpeg_sha256]) for r in rollouts or []]
        )
        # where the frame sits in the rebuilt message: known from the builder's layout
        try:
            content = got[-1]["content"] if isinstance(got, list) and got else None
        except (KeyError, TypeError):
            content = None
        placeholder = {"type": "image", "sha256": "0" * 64, "mime": "image/jpeg"}
        if turn == 0:
            msg = first_message(
                self.task,
                self.task.action_names,
                self.task.max_steps,
                self.run.rules,
                self.demos,
                self.transport,
                placeholder,
                imagined,
            )
            at = len(msg["content"]) - 2
        else:
            assert prev is not None
            msg = next_message(prev, placeholder, imagined)
            at = 1
        logged = content[at] if isinstance(content, list) and len(content) > at else None
        if _media_part(logged, ("image",)):
            msg["content"][at] = self._frame(step, hashes, jpegs, logged)
        return msg

    def decision(
        self, step: int, hashes: list[Any], jpegs: dict[int, str], rollouts: list[Any] | None = None
    ) -> tuple[str | None, str | None]:
        from vical.agent.messages import reply_message, retry_message
        from vical.agent.parse import parse_reply

        cur = self.cur
        where = f"for the decision at step {step}"
        turn = 0 if not self.history else 1
        prev = None
        if turn:
            prev = self._prev_action
        max_format, max_transport = self._retry_limits()
        format_retries = transport_total = 0
        conflicts: list[Any] = []
        pending: dict[str, Any] | None = None
        action: str | None = None
        failure: str | None = None
        while True:
            attempt = 0
            while True:
                rec = self._request(step, attempt, where)
                append = rec.get("append")
                if attempt == 0:
                    if pending is None:
                        pending = self._expect(step, turn, prev, hashes, jpegs, append, rollouts)
                    digest = self._first_attempt(rec, append, pending)
                elif append != []:
                    raise cur.fail(rec, "a transport retry appends messages")
                if rec.get("request_sha256") != digest:
                    raise cur.fail(rec, "the logged request_sha256 is not the rebuilt request's")
                if cur.peek() == "api_error":
                    failure = self._api_error(attempt, max_transport, where)
                    if failure is not None:
                        transport_total += attempt
                        break
                    attempt += 1
                    continue
                resp, text = self._response(step, where)
                transport_total += attempt
                break
            if failure is not None:
                break
            parsed = parse_reply(text, self.task.action_names)
            if resp.get("parse") != parsed.as_record():
                raise cur.fail(resp, "the logged parse is not what the protocol makes of the reply")
            assert pending is not None and isinstance(text, str)
            self.history.append(pending)
            self.history.append(reply_message(text))
            if parsed.conflicting:
                conflicts.append(parsed.markers)
            if parsed.action is not None:
                action = parsed.action
                break
            if format_retries >= max_format:
                failure = "invalid_action"
                break
            format_retries += 1
            pending = retry_message(parsed, self.task.action_names)
        self._check_decision(
            step,
            {
                "step": step,
                "action": action,
                "failure": failure,
                "format_retries": format_retries,
                "transport_retries": transport_total,
                "conflicting_actions": conflicts,
            },
        )
        self._prev_action = action
        return action, failure

    def _retry_limits(self) -> tuple[Any, Any]:
        """The run's format and transport retry limits (whole numbers, or VerifyError)."""
        max_format = self.settings.get("format_retries", 3)
        max_transport = self.settings.get("transport_retries", 3)
        if not _int(max_format) or not _int(max_transport):
            raise VerifyError("log", f"{self.log}: retry settings are not whole numbers")
        return max_format, max_transport

    def _request(self, step: int, attempt: int, where: str) -> dict[str, Any]:
        """The next request record, which must be this decision's next attempt."""
        cur = self.cur
        rec = cur.take("request", where)
        self.requests += 1
        if (
            rec.get("step") != step
            or rec.get("request_index") != self.requests
            or rec.get("transport_attempt") != attempt
        ):
            raise cur.fail(
                rec, f"expected request {self.requests}, attempt {attempt}, of step {step}"
            )
        return rec

    def _first_attempt(self, rec: dict[str, Any], append: Any, pending: dict[str, Any]) -> Any:
        """Check a request's first attempt: it appends the messages not yet logged, then
        ``pending``; the sha256 of the request rebuilt from them."""
        cur = self.cur
        expected = [*self.history[self.logged :], pending]
        if append != expected:
            raise cur.fail(rec, _difference(append, expected, self.run))
        messages = [*self.history, pending]
        self.logged = len(messages)
        for msg in messages[len(self.history) :]:
            for part in msg["content"]:
                if "sha256" in part:
                    self.media.need(part)
        try:
            return self.cache.prepare(messages, self.settings, body=False).sha256
        except VerifyError:
            raise
        except Exception as e:  # settings a renderer refuses
            raise cur.fail(rec, f"the request cannot be rendered: {type(e).__name__}") from None

    def _api_error(self, attempt: int, max_transport: Any, where: str) -> str | None:
        """Read the api_error answering the current request: the decision's failure it
        ends in, or None when the protocol sends the request again."""
        from vical.agent.failures import CONTEXT_LENGTH, RETRYABLE

        err = self.cur.take("api_error", where)
        if err.get("request_index") != self.requests:
            raise self.cur.fail(err, "answers another request")
        ekind = err.get("kind")
        if ekind == CONTEXT_LENGTH:
            return "token_overflow"
        if ekind != RETRYABLE or attempt >= max_transport or "gave_up" in err:
            return "api_error"
        return None

    def _response(self, step: int, where: str) -> tuple[dict[str, Any], str]:
        """The response answering the current request, and its text."""
        resp = self.cur.take("response", where)
        if resp.get("request_index") != self.requests or resp.get("step") != step:
            raise self.cur.fail(resp, "answers another request")
        text = resp.get("text")
        if not isinstance(text, str):
            raise self.cur.fail(resp, "the reply text is not a string")
        return resp, text

    def _check_decision(self, step: int, expected: dict[str, Any]) -> None:
        """The decision record must say what the protocol decided from the replies."""
        dec = self.cur.take("decision", f"after the requests of step {step}")
        got = {k: dec.get(k) for k in expected}
        if got != expected:
            keys = [k for k in expected if got[k] != expected[k]]
            raise self.cur.fail(
                dec, f"is not what the protocol decides from the replies ({', '.join(keys)})"
            )

    _prev_action: str | None = None


_CANONICAL: dict[tuple[str, str, str], list[str]] = {}


def canonical_demo_media(task: Any, clip: Any, transport: str) -> list[str]:
    """The sha256 of each media part a backend shows for ``clip`` under ``transport``:
    the clip rendered from the task data here (through the demo cache), so the media a
    bundle carries are held to the canonical rendering, not only to their own hashes."""
    from vical.agent.media import sha256_hex
    from vical.demos import load_demo_clip

    key = (task.id, str(_clip_id(clip)), transport)
    if key not in _CANONICAL:
        video = load_demo_clip(task, clip)
        if transport == "video":
            _CANONICAL[key] = [sha256_hex(video.mp4)]
        else:
            _CANONICAL[key] = [sha256_hex(f) for f in video.frames_jpeg]
    return _CANONICAL[key]


def _clip_id(clip: Any) -> Any:
    return getattr(clip, "clip_id", getattr(clip, "id", clip))


def _difference(got: Any, expected: list[dict[str, Any]], run: Any) -> str:
    """One line on how a logged ``append`` differs from the rebuilt one."""
    if not isinstance(got, list):
        return "the request's messages are not a list"
    if len(got) != len(expected):
        return f"the request appends {len(got)} message(s), the protocol {len(expected)}"
    for g, e in zip(got, expected, strict=True):
        if g == e:
            continue
        gc = g.get("content") if isinstance(g, dict) else None
        ec = e["content"]
        if isinstance(gc, list):
            shown = sum(
                1 for p in gc if isinstance(p, dict) and p.get("type") in ("video", "image")
            )
            want = sum(1 for p in ec if p.get("type") in ("video", "image"))
            if shown != want:
                return (
                    f"the request shows {shown} media item(s) where the declared condition "
                    f"(demos {'on' if run.demos else 'off'}, {run.rules} rules) gives {want}"
                )
            gt = " ".join(str(p.get("text", "")) for p in gc if isinstance(p, dict))
            et = " ".join(str(p.get("text", "")) for p in ec)
            if gt != et:
                return (
                    "the request's text is not the protocol's under the declared condition "
                    f"({run.rules} rules, demos {'on' if run.demos else 'off'})"
                )
        return "the request's messages are not the protocol's rebuilt ones"
    return "the request's messages are not the protocol's rebuilt ones"
