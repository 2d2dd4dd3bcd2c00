"""The closed-loop protocol shared by every model backend (paper §3.1, App. 2.1).

One episode is one growing conversation of user and assistant messages; there
is no system message. The first user message carries the task introduction,
the demonstrations, the start frame and the answer contract; every later user
message carries the previous action and the new frame. Nothing is ever
dropped from the history, and reward numbers are never shown.

Each decision may take several requests:

* **format retries** — a reply whose first non-empty line is not exactly a
  legal ``[Action:<name>]`` marker (see :mod:`vical.agent.parse` for the
  contract) is kept in the history and followed by a retry message naming
  the legal actions; after ``format_retries`` (3) such retries the episode
  ends with ``invalid_action``. Only a well-formed reply of the provider's
  API counts as the model's answer, an empty one included;
* **transport retries** — a connection error, a timeout (no reply within
  ``request_timeout``, 120 s by default), HTTP 408/409/429 or 5xx, or a
  *malformed reply* (status 200 but a body that is empty, not UTF-8, not
  JSON, JSON ``null`` or an object without the provider's fields:
  ``choices``, ``output``, ``candidates``) resends the same request after an
  exponential backoff with jitter (at most ``retry_max_delay``, at least the
  server's ``Retry-After``), up to ``transport_retries`` (3) times; then
  ``api_error``. A ``Retry-After`` longer than ``max_retry_after`` (120 s)
  is not waited for: the decision ends with ``api_error`` at once and the
  ``api_error`` record says why (``gave_up``). A provider's context-length
  error ends the episode at once with ``token_overflow``; any other API
  error with ``api_error``. None of these failures escapes as an exception.

Size cap: a reply's text, and separately its visible reasoning, longer than
:data:`MAX_REPLY_CHARS` characters is cut to that length as soon as it
arrives — before it is parsed, logged or appended to the history — so the
log, the conversation sent back to the model and a re-rendering by
:mod:`vical.agent.replay` all hold the same capped text; the response record
keeps the original length (``text_truncated_from``,
``reasoning_truncated_from``).

Secrets: the API key and the credentials of the endpoint URL (userinfo,
``key=``-style query values) go only into the SDK client. ``settings()``
reports the endpoint through :func:`vical.agent.redact.redact_url`, and every
string a server can influence (error messages, reply text, reasoning, model
name, finish reason) passes through :func:`vical.agent.redact.redact_text`
with those credentials as secrets before it is recorded or kept.

Preflight: :meth:`ProtocolAgent.preflight` sends one tiny text-only request
(no images) with the run's own settings, retried once if retryable, and
raises :class:`PreflightError` with one line naming the endpoint (redacted),
the model, what failed (cannot connect, key refused, model or path not
found, malformed reply, timeout, other status) and what to check. Any
well-formed reply passes, whatever its text.

Beyond the game: :meth:`ProtocolAgent.ask` sends one user message of another
kind of conversation (an audit's questions) under the same transport rules,
and keeps it and its reply in the history only when the request succeeded.

Messages are kept in a provider-neutral form (:data:`Message`) whose media
parts reference bytes by sha256. A backend turns them into its provider's
request body (:meth:`ProtocolAgent.render_payload`, a pure function of the
messages, the media and the settings, so a logged run can be re-rendered by
:mod:`vical.agent.replay`; it is the backend's :meth:`~ProtocolAgent.assemble`
around each message's :meth:`~ProtocolAgent.render_message`) and sends it
through its SDK (:meth:`ProtocolAgent.send`). Within an episode the same body
is made without redoing earlier turns (:meth:`ProtocolAgent.prepare`, see
:mod:`vical.agent.bodies`): each message is rendered, serialised and hashed
once, each media item base64-encoded once (:class:`MediaStore`) and each
distinct live frame JPEG-encoded once, so a turn costs the same at turn 35 as
at turn 2; the payload, its digest and the bytes sent are those of the
whole-payload path.

Records returned in ``Decision.records`` (one JSON line each in log.jsonl):

``agent_session``  once, first: backend, settings (never the key), demo transport
``request``        every HTTP request: messages appended since the previous
                   request (media by sha256), the sha256 of the exact body
``response``       every reply: final text, visible reasoning, usage, latency,
                   finish reason, the parse outcome, any ``*_truncated_from``
``api_error``      every failed request: kind (retryable, context_length,
                   fatal), reason (http_status, connection, timeout,
                   malformed_reply), status, redacted message, Retry-After,
                   then ``wait_s`` or ``gave_up``
``decision``       the action (or failure), retries used, conflicting markers
"""

