"""What the model backends share: request options, message rendering, failure kinds.

Each backend keeps its own wire format; the pieces here are the ones whose
logic is the same across them, told apart only by field names or status sets.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from vical.agent.failures import (
    CONTEXT_LENGTH,
    FATAL,
    RETRYABLE,
    ApiFailure,
    looks_like_context_error,
)
from vical.agent.messages import Message

# -- request options -----------------------------------------------------------------


def effort_field(effort: Any) -> dict[str, Any]:
    """``reasoning_effort`` as a top-level field (OpenAI chat completions)."""
    return {"reasoning_effort": effort}


def effort_object(effort: Any) -> dict[str, Any]:
    """``reasoning_effort`` as ``{"reasoning": {"effort": …}}`` (Responses API, OpenRouter)."""
    return {"reasoning": {"effort": effort}}


def render_options(
    settings: Mapping[str, Any],
    *,
    max_tokens: str,
    reasoning: Callable[[Any], dict[str, Any]],
) -> dict[str, Any]:
    """The request fields for the options that are set, in this order: ``temperature``,
    ``max_output_tokens`` (under the provider's name ``max_tokens``) and
    ``reasoning_effort`` (the fields ``reasoning(effort)`` returns)."""
    body: dict[str, Any] = {}
    if settings.get("temperature") is not None:
        body["temperature"] = settings["temperature"]
    if settings.get("max_output_tokens") is not None:
        body[max_tokens] = settings["max_output_tokens"]
    if settings.get("reasoning_effort") is not None:
        body.update(reasoning(settings["reasoning_effort"]))
    return body


# -- messages ------------------------------------------------------------------------


def render_message(
    message: Message, render_part: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """An OpenAI-style ``{"role", "content"}`` message: an earlier reply goes back as
    its final text, any other message as its parts, each rendered by ``render_part``."""
    if message["role"] == "assistant":
        text = "".join(p["text"] for p in message["content"] if p["type"] == "text")
        return {"role": "assistant", "content": text}
    return {"role": message["role"], "content": [render_part(p) for p in message["content"]]}


def request_body(
    settings: Mapping[str, Any], field: str, items: list[dict[str, Any]], options: dict[str, Any]
) -> dict[str, Any]:
    """``{"model", field: items}``, then the options, then ``extra_body`` merged on top."""
    body: dict[str, Any] = {"model": settings["model"], field: items}
    body.update(options)
    body.update(settings.get("extra_body") or {})
    return body


# -- failures ------------------------------------------------------------------------


def status_failure(
    status: int | None,
    message: str,
    retry_after: float | None,
    *,
    context_statuses: Collection[int],
    retry_statuses: Collection[int],
    code: str | None = None,
) -> ApiFailure:
    """An HTTP error status as an :class:`ApiFailure`: a context-length error (one of
    ``context_statuses`` whose message or ``code`` says so), retryable (one of
    ``retry_statuses`` or 5xx) or fatal."""
    if status in context_statuses and looks_like_context_error(message, code):
        return ApiFailure(CONTEXT_LENGTH, message, status, retry_after)
    if status is not None and (status in retry_statuses or status >= 500):
        return ApiFailure(RETRYABLE, message, status, retry_after)
    return ApiFailure(FATAL, message, status, retry_after)


def transport_failure(exc: BaseException, reason: str, detail: str = "") -> ApiFailure:
    """A request that got no reply (``reason``: timeout or connection): retryable."""
    return ApiFailure(RETRYABLE, f"{type(exc).__name__}: {exc}{detail}", reason=reason)


# -- replies -------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageNames:
    """Where an OpenAI API keeps its token counts: the two APIs name the same counts
    differently (:data:`CHAT_USAGE`, :data:`RESPONSES_USAGE`). ``input`` and
    ``output`` are the token totals, ``input_details`` and ``output_details`` the
    objects holding ``cached_tokens`` and ``reasoning_tokens``."""

    input: str
    output: str
    input_details: str
    output_details: str

    def counts(self, u: Any) -> dict[str, int]:
        """The SDK usage object ``u`` (None: nothing reported) as the protocol's counts."""
        if u is None:
            return {}
        out = {
            "input_tokens": int(getattr(u, self.input, 0) or 0),
            "output_tokens": int(getattr(u, self.output, 0) or 0),
            "total_tokens": int(getattr(u, "total_tokens", 0) or 0),
        }
        reasoning = getattr(getattr(u, self.output_details, None), "reasoning_tokens", None)
        if reasoning:
            out["reasoning_tokens"] = int(reasoning)
        cached = getattr(getattr(u, self.input_details, None), "cached_tokens", None)
        if cached:
            out["cached_input_tokens"] = int(cached)
        return out


CHAT_USAGE = UsageNames(
    "prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"
)
RESPONSES_USAGE = UsageNames(
    "input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"
)
