"""``gemini``: Google's native ``generateContent`` through the ``google-genai`` SDK.

Demonstrations go as MP4 ``inline_data`` (``video/mp4``) and live frames as
``inline_data`` ``image/jpeg``; earlier replies return with role ``model``.
``endpoint`` becomes the SDK's ``http_options.base_url`` (the SDK appends
``/v1beta/models/{model}:generateContent``), so a local stand-in or a proxy
can be used; without it the SDK talks to Google. Options go in the request's
``generationConfig``: ``temperature``, ``max_output_tokens`` and, when
``reasoning_effort`` is set, ``thinking_config`` with ``include_thoughts``
on (so the visible thought summary is logged) and either ``thinking_level``
(``minimal``/``low``/``medium``/``high``) or, for a number,
``thinking_budget`` in tokens. ``extra_body`` is merged into the REST body
by the SDK (``http_options.extra_body``). The SDK's own retries are off; the
protocol retries; ``request_timeout`` becomes ``http_options.timeout`` (in
milliseconds). The key is read from ``GEMINI_API_KEY`` by default.

A status-200 body the SDK cannot read (not JSON, not UTF-8) or that holds
neither ``candidates`` nor ``promptFeedback`` (empty, ``null``, ``{}``: the
SDK returns an empty response object for those) is a retryable
``malformed_reply`` failure, never an empty answer from the model.

How the conversation reaches the SDK. Given the conversation as
``contents``, the SDK validates every message into its pydantic types,
converts every part to the REST form and base64-encodes every media item
on every request, so a turn costs more the longer the episode (a few
tenths of a millisecond more per turn, whatever form the messages are given
in: ready ``types.Content`` objects cost more, not less, since validating
them tries them against other types attribute by attribute). Instead each message is
converted once per episode into the REST form the SDK would produce
(:func:`wire_content`: ``{"parts": [{"text"} | {"inlineData": {"data":
<URL-safe base64>, "mime_type"}}], "role"}``) and the request body gets
that list through ``http_options.extra_body``, which the SDK merges into
the body it built, after its conversion, replacing its ``contents``; the
``contents`` argument itself is a placeholder, one user turn without
parts, which the API would refuse should it ever be sent. Every other part
of the request (the URL, headers, ``generationConfig``, the user's
``extra_body`` merged on top, timeout, retries, the reading of the reply and
its errors) is still the SDK's own work, and the body is byte for byte the
one the SDK makes from the conversation itself.

A request without options carries no ``generationConfig`` at all, and any
``config`` given to the SDK adds one (``{}``), so the conversation cannot
go in a per-request ``extra_body`` then: the client is built with a
client-wide ``extra_body`` whose ``contents`` is a list the agent owns and
fills right before each call (and empties after it); the SDK reads it when
it builds each request. A request with the user's ``extra_body`` names the
same list in its own ``extra_body`` (which replaces the client-wide one),
ahead of the user's fields, so a user's ``contents`` still wins as before.
Whenever a ``config`` is sent, the SDK's automatic function calling is
turned off: no tools are ever sent, and it would deep-copy the config, the
conversation with it, on every call; it adds nothing to the body.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from vical.agent.backends._common import render_options, status_failure, transport_failure
from vical.agent.base import EpisodeContext, register_agent
from vical.agent.bodies import PreparedRequest
from vical.agent.failures import CONNECTION, TIMEOUT, ApiFailure, malformed_reply
from vical.agent.media import Media
from vical.agent.messages import Message
from vical.agent.protocol import ProtocolAgent
from vical.agent.retry import parse_retry_after
from vical.agent.wire import Reply
from vical.errors import import_optional

_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
_RETRY_STATUS = (408, 409, 429)
_CONTEXT_STATUS = (400, 413)  # statuses a context-length error comes with


def genai_sdk(module: str = "google.genai") -> ModuleType:
    """A module of the ``google-genai`` SDK, or :class:`vical.errors.MissingDependency`."""
    return import_optional(module, package="google-genai", extra="api", needed_for="backend gemini")


def gemini_failure(exc: Exception) -> ApiFailure | None:
    """Normalise a ``google-genai`` (or transport) exception, or None if it is neither."""
    errors = genai_sdk("google.genai.errors")

    if isinstance(exc, errors.APIError):
        status = int(exc.code) if exc.code else None
        message = f"{exc.status or ''} {exc.message or exc}".strip()
        headers = getattr(getattr(exc, "response", None), "headers", None)
        try:
            retry_after = parse_retry_after(headers)
        except Exception:  # a response type without mapping headers
            retry_after = None
        return status_failure(
            status,
            message,
            retry_after,
            context_statuses=_CONTEXT_STATUS,
            retry_statuses=_RETRY_STATUS,
        )
    try:
        import httpx2 as httpx_mod
    except ImportError:  # older SDKs use httpx
        import httpx as httpx_mod  # type: ignore[no-redef]
    if isinstance(exc, httpx_mod.TimeoutException | TimeoutError):
        return transport_failure(exc, TIMEOUT)
    if isinstance(exc, httpx_mod.TransportError | ConnectionError):
        return transport_failure(exc, CONNECTION)
    if isinstance(exc, UnicodeDecodeError):
        return malformed_reply(f"the body is not UTF-8 text ({exc.reason})")
    if isinstance(exc, json.JSONDecodeError):
        return malformed_reply(f"the body is not JSON ({exc.msg} at char {exc.pos})")
    return None


def _thinking_config(effort: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"include_thoughts": True}
    text = str(effort).strip().lower()
    if text in _LEVELS:
        cfg["thinking_level"] = text.upper()
    else:
        try:
            cfg["thinking_budget"] = int(text)
        except ValueError:
            raise ValueError(
                f"gemini: reasoning effort {effort!r} is neither a thinking level "
                f"({', '.join(_LEVELS)}) nor a token budget"
            ) from None
    return cfg


def _thinking(effort: Any) -> dict[str, Any]:
    return {"thinking_config": _thinking_config(effort)}


def wire_content(item: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered message (:meth:`GeminiAgent.render_message`) as the SDK puts it
    in the request body: parts first, then role; text as it is; inline data as
    ``inlineData`` with the bytes in URL-safe base64 and then ``mime_type``."""
    parts: list[dict[str, Any]] = []
    for part in item["parts"]:
        if part.keys() == {"text"}:
            parts.append({"text": part["text"]})
        elif part.keys() == {"inline_data"}:
            blob = part["inline_data"]
            data = base64.urlsafe_b64encode(blob["data"]).decode("ascii")
            parts.append({"inlineData": {"data": data, "mime_type": blob["mime_type"]}})
        else:
            raise ValueError(
                f"gemini: cannot send a message part with the fields {sorted(part)}; "
                "render_message makes only 'text' and 'inline_data' parts"
            )
    return {"parts": parts, "role": item["role"]}