from __future__ import annotations

import base64
import hashlib
import io
import ipaddress
import json
import os
import random
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlparse

import numpy as np
import numpy.typing as npt
from PIL import Image

from vical.agent import prompts
from vical.agent.base import Agent, Decision, EpisodeContext, Observation
from vical.agent.bodies import ConversationCache, PreparedRequest
from vical.agent.bodies import payload_sha256 as payload_sha256  # re-exported
from vical.agent.parse import parse_reply, split_think
from vical.agent.redact import redact_text, redact_url, url_secrets
from vical.errors import AgentConfigError
from vical.outcomes import FailureMode

Part = dict[str, Any]  # {"type": "text", "text"} | {"type": "image"|"video", "sha256", "mime"}
Message = dict[str, Any]  # {"role": "user"|"assistant", "content": [Part, ...]}
Media = Mapping[str, tuple[bytes, str]]  # sha256 -> (bytes, mime)

JPEG_QUALITY = 90
LOCAL_DUMMY_KEY = "vical-local-no-key"
# Longest reply text (and, separately, visible reasoning) kept, in characters. A
# longer one is cut to this length before it is parsed, logged or put back into
# the conversation; the response record keeps the original length.
MAX_REPLY_CHARS = 65536
DEFAULT_REQUEST_TIMEOUT = 120.0  # seconds per HTTP request
DEFAULT_MAX_RETRY_AFTER = 120.0  # longest Retry-After the protocol waits for
PREFLIGHT_TEXT = "This is a connection check. Reply with the single word: ready"

# error kinds a backend reports through ApiFailure
RETRYABLE = "retryable"
CONTEXT_LENGTH = "context_length"
FATAL = "fatal"

# what went wrong, finer than the kind (ApiFailure.reason, "reason" in api_error records)
HTTP_STATUS = "http_status"  # the server answered with an error status
CONNECTION = "connection"  # no connection, or it broke before a reply
TIMEOUT = "timeout"  # no reply within request_timeout
MALFORMED_REPLY = "malformed_reply"  # status 200, but not a reply of the provider's API

_CONTEXT_PHRASES = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input token count",
    "exceeds the maximum number of tokens",
    "reduce the length of the messages",
    "input is too long",
)


class ApiKeyMissing(AgentConfigError, RuntimeError):
    """The environment variable that should hold the API key is not set."""


class PreflightError(AgentConfigError, RuntimeError):
    """The preflight request failed; the message is one line saying what to check."""


class ApiFailure(Exception):
    """A failed request, normalised across SDKs.

    ``kind`` decides what the protocol does (:data:`RETRYABLE`,
    :data:`CONTEXT_LENGTH`, :data:`FATAL`); ``reason`` says what happened
    (:data:`HTTP_STATUS`, :data:`CONNECTION`, :data:`TIMEOUT`,
    :data:`MALFORMED_REPLY`), defaulting to HTTP_STATUS when a status is given.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        status: int | None = None,
        retry_after: float | None = None,
        reason: str | None = None,
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.reason = reason or (HTTP_STATUS if status is not None else CONNECTION)


def malformed_reply(what: str) -> ApiFailure:
    """A status-200 reply that is not a reply of the provider's API: retryable,
    an infrastructure failure (a proxy, a captive portal, a broken server), never
    the model's answer."""
    return ApiFailure(RETRYABLE, f"malformed reply: {what}", reason=MALFORMED_REPLY)


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
    """Raise :func:`malformed_reply` unless a reply body is a JSON object holding
    the field ``needs``; return the decoded object."""
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


@dataclass
class Reply:
    """One successful reply: final answer text, visible reasoning, token usage."""

    text: str
    reasoning: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    finish_reason: str | None = None
    model: str | None = None


@dataclass
class Exchange:
    """What came of one message sent by :meth:`ProtocolAgent.ask`.

    ``reply`` is the reply as the protocol keeps it (capped and redacted), or
    None when the request failed, ``failure`` then saying how
    (``token_overflow`` or ``api_error``). ``records`` holds the ``request``,
    ``response`` and ``api_error`` records of every attempt, in the form an
    episode's log holds them; ``usage`` is the reply's token usage.
    """

    reply: Reply | None
    failure: FailureMode | None
    records: list[dict[str, Any]]
    usage: dict[str, int]


# --------------------------------------------------------------------------- helpers


