"""``openai-responses``: the OpenAI Responses API (``/responses``).

Content parts are ``input_text`` and ``input_image`` (a JPEG data URL);
earlier replies are sent back as assistant messages holding their final
text. No video: each demonstration goes as its ordered JPEG frames after a
sentence saying they are the frames of video *i*. Options:
``temperature``, ``max_output_tokens``, ``reasoning: {"effort": …}`` when
set, then ``extra_body`` merged on top. Visible reasoning is the text of
``reasoning`` output items (their summaries, or their content where a server
returns it). A status-200 body that is not a JSON object with an ``output``
field is a retryable ``malformed_reply`` failure (see
:func:`vical.agent.backends.openai_chat.post_openai`, which also sends the
body serialised once per message instead of through the SDK's ``create``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vical.agent.backends._common import (
    RESPONSES_USAGE,
    effort_object,
    render_message,
    render_options,
    request_body,
)
from vical.agent.backends.openai_chat import (
    PostsSerialisedBody,
    make_openai_client,
    openai_sdk,
    post_openai,
)
from vical.agent.base import register_agent
from vical.agent.failures import malformed_reply
from vical.agent.media import Media, media_data_url
from vical.agent.messages import Message
from vical.agent.protocol import ProtocolAgent
from vical.agent.wire import Reply


@register_agent("openai-responses")
class OpenAIResponsesAgent(PostsSerialisedBody, ProtocolAgent):
    """The Responses API through the official ``openai`` SDK."""

    default_key_env = "OPENAI_API_KEY"
    default_endpoint = None
    demo_transport = "frames"
    api_label = "an OpenAI Responses API"
    conversation_field = "input"
    sends_body = True

    def make_client(self, api_key: str) -> Any:
        return make_openai_client(self, api_key)

    @classmethod
    def render_part(cls, part: Mapping[str, Any], media: Media) -> dict[str, Any]:
        if part["type"] == "text":
            return {"type": "input_text", "text": part["text"]}
        if part["type"] == "image":
            return {"type": "input_image", "image_url": media_data_url(media, part["sha256"])}
        raise ValueError(f"backend {cls.name} cannot send a {part['type']} part")

    @classmethod
    def render_message(cls, message: Message, media: Media) -> dict[str, Any]:
        return render_message(message, lambda p: cls.render_part(p, media))

    @classmethod
    def assemble(cls, items: list[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
        options = render_options(settings, max_tokens="max_output_tokens", reasoning=effort_object)
        return request_body(settings, "input", items, options)

    def _post(self, body: bytes) -> Reply:
        types = openai_sdk().types
        resp = post_openai(self._client, "/responses", types.responses.Response, body, "output")
        output = getattr(resp, "output", None)
        if not isinstance(output, list):
            raise malformed_reply(f"'output' is {type(output).__name__}, not a list")
        texts: list[str] = []
        thoughts: list[str] = []
        for item in output:
            kind = getattr(item, "type", None)
            if kind == "message":
                for c in getattr(item, "content", None) or []:
                    if getattr(c, "type", None) == "output_text" and c.text:
                        texts.append(c.text)
            elif kind == "reasoning":
                for group in ("summary", "content"):
                    for s in getattr(item, group, None) or []:
                        if getattr(s, "text", None):
                            thoughts.append(s.text)
        finish = resp.status
        details = getattr(resp, "incomplete_details", None)
        if details is not None and getattr(details, "reason", None):
            finish = f"{resp.status}:{details.reason}"
        return Reply(
            text="".join(texts),
            reasoning="\n\n".join(thoughts) or None,
            usage=RESPONSES_USAGE.counts(resp.usage),
            finish_reason=finish,
            model=resp.model,
        )
