"""The closed-loop protocol shared by every model backend (paper §3.1, App. 2.1).

:class:`ProtocolAgent` plays an episode as one growing conversation (the
messages of :mod:`vical.agent.messages`, with nothing ever dropped) and leaves
only the last hop to a backend: rendering a message into its provider's request
body and sending it through the provider's SDK. Each decision may take several
requests:

* **format retries** — a reply whose first non-empty line is not exactly a
  legal ``[Action:<name>]`` marker (see :mod:`vical.agent.parse` for the
  contract) is kept in the history and followed by a retry message naming
  the legal actions; after ``format_retries`` (3) such retries the episode
  ends with ``invalid_action``. Only a well-formed reply of the provider's
  API counts as the model's answer, an empty one included;
* **transport retries** — a retryable failure (:mod:`vical.agent.failures`)
  resends the same request after a backoff, up to ``transport_retries`` (3)
  times, then ``api_error``; a Retry-After beyond ``max_retry_after`` is not
  waited for (:mod:`vical.agent.retry`). A provider's context-length error
  ends the episode at once with ``token_overflow``; any other API error with
  ``api_error``. None of these failures escapes as an exception.

Every reply is capped and redacted as it arrives (:func:`vical.agent.wire.keep_reply`);
the key and the endpoint's credentials reach only the SDK client
(:mod:`vical.agent.credentials`).

Preflight: :meth:`ProtocolAgent.preflight` sends one tiny text-only request
(no images) with the run's own settings, retried once if retryable, and
raises :class:`~vical.agent.failures.PreflightError` with one line naming the
endpoint (redacted), the model, what failed (cannot connect, key refused,
model or path not found, malformed reply, timeout, other status) and what to
check. Any well-formed reply passes, whatever its text.

Beyond the game: :meth:`ProtocolAgent.ask` sends one user message of another
kind of conversation (an audit's questions) under the same transport rules,
and keeps it and its reply in the history only when the request succeeded.

Rendering: a backend turns the provider-neutral messages into its request
body (:meth:`ProtocolAgent.render_payload`, a pure function of the messages,
the media and the settings, so a logged run can be re-rendered by
:mod:`vical.agent.replay`; it is the backend's :meth:`~ProtocolAgent.assemble`
around each message's :meth:`~ProtocolAgent.render_message`) and sends it
through its SDK (:meth:`ProtocolAgent.send`). Within an episode the same body
is made without redoing earlier turns (:meth:`ProtocolAgent.prepare`, see
:mod:`vical.agent.bodies`): each message is rendered, serialised and hashed
once, each media item base64-encoded once
(:class:`~vical.agent.media.MediaStore`) and each distinct live frame
JPEG-encoded once, so a turn costs the same at turn 35 as at turn 2; the
payload, its digest and the bytes sent are those of the whole-payload path.

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

import json
import random
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from vical.agent.base import Agent, Decision, EpisodeContext, Observation
from vical.agent.bodies import ConversationCache, PreparedRequest
from vical.agent.credentials import resolve_api_key, secrets_for
from vical.agent.failures import (
    CONTEXT_LENGTH,
    RETRYABLE,
    TIMEOUT,
    ApiFailure,
    PreflightError,
    preflight_message,
)
from vical.agent.media import Media
from vical.agent.messages import EpisodeTurns, Message, demo_summary, reply_message, retry_message
from vical.agent.parse import parse_reply, split_think
from vical.agent.redact import redact_text, redact_url
from vical.agent.retry import DEFAULT_MAX_RETRY_AFTER, DEFAULT_REQUEST_TIMEOUT, backoff_delay
from vical.agent.wire import Reply, keep_reply
from vical.outcomes import FailureMode

PREFLIGHT_TEXT = "This is a connection check. Reply with the single word: ready"


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
    # False: the backend holds no key of its own (another layer sends the requests)
    needs_key: ClassVar[bool] = True
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
        api_key = (
            resolve_api_key(self.name, api_key_env, self.default_key_env, raw_endpoint)
            if self.needs_key
            else ""
        )
        self._secrets = secrets_for(api_key, raw_endpoint)  # only to redact, never recorded
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
        self._turns = EpisodeTurns(self.demo_transport)
        self._media = self._turns.media
        self._bodies = ConversationCache(
            lambda m: self.render_message(m, self._media), self.assemble, self.conversation_field
        )
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
                    "demos": [demo_summary(d) for d in ctx.demos],
                }
            )
            pending = [self._turns.first(ctx, obs)]
        else:
            pending = [self._turns.next(obs)]
        self._turn += 1

        format_retries = 0
        transport_total = 0
        conflicts: list[list[str]] = []

        def decide(action: str | None, failure: FailureMode | None) -> Decision:
            return self._decide(
                obs, records, usage, action, failure, format_retries, transport_total, conflicts
            )

        while True:
            reply, failure, used = self._request(pending, obs.step, records, usage)
            transport_total += used
            if failure is not None:
                return decide(None, failure)
            assert reply is not None
            self._history.extend(pending)
            self._history.append(reply_message(reply.text))
            parsed = parse_reply(reply.text, ctx.action_names)
            records[-1]["parse"] = parsed.as_record()
            if parsed.conflicting:
                conflicts.append(parsed.markers)
            if parsed.action is not None:
                return decide(parsed.action, None)
            if format_retries >= self.format_retries:
                return decide(None, FailureMode.INVALID_ACTION)
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
            self._history.append(reply_message(reply.text))
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
                wait = backoff_delay(
                    attempt, self.retry_base_delay, self.retry_max_delay, self._rng, e.retry_after
                )
                rec["wait_s"] = round(wait, 4)
                time.sleep(wait)
                continue
            latency = time.perf_counter() - t0
            reply, cut = keep_reply(reply, self._secrets)
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
        raise PreflightError(
            preflight_message(
                failure,
                endpoint=self.endpoint,
                model=self.model,
                key_env=self.api_key_env or self.default_key_env,
                request_timeout=self.request_timeout,
                api_label=self.api_label,
                secrets=self._secrets,
            )
        )

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

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