def is_local_endpoint(url: str | None) -> bool:
    """True for a URL whose host is this machine (localhost, 127.0.0.0/8, ::1)."""
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(
    backend: str, api_key_env: str | None, default_env: str, endpoint: str | None
) -> str:
    """Read the API key from the environment.

    ``api_key_env`` names the variable (default ``default_env``). When no
    variable was named and the default one is unset, a keyless local server
    (an endpoint on localhost) gets a fixed dummy key; anywhere else a missing
    key is an error naming the variable.
    """
    name = api_key_env or default_env
    key = os.environ.get(name)
    if key:
        return key
    if api_key_env is None and is_local_endpoint(endpoint):
        return LOCAL_DUMMY_KEY
    raise ApiKeyMissing(
        f"backend {backend}: the API key environment variable {name} is not set. "
        f"Export {name}=<your key>, or name another variable with --api-key-env. "
        "(A server on localhost needs no key when --api-key-env is not given.)"
    )


def encode_jpeg(frame: npt.NDArray[np.uint8]) -> bytes:
    """Encode an RGB frame as JPEG bytes, deterministically."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame)).save(
        buf, format="JPEG", quality=JPEG_QUALITY, optimize=False
    )
    return buf.getvalue()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


class MediaStore(dict[str, tuple[bytes, str]]):
    """An episode's media by sha256, each item's base64 data URL made once."""

    def __init__(self) -> None:
        super().__init__()
        self._urls: dict[str, str] = {}

    def data_url(self, sha: str) -> str:
        url = self._urls.get(sha)
        if url is None:
            data, mime = self[sha]
            url = self._urls[sha] = data_url(data, mime)
        return url


def media_data_url(media: Media, sha: str) -> str:
    """The data URL of media item ``sha`` (from the store's memo for a :class:`MediaStore`)."""
    if isinstance(media, MediaStore):
        return media.data_url(sha)
    data, mime = media[sha]
    return data_url(data, mime)


def looks_like_context_error(message: str, code: str | None = None) -> bool:
    text = f"{code or ''} {message}".lower()
    return any(p in text for p in _CONTEXT_PHRASES)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(float(ra), 0.0)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(ra)
        except (TypeError, ValueError):
            return None
        return max(when.timestamp() - time.time(), 0.0)


def parse_extra_body(extra_body: Any) -> dict[str, Any] | None:
    """Accept extra body fields as a dict or a JSON object string."""
    if extra_body is None or extra_body == "":
        return None
    if isinstance(extra_body, str):
        try:
            extra_body = json.loads(extra_body)
        except json.JSONDecodeError as e:
            raise ValueError(f"--extra-body is not valid JSON: {e}") from None
    if not isinstance(extra_body, dict):
        raise ValueError("--extra-body must be a JSON object")
    return dict(extra_body)


def _secrets_for(api_key: str, endpoint: str | None) -> tuple[str, ...]:
    """What redaction must remove: the key, the endpoint's credentials, and the
    Basic-auth form of its userinfo (an HTTP client sends that header)."""
    found = [api_key, *url_secrets(endpoint)]
    if endpoint:
        parts = urlparse(endpoint)
        if parts.username is not None or parts.password is not None:
            pair = f"{parts.username or ''}:{parts.password or ''}"
            found.append(base64.b64encode(pair.encode()).decode("ascii"))
    return tuple(s for s in found if s and s != LOCAL_DUMMY_KEY)


# --------------------------------------------------------------------------- turns
# The user messages of an episode, as pure functions of the task, the condition, the
# media parts and the replies: the agent sends them, and `vical verify` rebuilds every
# request of a logged episode with the same functions (vical.submit.requests).


def first_message(
    task: Any,
    action_names: list[str],
    max_steps: int,
    rules: str,
    demos: list[list[Part]],
    demo_transport: str,
    frame: Part,
    imagined: list[Part] | None = None,
) -> Message:
    """The first user message: task introduction (with the ``rules`` text), the
    demonstrations (``demos``: each one's media parts, one video part or its
    frames as image parts under ``demo_transport`` ``frames``), the start
    frame's part and the answer contract. ``imagined`` (a coupled run's
    :func:`imagination_parts`) goes before the start frame, which stays the
    message's last image."""
    text = prompts.task_intro(task, action_names, max_steps, rules)
    parts: list[Part] = [{"type": "text", "text": text}]
    n = len(demos)
    if n:
        parts.append({"type": "text", "text": prompts.demos_intro(n)})
    for i, media in enumerate(demos, start=1):
        parts.append({"type": "text", "text": prompts.demo_heading(i, n)})
        if demo_transport == "video":
            parts.extend(media)
        else:
            parts.append({"type": "text", "text": prompts.demo_frames_intro(i, len(media))})
            parts.extend(media)
    parts.extend(imagined or [])
    parts.append({"type": "text", "text": prompts.start_frame_text()})
    parts.append(frame)
    parts.append({"type": "text", "text": prompts.answer_contract(action_names)})
    return {"role": "user", "content": parts}


def next_message(previous_action: str, frame: Part, imagined: list[Part] | None = None) -> Message:
    """A later turn's user message: the move applied, the new frame's part and, in a
    coupled run, the :func:`imagination_parts` after it."""
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": prompts.next_turn_text(previous_action)},
            frame,
            *(imagined or []),
            {"type": "text", "text": prompts.next_turn_reminder()},
        ],
    }


