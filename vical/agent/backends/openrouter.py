"""``openrouter``: OpenRouter's chat completions with its ``video_url`` extension.

Same wire format as ``openai-chat`` (the official ``openai`` SDK pointed at
``https://openrouter.ai/api/v1``), except that each demonstration goes as
one MP4 part ``{"type": "video_url", "video_url": {"url":
"data:video/mp4;base64,…"}}``, which OpenRouter routes to a video-capable
provider. Live frames are single ``image_url`` JPEGs. ``max_output_tokens``
becomes ``max_tokens`` and ``reasoning_effort`` becomes
``{"reasoning": {"effort": …}}``, OpenRouter's unified reasoning option.
Provider routing (e.g. ``{"provider": {"only": ["seed"]}}``) goes in
``extra_body``. The key is read from ``OPENROUTER_API_KEY`` by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vical.agent.backends._common import effort_object
from vical.agent.backends.openai_chat import OpenAIChatAgent
from vical.agent.base import register_agent
from vical.agent.media import Media, media_data_url


@register_agent("openrouter")
class OpenRouterAgent(OpenAIChatAgent):
    """OpenRouter chat completions; demonstrations as MP4 ``video_url`` parts."""

    default_key_env = "OPENROUTER_API_KEY"
    default_endpoint = "https://openrouter.ai/api/v1"
    demo_transport = "video"
    max_tokens_field = "max_tokens"

    @classmethod
    def render_part(cls, part: Mapping[str, Any], media: Media) -> dict[str, Any]:
        if part["type"] == "video":
            return {
                "type": "video_url",
                "video_url": {"url": media_data_url(media, part["sha256"])},
            }
        return super().render_part(part, media)

    @classmethod
    def render_effort(cls, effort: Any) -> dict[str, Any]:
        return effort_object(effort)
