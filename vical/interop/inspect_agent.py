"""The V-ICAL protocol with an Inspect AI model as its transport (backend ``inspect``).

Everything a model sees and every rule of a decision come from
:class:`vical.agent.protocol.ProtocolAgent`, unchanged: the first turn (task
introduction, rules, budget, legal actions, demonstrations, start frame, answer
contract), the later turns, the ``[Action:<name>]`` parser, the three format
retries, the history that is never trimmed, the size cap and the log records.
Only the last hop differs: instead of an SDK request, each request is handed to
Inspect's ``Model.generate`` as Inspect chat messages (text as ``ContentText``,
frames as ``ContentImage`` data URLs, demonstrations as their JPEG frames or, with
``demo_transport="video"``, as one ``ContentVideo`` MP4 each), so any provider
Inspect supports can play, with Inspect's own connection handling, retries,
limits and transcript.

The payload whose digest the ``request`` records hold (``request_sha256``) is the
provider-neutral request this backend renders: ``{"model", "messages", "config"}``
with the messages in Inspect's JSON form. It is not the provider's HTTP body,
which Inspect builds later and logs in the sample's model events.

Failures: a context-length error reported by Inspect (``stop_reason`` of
``model_length`` with an error) becomes ``token_overflow``, as in ``vical eval``;
any other output that carries an error instead of a reply becomes ``api_error``.
Transport retries are Inspect's (``--max-retries``, ``--timeout``); a request
Inspect gives up on raises out of ``generate``, the episode stops, and the sample
errors: an infrastructure failure, never a result.

The episode runs on a worker thread (:func:`anyio.to_thread.run_sync`); each
request goes back to the event loop with :func:`anyio.from_thread.run`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from vical.agent.base import register_agent
from vical.agent.failures import CONTEXT_LENGTH, FATAL, ApiFailure
from vical.agent.media import Media, media_data_url
from vical.agent.messages import Message
from vical.agent.protocol import ProtocolAgent
from vical.agent.wire import Reply
from vical.errors import import_optional

BACKEND = "inspect"
DEMO_TRANSPORTS = ("frames", "video")
# the protocol's transport options, off: Inspect does the retrying and the timing
_NO_RETRIES: dict[str, Any] = {
    "transport_retries": 0,
    "retry_base_delay": 0.0,
    "retry_max_delay": 0.0,
    "request_timeout": None,
}


def inspect_ai_module(needed_for: str = "V-ICAL in Inspect AI") -> Any:
    """The ``inspect_ai`` package, or :class:`~vical.errors.MissingDependency` naming the extra."""
    return import_optional(
        "inspect_ai", package="inspect_ai", extra="inspect", needed_for=needed_for
    )


def to_inspect_message(item: Mapping[str, Any]) -> Any:
    """One rendered message (:meth:`InspectAgent.render_message`) as an Inspect ChatMessage."""
    inspect_ai_module()
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageUser,
        Content,
        ContentImage,
        ContentText,
        ContentVideo,
    )

    if item["role"] == "assistant":
        return ChatMessageAssistant(content=item["content"])
    parts: list[Content] = []
    for p in item["content"]:
        if p["type"] == "text":
            parts.append(ContentText(text=p["text"]))
        elif p["type"] == "image":
            parts.append(ContentImage(image=p["image"]))
        elif p["type"] == "video":
            parts.append(ContentVideo(video=p["video"], format="mp4"))
        else:
            raise ValueError(f"backend {BACKEND} cannot send a {p['type']} part")
    return ChatMessageUser(content=parts)


def reply_from_output(output: Any) -> Reply:
    """An Inspect ``ModelOutput`` as the protocol's :class:`Reply`; a context-length
    error as the :class:`ApiFailure` the protocol turns into ``token_overflow``."""
    if output.error:  # Inspect turned a refused request into an output that holds no reply
        if output.stop_reason == "model_length":
            raise ApiFailure(CONTEXT_LENGTH, str(output.error))
        raise ApiFailure(FATAL, str(output.error))
    text = output.completion or ""
    reasoning = None
    if output.choices:
        from inspect_ai.model import ContentReasoning

        content = output.choices[0].message.content
        if not isinstance(content, str):
            found = [c.reasoning for c in content if isinstance(c, ContentReasoning)]
            reasoning = "\n\n".join(r for r in found if r) or None
    usage: dict[str, int] = {}
    u = output.usage
    if u is not None:
        usage = {
            "input_tokens": int(u.input_tokens or 0),
            "output_tokens": int(u.output_tokens or 0),
            "total_tokens": int(u.total_tokens or 0),
        }
        if u.reasoning_tokens:
            usage["reasoning_tokens"] = int(u.reasoning_tokens)
        if u.input_tokens_cache_read:
            usage["cached_input_tokens"] = int(u.input_tokens_cache_read)
    return Reply(
        text=text,
        reasoning=reasoning,
        usage=usage,
        finish_reason=output.stop_reason,
        model=output.model or None,
    )


Generate = Callable[[list[Any]], Awaitable[Any]]


@register_agent(BACKEND, module="vical.interop.inspect_agent")
class InspectAgent(ProtocolAgent):
    """:class:`ProtocolAgent` whose requests go to an Inspect ``Model``.

    ``model`` is the Inspect model name (``openai/gpt-4o``), recorded in the
    settings; ``generate`` sends a list of Inspect chat messages and returns the
    ``ModelOutput`` (by default the active model's ``generate``, called on the event
    loop from the episode's worker thread). ``endpoint`` is the model's base URL
    when there is one (recorded redacted, never used to connect), ``config`` the
    Inspect ``GenerateConfig`` fields that were set (recorded: they can change a
    result).
    """

    api_label = "an Inspect AI model"
    conversation_field = "messages"
    sends_body = False
    default_key_env = ""
    needs_key = False

    def __init__(
        self,
        *,
        model: str,
        generate: Generate | None = None,
        endpoint: str | None = None,
        config: Mapping[str, Any] | None = None,
        demo_transport: str = "frames",
        format_retries: int = 3,
        seed: int | None = None,
    ):
        if demo_transport not in DEMO_TRANSPORTS:
            raise ValueError(
                f"demo_transport must be one of {', '.join(DEMO_TRANSPORTS)}, not {demo_transport!r}"
            )
        self.config = dict(config or {})  # settings() reads it while the protocol sets up
        self.demo_transport = demo_transport  # type: ignore[misc]  # per instance here
        self._generate = generate
        self._converted: dict[int, tuple[dict[str, Any], Any]] = {}
        self.conversation: list[Any] = []  # the last request's Inspect messages, then the reply
        # Inspect holds the key and the connection (needs_key is False, make_client makes
        # nothing) and does the retrying (_NO_RETRIES): what it gives up on errors the sample
        super().__init__(
            endpoint=endpoint, model=model, seed=seed, format_retries=format_retries, **_NO_RETRIES
        )

    def make_client(self, api_key: str) -> Any:
        """No client: each request goes to Inspect's ``Model.generate``."""
        return None

    def settings(self) -> dict[str, Any]:
        return {
            "backend": BACKEND,
            "endpoint": self.endpoint,
            "model": self.model,
            "config": self.config,
            "seed": self.seed,
            "format_retries": self.format_retries,
            "transport_retries": self.transport_retries,
            "demo_transport": self.demo_transport,
        }

    # -- rendering (pure) ------------------------------------------------------------
    @classmethod
    def render_message(cls, message: Message, media: Media) -> dict[str, Any]:
        if message["role"] == "assistant":
            text = "".join(p["text"] for p in message["content"] if p["type"] == "text")
            return {"role": "assistant", "content": text}
        parts: list[dict[str, Any]] = []
        for p in message["content"]:
            kind = p["type"]
            if kind == "text":
                parts.append({"type": "text", "text": p["text"]})
            elif kind == "image":
                parts.append({"type": "image", "image": media_data_url(media, p["sha256"])})
            elif kind == "video":
                url = media_data_url(media, p["sha256"])
                parts.append({"type": "video", "video": url, "format": "mp4"})
            else:
                raise ValueError(f"backend {BACKEND} cannot send a {kind} part")
        return {"role": message["role"], "content": parts}

    @classmethod
    def assemble(cls, items: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
        return {"model": settings["model"], "messages": items, "config": settings.get("config")}

    # -- sending ---------------------------------------------------------------------
    def start(self, ctx: Any) -> None:
        super().start(ctx)
        self._converted = {}
        self.conversation = []

    def _inspect_messages(self, items: list[dict[str, Any]]) -> list[Any]:
        """The Inspect messages of a request, each built once per episode (the payload's
        items are the same objects from turn to turn)."""
        out = []
        for item in items:
            hit = self._converted.get(id(item))
            if hit is None or hit[0] is not item:
                hit = self._converted[id(item)] = (item, to_inspect_message(item))
            out.append(hit[1])
        return out

    def send(self, payload: dict[str, Any]) -> Reply:
        messages = self._inspect_messages(payload["messages"])
        chosen = self._generate

        async def call() -> Any:
            if chosen is not None:
                return await chosen(messages)
            from inspect_ai.model import get_model

            return await get_model().generate(messages)

        import anyio.from_thread

        output = anyio.from_thread.run(call)
        reply = reply_from_output(output)
        self.conversation = [*messages, output.message] if output.choices else list(messages)
        return reply