def imagination_parts(rollouts: list[tuple[str, list[Part]]]) -> list[Part]:
    """A coupled run's world-model rollouts as message parts: an introduction, then per
    candidate action a heading and the image part of each imagined frame (empty: none)."""
    if not rollouts:
        return []
    horizon = max(len(frames) for _, frames in rollouts)
    parts: list[Part] = [
        {"type": "text", "text": prompts.imagination_intro(len(rollouts), horizon)}
    ]
    for action, frames in rollouts:
        parts.append({"type": "text", "text": prompts.imagined_heading(action, len(frames))})
        parts.extend(frames)
    return parts


def retry_message(parsed: Any, action_names: list[str]) -> Message:
    """The user message after a reply that yielded no legal action."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": prompts.retry_text(parsed, action_names)}],
    }


def reply_message(text: str) -> Message:
    """A reply as the history keeps it."""
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


# --------------------------------------------------------------------------- agent


class ProtocolAgent(Agent):
    """The protocol over one provider API. Subclasses implement rendering and sending.

    Constructor keyword arguments (None means the provider's default):
    ``endpoint``, ``model``, ``api_key_env``, ``temperature``,
    ``max_output_tokens``, ``reasoning_effort``, ``extra_body`` (dict or
    JSON text, merged into every request body), ``seed`` (seeds the backoff
    jitter; it is not sent to the provider — put it in ``extra_body`` for
    that). Tuning, with defaults from the paper: ``format_retries=3``,
    ``transport_retries=3``, ``retry_base_delay=1.0`` seconds (first backoff;
    tests pass a tiny value), ``retry_max_delay=60.0`` (longest backoff),
    ``request_timeout=120.0`` seconds per HTTP request (None: the SDK's own
    default, 600 s for openai), ``max_retry_after=120.0`` seconds (a longer
    Retry-After ends the decision with ``api_error`` at once), ``rate_limit``
    (requests per second towards this endpoint, None: no limit).
    """

    default_key_env: ClassVar[str] = "OPENAI_API_KEY"
    default_endpoint: ClassVar[str | None] = None
    demo_transport: ClassVar[str] = "frames"  # "frames" (JPEG stills) or "video" (MP4)

    def __init__(  # noqa: PLR0913 (one keyword per option: built as get_agent(name, **agent_kwargs))
        self,
        *,
        endpoint: str | None = None,
        model: str | None = None,
        api_key_env: str | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: dict[str, Any] | str | None = None,
        seed: int | None = None,
        format_retries: int = 3,
        transport_retries: int = 3,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        rate_limit: float | None = None,
    ):
        if not model:
            raise ValueError(f"backend {self.name}: a model name is required (--model)")
        raw_endpoint = endpoint or self.default_endpoint
        # the endpoint as given goes only to the SDK client; everything else sees it redacted
        self._raw_endpoint = raw_endpoint
        self.endpoint = redact_url(raw_endpoint)
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.reasoning_effort = reasoning_effort
        self.extra_body = parse_extra_body(extra_body)
        self.seed = seed
        self.format_retries = int(format_retries)
        self.transport_retries = int(transport_retries)
        self.retry_base_delay = float(retry_base_delay)
        self.retry_max_delay = float(retry_max_delay)
        self.request_timeout = None if request_timeout is None else float(request_timeout)
        self.max_retry_after = float(max_retry_after)
        self.rate_limit = rate_limit
        self._limiter = None
        if rate_limit:
            from vical.agent.ratelimit import RateLimiter

            self._limiter = RateLimiter(self.endpoint or self.name, float(rate_limit))
        self.render_payload([], {}, self.settings())  # reject bad options before any request
        api_key = resolve_api_key(self.name, api_key_env, self.default_key_env, raw_endpoint)
        self._secrets = _secrets_for(api_key, raw_endpoint)  # only to redact, never recorded
        self._client = self.make_client(api_key)
        self._rng = random.Random(seed)
        self._ctx: EpisodeContext | None = None

    # -- what a backend provides ------------------------------------------------
    # what the preflight message calls the API ("an OpenAI chat completions server")
    api_label: ClassVar[str] = "an OpenAI-compatible"

    @abstractmethod
    def make_client(self, api_key: str) -> Any:
        """Build the SDK client (the only place the key is used). The endpoint as
        given, credentials included, is ``self._raw_endpoint``."""

    # the payload field that holds the conversation ("messages", "input", "contents")
    conversation_field: ClassVar[str] = "messages"
    # True: send_prepared sends the body bytes the protocol serialised (PreparedRequest.body);
    # False: the SDK serialises the payload itself
    sends_body: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def render_message(cls, message: Message, media: Media) -> dict[str, Any]:
        """One message as the provider's request body holds it. Pure: no SDK, no I/O."""

    @classmethod
    @abstractmethod
    def assemble(cls, items: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
        """The request body around the rendered messages ``items``, which it holds
        (that very list) under :attr:`conversation_field` unless an option replaces
        it. Pure: no SDK, no I/O."""

    @classmethod
    def render_payload(
        cls, messages: list[Message], media: Media, settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The provider request body for a conversation. Pure: no SDK, no I/O."""
        return cls.assemble([cls.render_message(m, media) for m in messages], settings)

    @abstractmethod
    def send(self, payload: dict[str, Any]) -> Reply:
        """Send one request through the SDK; raise :class:`ApiFailure` on failure."""

    def send_prepared(self, request: PreparedRequest) -> Reply:
        """Send a request of the episode (:meth:`send` of its payload unless the
        backend sends the prepared bytes itself)."""
        return self.send(request.payload)

    def prepare(self, messages: list[Message]) -> PreparedRequest:
        """The request for ``messages`` in this episode: the payload
        :meth:`render_payload` gives, its :func:`payload_sha256` and, when the
        backend :attr:`sends_body`, the bytes to send; each message is rendered,
        serialised and hashed once per episode (:class:`ConversationCache`)."""
        return self._bodies.prepare(messages, self.settings(), body=self.sends_body)

    # -- settings -----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "endpoint": self.endpoint,
            "model": self.model,
            "api_key_env": self.api_key_env or self.default_key_env,
            "temperature": self.temperature,
            "max_output_tokens": self.max_output_tokens,
            "reasoning_effort": self.reasoning_effort,
            "extra_body": self.extra_body,
            "seed": self.seed,
            "format_retries": self.format_retries,
            "transport_retries": self.transport_retries,
            "retry_base_delay": self.retry_base_delay,
            "retry_max_delay": self.retry_max_delay,
            "request_timeout": self.request_timeout,
            "max_retry_after": self.max_retry_after,
            "rate_limit": self.rate_limit,
            "demo_transport": self.demo_transport,
        }

    # -- episode ------------------------------------------------------------------
    def start(self, ctx: EpisodeContext) -> None:
        self._ctx = ctx
        self._rng = random.Random(ctx.seed if self.seed is None else self.seed)
        self._history: list[Message] = []
        self._logged = 0  # messages already covered by a request record
        self._media = MediaStore()
        self._bodies = ConversationCache(
            lambda m: self.render_message(m, self._media), self.assemble, self.conversation_field
        )
        self._frame_parts: dict[str, Part] = {}  # raw frame sha256 -> its JPEG part
        self._emitted: set[str] = set()
        self._requests = 0
        self._turn = 0

    def act(self, obs: Observation) -> Decision:
        if self._ctx is None:
            raise RuntimeError("call start() before act()")
        ctx = self._ctx
        records: list[dict[str, Any]] = []
        usage: dict[str, int] = {}
        if self._turn == 0:
            records.append(
                {
                    "type": "agent_session",
                    "backend": self.name,
                    "settings": self.settings(),
                    "task": ctx.task.id,
                    "rules": ctx.rules,
                    "demos": [self._demo_summary(d) for d in ctx.demos],
                }
            )
            pending = [self._first_message(ctx, obs)]
        else:
            if obs.previous_action is None:
                raise RuntimeError("a later turn needs the previous action")
            pending = [self._next_message(obs)]
        self._turn += 1

        format_retries = 0
        transport_total = 0
        conflicts: list[list[str]] = []
        while True:
            reply, failure, used = self._request(pending, obs.step, records, usage)
            transport_total += used
            if failure is not None:
                return self._decide(
                    obs, records, usage, None, failure, format_retries, transport_total, conflicts
                )
            assert reply is not None
            self._history.extend(pending)
            self._history.append(
                {"role": "assistant", "content": [{"type": "text", "text": reply.text}]}
            )
            parsed = parse_reply(reply.text, ctx.action_names)
            records[-1]["parse"] = parsed.as_record()
            if parsed.conflicting:
                conflicts.append(parsed.markers)
            if parsed.action is not None:
                return self._decide(
                    obs,
                    records,
                    usage,
                    parsed.action,
                    None,
                    format_retries,
                    transport_total,
                    conflicts,
                )
            if format_retries >= self.format_retries:
                return self._decide(
                    obs,
                    records,
                    usage,
                    None,
                    FailureMode.INVALID_ACTION,
                    format_retries,
                    transport_total,
                    conflicts,
                )
            format_retries += 1
            pending = [retry_message(parsed, ctx.action_names)]

    # -- one message of a conversation that is not a game ------------------------------
    def ask(self, message: Message, media: Media | None = None) -> Exchange:
        """Send one user message after the conversation so far; what came of it.

        For a conversation about something other than a move (an audit asks
        its questions this way). ``message`` is a user message whose media parts
        name their bytes by sha256 in ``media`` (or in the media of an earlier
        ``ask`` since :meth:`start`). The request goes out exactly as a turn's
        does: transport retries, backoff, the Retry-After cap, failure
        classification, redaction and the size cap; the reply's text is not
        parsed, so there are no format retries. On success the message and the
        reply join the history and the next ``ask`` continues the conversation;
        on failure the history stays as it was. Records carry step 0.
        Call :meth:`start` first: it begins a new conversation.
        """
        if self._ctx is None:
            raise RuntimeError("call start() before ask()")
        if message.get("role") != "user":
            raise ValueError(f"ask() sends a user message, not a {message.get('role')!r} one")
        for sha, item in (media or {}).items():
            self._media.setdefault(sha, item)
        for part in message["content"]:
            sha = part.get("sha256")
            if sha is not None and sha not in self._media:
                raise ValueError(
                    f"the message names media {sha}, given neither in media= nor earlier in "
                    "this conversation; pass its (bytes, MIME type) in media="
                )
        records: list[dict[str, Any]] = []
        usage: dict[str, int] = {}
        reply, failure, _ = self._request([message], 0, records, usage)
        if reply is None:
            self._logged = len(self._history)  # the next request's record names its message
        else:
            self._history.append(message)
            self._history.append(
                {"role": "assistant", "content": [{"type": "text", "text": reply.text}]}
            )
        return Exchange(reply=reply, failure=failure, records=records, usage=usage)

    # -- one request with transport retries ------------------------------------------
    def _request(
        self,
        pending: list[Message],
        step: int,
        records: list[dict[str, Any]],
        usage: dict[str, int],
    ) -> tuple[Reply | None, FailureMode | None, int]:
        messages = [*self._history, *pending]
        request = self.prepare(messages)
        digest = request.sha256
        appended = messages[self._logged :]
        self._logged = len(messages)
        for attempt in range(self.transport_retries + 1):
            self._requests += 1
            records.append(
                {
                    "type": "request",
                    "step": step,
                    "request_index": self._requests,
                    "transport_attempt": attempt,
                    "append": appended if attempt == 0 else [],
                    "request_sha256": digest,
                }
            )
            if self._limiter is not None:
                waited = self._limiter.acquire()
                if waited:
                    records[-1]["rate_limit_wait_s"] = round(waited, 4)
            t0 = time.perf_counter()
            try:
                reply = self.send_prepared(request)
            except ApiFailure as e:
                latency = time.perf_counter() - t0
                rec: dict[str, Any] = {
                    "type": "api_error",
                    "step": step,
                    "request_index": self._requests,
                    "kind": e.kind,
                    "reason": e.reason,
                    "status": e.status,
                    "message": redact_text(e.message[:4000], self._secrets)[:2000],
                    "retry_after": e.retry_after,
                    "latency_s": round(latency, 4),
                }
                records.append(rec)
                if e.kind == CONTEXT_LENGTH:
                    return None, FailureMode.TOKEN_OVERFLOW, attempt
                if e.kind != RETRYABLE or attempt >= self.transport_retries:
                    return None, FailureMode.API_ERROR, attempt
                if e.retry_after is not None and e.retry_after > self.max_retry_after:
                    rec["gave_up"] = (
                        f"retry-after {e.retry_after:g} s exceeds the cap of "
                        f"{self.max_retry_after:g} s"
                    )
                    return None, FailureMode.API_ERROR, attempt
                wait = self._backoff(attempt, e.retry_after)
                rec["wait_s"] = round(wait, 4)
                time.sleep(wait)
                continue
            latency = time.perf_counter() - t0
            reply, cut = self._sanitize(reply)
            answer, think = split_think(reply.text)
            reasoning = "\n\n".join(r for r in (reply.reasoning, think) if r) or None
            for k, v in reply.usage.items():
                usage[k] = usage.get(k, 0) + int(v)
            records.append(
                {
                    "type": "response",
                    "step": step,
                    "request_index": self._requests,
                    "text": reply.text,
                    "answer": answer,
                    "reasoning": reasoning,
                    "usage": reply.usage,
                    "finish_reason": reply.finish_reason,
                    "model": reply.model,
                    "latency_s": round(latency, 4),
                    **cut,
                }
            )
            return reply, None, attempt
        raise AssertionError("unreachable")

    def _redact(self, text: str | None) -> str | None:
        """``text`` without the key, the endpoint's credentials or anything shaped like one."""
        return redact_text(text, self._secrets)

    def _redact_capped(self, text: str | None) -> tuple[str | None, dict[str, int]]:
        """(redacted text cut to MAX_REPLY_CHARS, {} or {"truncated_from": n})."""
        if text is None:
            return None, {}
        longest = max((len(s) for s in self._secrets), default=0)
        # redact a little beyond the cap, so that no secret is cut in half at the edge
        head = self._redact(text[: MAX_REPLY_CHARS + longest + 256]) or ""
        capped, _ = cap_text(head)
        if len(text) > MAX_REPLY_CHARS:
            return capped, {"truncated_from": len(text)}
        return capped, {}

    def _sanitize(self, reply: Reply) -> tuple[Reply, dict[str, int]]:
        """The reply as the protocol keeps it: text and reasoning capped at
        MAX_REPLY_CHARS and redacted; the record notes any original length."""
        text, t = self._redact_capped(reply.text)
        reasoning, r = self._redact_capped(reply.reasoning)
        notes: dict[str, int] = {}
        if t:
            notes["text_truncated_from"] = t["truncated_from"]
        if r:
            notes["reasoning_truncated_from"] = r["truncated_from"]
        clean = Reply(
            text=text or "",
            reasoning=reasoning,
            usage=reply.usage,
            finish_reason=self._redact(reply.finish_reason),
            model=self._redact(reply.model),
        )
        return clean, notes

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter, at most ``retry_max_delay``, and never
        shorter than the server's Retry-After (which the caller has already held to
        ``max_retry_after``)."""
        base = self.retry_base_delay * 2.0**attempt
        wait = min(self.retry_max_delay, base * (0.5 + self._rng.random()))
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait

    # -- preflight ---------------------------------------------------------------------
    def preflight(self) -> None:
        """One tiny text-only request to check endpoint, key and model before a run.

        The request is a single user message (:data:`PREFLIGHT_TEXT`) with the
        agent's own settings, sent through :meth:`send`; a retryable failure
        other than a timeout is retried once after a short wait. Any
        well-formed reply passes, whatever its text. On failure raises
        :class:`PreflightError` with one line naming the endpoint (redacted)
        and the model, what failed and what to check.
        """
        messages: list[Message] = [
            {"role": "user", "content": [{"type": "text", "text": PREFLIGHT_TEXT}]}
        ]
        payload = self.render_payload(messages, {}, self.settings())
        failure: ApiFailure | None = None
        for attempt in range(2):
            if self._limiter is not None:
                self._limiter.acquire()
            try:
                self.send(payload)
                return
            except ApiFailure as e:
                failure = e
            # a hung server rarely recovers within seconds: a timeout is not retried here
            if failure.kind != RETRYABLE or failure.reason == TIMEOUT or attempt == 1:
                break
            wait = min(2.0, self.retry_base_delay)
            if failure.retry_after is not None:
                if failure.retry_after > min(self.max_retry_after, 10.0):
                    break
                wait = max(wait, failure.retry_after)
            time.sleep(wait)
        assert failure is not None
        raise PreflightError(self._preflight_message(failure))

    def _preflight_message(self, e: ApiFailure) -> str:
        where = self.endpoint or "the provider's default endpoint"
        head = f"{where} (model {self.model!r})"
        said = " ".join((self._redact(e.message) or "").split())[:200]
        var = self.api_key_env or self.default_key_env
        status = e.status
        if e.reason == TIMEOUT:
            what = (
                f"no reply within {self.request_timeout:g} s"
                if self.request_timeout
                else "the request timed out"
            )
            advice = "the server may be hung or overloaded; check it, or raise --request-timeout"
        elif e.reason == CONNECTION:
            what = f"cannot connect ({said})"
            advice = "is the server running? check --endpoint"
        elif e.reason == MALFORMED_REPLY:
            what = f"the endpoint did not answer like {self.api_label} server ({said})"
            advice = "check that --endpoint points at the API itself and that --backend matches it"
        elif status in (401, 403):
            what = f"HTTP {status}: the key in ${var} was refused ({said})"
            advice = "check that key, or name another variable with --api-key-env"
        elif status == 404:
            what = f"HTTP 404: model or path not found ({said})"
            advice = "check --model and --endpoint"
        elif status == 429:
            what = f"HTTP 429: rate limited ({said})"
            advice = "wait and retry, or lower --rate-limit"
        else:
            what = f"HTTP {status}: {said}" if status is not None else said
            advice = "check the server's logs and the request options (--extra-body, --model)"
        return f"{head}: {what}; {advice}."

    def _decide(
        self,
        obs: Observation,
        records: list[dict[str, Any]],
        usage: dict[str, int],
        action: str | None,
        failure: FailureMode | None,
        format_retries: int,
        transport_retries: int,
        conflicts: list[list[str]],
    ) -> Decision:
        records.append(
            {
                "type": "decision",
                "step": obs.step,
                "action": action,
                "failure": failure,
                "format_retries": format_retries,
                "transport_retries": transport_retries,
                "conflicting_actions": conflicts,
            }
        )
        media: dict[str, tuple[bytes, str]] = {}
        for rec in records:
            for msg in rec.get("append", []):
                for part in msg["content"]:
                    sha = part.get("sha256")
                    if sha and sha not in self._emitted:
                        self._emitted.add(sha)
                        media[sha] = self._media[sha]
        return Decision(action=action, failure=failure, records=records, usage=usage, media=media)

    # -- building turns --------------------------------------------------------------
    def _add_media(self, data: bytes, mime: str, kind: str) -> Part:
        sha = sha256_hex(data)
        self._media.setdefault(sha, (data, mime))
        return {"type": kind, "sha256": sha, "mime": mime}

    def _frame_part(self, frame: npt.NDArray[np.uint8], frame_sha256: str) -> Part:
        """A live frame as a JPEG part, encoded once per episode per distinct frame."""
        part = self._frame_parts.get(frame_sha256)
        if part is None:
            part = self._frame_parts[frame_sha256] = self._add_media(
                encode_jpeg(frame), "image/jpeg", "image"
            )
        return dict(part)

    @staticmethod
    def _demo_summary(demo: Any) -> dict[str, Any]:
        return {
            "clip_id": demo.clip_id,
            "label": demo.label,
            "n_frames": demo.n_frames,
            "mp4_sha256": sha256_hex(demo.mp4) if demo.mp4 else None,
            "frames_jpeg_sha256": [sha256_hex(b) for b in demo.frames_jpeg],
        }

    def _first_message(self, ctx: EpisodeContext, obs: Observation) -> Message:
        demos: list[list[Part]] = []
        for demo in ctx.demos:
            if self.demo_transport == "video":
                demos.append([self._add_media(demo.mp4, "video/mp4", "video")])
            else:
                demos.append([self._add_media(f, "image/jpeg", "image") for f in demo.frames_jpeg])
        return first_message(
            ctx.task,
            ctx.action_names,
            ctx.max_steps,
            ctx.rules,
            demos,
            self.demo_transport,
            self._frame_part(obs.frame, obs.frame_sha256),
            self._imagined_parts(obs),
        )

    def _next_message(self, obs: Observation) -> Message:
        assert obs.previous_action is not None
        return next_message(
            obs.previous_action,
            self._frame_part(obs.frame, obs.frame_sha256),
            self._imagined_parts(obs),
        )

    def _imagined_parts(self, obs: Observation) -> list[Part]:
        """The observation's imagined rollouts (a coupled run) as parts, each frame a
        JPEG part encoded once per episode like a live frame."""
        return imagination_parts(
            [
                (
                    r.action,
                    [self._frame_part(f, h) for f, h in zip(r.frames, r.frame_sha256, strict=True)],
                )
                for r in obs.imagined
            ]
        )

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
