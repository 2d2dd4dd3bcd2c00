"""``openai-chat``: any OpenAI-compatible ``/chat/completions`` endpoint.

Covers OpenAI itself, vLLM, SGLang, Ollama, LM Studio and hosted compatible
APIs. No video is sent: each demonstration goes as its ordered JPEG frames
(``image_url`` data URLs) after a sentence saying they are the frames of
video *i*; every live frame is one JPEG.

Request body: ``model``, ``messages``; ``temperature``,
``max_completion_tokens`` (from ``max_output_tokens``) and
``reasoning_effort`` only when set; then ``extra_body`` merged on top (use it
for ``max_tokens`` on servers that predate ``max_completion_tokens``, for
``seed``, or for provider-specific fields). The SDK's own retries are off;
the protocol retries. Visible reasoning is read from ``reasoning_content``
(vLLM, SGLang, DeepSeek) or ``reasoning`` (OpenRouter, Ollama) on the message.

Requests go through the SDK client's ``post`` with the body already
serialised (:func:`post_openai`): the bytes are the ones the SDK's ``create``
would send for the same payload, but each message is serialised once per
episode instead of the SDK walking the whole conversation on every turn. The
raw reply is checked before the SDK reads it: a status-200 body that is not
UTF-8, not JSON, not an object or has no ``choices`` (the SDK would return a
plain string, ``None`` or an empty model, or raise ``JSONDecodeError``) is a
retryable ``malformed_reply`` failure, never the model's answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, ClassVar

from vical.agent.backends._common import (
    CHAT_USAGE,
    effort_field,
    render_message,
    render_options,
    request_body,
    status_failure,
    transport_failure,
)
from vical.agent.base import register_agent
from vical.agent.bodies import PreparedRequest, compact_json
from vical.agent.failures import CONNECTION, FATAL, TIMEOUT, ApiFailure, malformed_reply
from vical.agent.media import Media, media_data_url
from vical.agent.messages import Message
from vical.agent.protocol import ProtocolAgent
from vical.agent.retry import parse_retry_after
from vical.agent.wire import Reply, check_json_body, describe_body
from vical.errors import import_optional

_RETRY_STATUS = {408, 409, 425, 429}
_CONTEXT_STATUS = (400, 413, 422)  # statuses a context-length error comes with


def openai_sdk(needed_for: str = "the OpenAI-compatible backends") -> ModuleType:
    """The ``openai`` SDK, or :class:`vical.errors.MissingDependency` naming the extra."""
    return import_optional("openai", package="openai", extra="api", needed_for=needed_for)


def openai_failure(exc: Exception) -> ApiFailure | None:
    """Normalise an ``openai`` SDK exception, or None if it is not one."""
    openai = openai_sdk()

    if isinstance(exc, openai.APIStatusError):
        return status_failure(
            exc.status_code,
            str(exc.message),
            parse_retry_after(exc.response.headers if exc.response else None),
            context_statuses=_CONTEXT_STATUS,
            retry_statuses=_RETRY_STATUS,
            code=getattr(exc, "code", None),
        )
    if isinstance(exc, openai.APITimeoutError):
        return transport_failure(exc, TIMEOUT)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return transport_failure(exc, CONNECTION, detail)
    if isinstance(exc, openai.APIResponseValidationError):
        return malformed_reply(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, openai.APIError):
        return ApiFailure(FATAL, f"{type(exc).__name__}: {exc}", None, None)
    return None


def make_openai_client(agent: ProtocolAgent, api_key: str) -> Any:
    openai = openai_sdk(f"backend {agent.name}")

    kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0}
    if agent._raw_endpoint:
        kwargs["base_url"] = agent._raw_endpoint
    if agent.request_timeout is not None:
        kwargs["timeout"] = agent.request_timeout
    return openai.OpenAI(**kwargs)


def post_openai(client: Any, path: str, cast_to: type, body: bytes, needs: str) -> Any:
    """POST the JSON ``body`` to ``path`` through the SDK client; the parsed reply.

    The bytes go as the SDK's ``content``, sent as they are: the SDK neither
    walks nor re-serialises the conversation, which it would do on every turn
    through ``create``. Headers, authentication and timeout are the ones
    ``create`` uses (bearer authentication, the raw-response header, the
    client's timeout), and ``body`` is what ``create`` would send for the same
    payload (:func:`vical.agent.bodies.compact_json`), so the request is the
    same on the wire. SDK and transport errors become :class:`ApiFailure`; a
    status-200 body that is not a JSON object holding the field ``needs``
    becomes a ``malformed_reply`` failure instead of a string, ``None`` or an
    exception from deep inside the SDK.
    """
    openai_sdk()
    from openai._constants import RAW_RESPONSE_HEADER

    options = {"headers": {RAW_RESPONSE_HEADER: "true"}, "security": {"bearer_auth": True}}
    try:
        raw = client.post(path, cast_to=cast_to, content=body, options=options)
    except Exception as e:
        failure = openai_failure(e)
        if failure is None:
            raise
        raise failure from e
    http = raw.http_response
    content, ctype = http.content, http.headers.get("content-type")
    check_json_body(content, ctype, needs)
    try:
        return raw.parse()
    except ValueError as e:  # what the SDK raises on a body it cannot read
        raise malformed_reply(f"{type(e).__name__} ({describe_body(content, ctype)})") from e


def _reasoning_from(message: Any) -> str | None:
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = getattr(message, key, None) or extra.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


class PostsSerialisedBody:
    """``send`` and ``send_prepared`` for a backend that posts the request body as bytes
    (``_post``): a prepared request's body serialised once per episode, else the payload."""

    def _post(self, body: bytes) -> Reply:
        raise NotImplementedError

    def send(self, payload: dict[str, Any]) -> Reply:
        return self._post(compact_json(payload))

    def send_prepared(self, request: PreparedRequest) -> Reply:
        return self._post(
            request.body if request.body is not None else compact_json(request.payload)
        )


@register_agent("openai-chat")
class OpenAIChatAgent(PostsSerialisedBody, ProtocolAgent):
    """OpenAI-compatible chat completions through the official ``openai`` SDK."""

    default_key_env = "OPENAI_API_KEY"
    default_endpoint: ClassVar[str | None] = None  # the SDK's default, https://api.openai.com/v1
    demo_transport = "frames"
    max_tokens_field = "max_completion_tokens"
    api_label = "an OpenAI chat completions"

    conversation_field = "messages"
    sends_body = True
    api_path = "/chat/completions"

    def make_client(self, api_key: str) -> Any:
        return make_openai_client(self, api_key)

    # -- rendering ----------------------------------------------------------------
    @classmethod
    def render_part(cls, part: Mapping[str, Any], media: Media) -> dict[str, Any]:
        kind = part["type"]
        if kind == "text":
            return {"type": "text", "text": part["text"]}
        if kind == "image":
            return {
                "type": "image_url",
                "image_url": {"url": media_data_url(media, part["sha256"])},
            }
        raise ValueError(f"backend {cls.name} cannot send a {kind} part")

    @classmethod
    def render_effort(cls, effort: Any) -> dict[str, Any]:
        """The request fields for ``reasoning_effort``."""
        return effort_field(effort)

    @classmethod
    def render_options(cls, settings: Mapping[str, Any]) -> dict[str, Any]:
        return render_options(
            settings, max_tokens=cls.max_tokens_field, reasoning=cls.render_effort
        )

    @classmethod
    def render_message(cls, message: Message, media: Media) -> dict[str, Any]:
        return render_message(message, lambda p: cls.render_part(p, media))

    @classmethod
    def assemble(cls, items: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
        return request_body(settings, "messages", items, cls.render_options(settings))

    # -- sending ------------------------------------------------------------------
    def _post(self, body: bytes) -> Reply:
        types = openai_sdk().types
        resp = post_openai(self._client, self.api_path, types.chat.ChatCompletion, body, "choices")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list):
            raise malformed_reply(f"'choices' is {type(choices).__name__}, not a list")
        if not choices:
            return Reply(text="", usage=CHAT_USAGE.counts(resp.usage), model=resp.model)
        choice = choices[0]
        msg = getattr(choice, "message", None)
        if msg is None or not isinstance(getattr(msg, "content", None), str | None):
            raise malformed_reply("the first choice holds no message with text content")
        return Reply(
            text=msg.content or "",
            reasoning=_reasoning_from(msg),
            usage=CHAT_USAGE.counts(resp.usage),
            finish_reason=choice.finish_reason,
            model=resp.model,
        )