@register_agent("gemini")
class GeminiAgent(ProtocolAgent):
    """Gemini ``generateContent`` with MP4 demonstrations."""

    default_key_env = "GEMINI_API_KEY"
    default_endpoint = None
    demo_transport = "video"
    api_label = "a Gemini generateContent"

    def make_client(self, api_key: str) -> Any:
        genai = genai_sdk()
        types = genai_sdk("google.genai.types")

        # the body's ``contents`` of a request without its own extra_body (module docstring)
        self._contents: list[dict[str, Any]] = []
        http: dict[str, Any] = {
            "retry_options": types.HttpRetryOptions(attempts=1),
            "extra_body": {"contents": self._contents},
        }
        if self._raw_endpoint:
            http["base_url"] = self._raw_endpoint
        if self.request_timeout is not None:
            http["timeout"] = int(self.request_timeout * 1000)  # milliseconds
        return genai.Client(api_key=api_key, http_options=types.HttpOptions(**http))

    conversation_field = "contents"

    @classmethod
    def render_message(cls, message: Message, media: Media) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for p in message["content"]:
            if p["type"] == "text":
                parts.append({"text": p["text"]})
            else:
                data, mime = media[p["sha256"]]
                parts.append({"inline_data": {"mime_type": mime, "data": data}})
        role = "model" if message["role"] == "assistant" else "user"
        return {"role": role, "parts": parts}

    @classmethod
    def assemble(cls, items: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
        config = render_options(settings, max_tokens="max_output_tokens", reasoning=_thinking)
        payload: dict[str, Any] = {"model": settings["model"], "contents": items}
        if config:
            payload["config"] = config
        if settings.get("extra_body"):
            payload["extra_body"] = dict(settings["extra_body"])
        return payload

    def start(self, ctx: EpisodeContext) -> None:
        super().start(ctx)
        # this episode's rendered messages, each with its wire_content, in order
        self._wire: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def send(self, payload: dict[str, Any]) -> Reply:
        return self._generate(payload, [wire_content(item) for item in payload["contents"]])

    def send_prepared(self, request: PreparedRequest) -> Reply:
        """Send a request of the episode, each message converted once per episode:
        the messages that are the same objects, in the same places, as in the
        previous request keep their converted form."""
        items = request.payload["contents"]
        kept = 0
        for (item, _), now in zip(self._wire, items, strict=False):
            if item is not now:
                break
            kept += 1
        del self._wire[kept:]
        self._wire.extend((item, wire_content(item)) for item in items[kept:])
        return self._generate(request.payload, [wire for _, wire in self._wire])

    def _generate(self, payload: dict[str, Any], contents: list[dict[str, Any]]) -> Reply:
        """One ``generateContent`` call whose body holds ``contents`` (see the module
        docstring for the route)."""
        types = genai_sdk("google.genai.types")

        config = dict(payload.get("config") or {})
        if payload.get("extra_body"):
            extra = {"contents": self._contents, **payload["extra_body"]}
            config["http_options"] = types.HttpOptions(extra_body=extra)
        if config:
            config["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(
                disable=True
            )
        gen_config = types.GenerateContentConfig(**config) if config else None
        self._contents[:] = contents
        try:
            # a placeholder: the body's contents come from extra_body (module docstring)
            resp = self._client.models.generate_content(
                model=payload["model"], contents=[{"role": "user", "parts": []}], config=gen_config
            )
        except Exception as e:
            failure = gemini_failure(e)
            if failure is None:
                raise
            raise failure from e
        finally:
            self._contents.clear()
        if resp is None or (not resp.candidates and resp.prompt_feedback is None):
            size = None
            http = getattr(resp, "sdk_http_response", None)
            if http is not None and http.headers:
                size = http.headers.get("content-length") or http.headers.get("Content-Length")
            body = f"a body of {size} bytes" if size is not None else "the body"
            raise malformed_reply(f"{body} holds neither 'candidates' nor 'promptFeedback'")
        texts: list[str] = []
        thoughts: list[str] = []
        finish = None
        if resp.candidates:
            cand = resp.candidates[0]
            finish = str(cand.finish_reason.value) if cand.finish_reason else None
            for part in (cand.content.parts if cand.content else None) or []:
                if part.text is None:
                    continue
                (thoughts if part.thought else texts).append(part.text)
        elif resp.prompt_feedback is not None and resp.prompt_feedback.block_reason:
            finish = f"blocked:{resp.prompt_feedback.block_reason.value}"
        um = resp.usage_metadata
        usage: dict[str, int] = {}
        if um is not None:
            usage = {
                "input_tokens": int(um.prompt_token_count or 0),
                "output_tokens": int(um.candidates_token_count or 0)
                + int(um.thoughts_token_count or 0),
                "total_tokens": int(um.total_token_count or 0),
            }
            if um.thoughts_token_count:
                usage["reasoning_tokens"] = int(um.thoughts_token_count)
            if um.cached_content_token_count:
                usage["cached_input_tokens"] = int(um.cached_content_token_count)
        return Reply(
            text="".join(texts),
            reasoning="\n\n".join(thoughts) or None,
            usage=usage,
            finish_reason=finish,
            model=resp.model_version,
        )
