"""The three provider APIs on the wire: requests read, replies and errors written.

``chat`` is OpenAI-compatible chat completions (``/v1/chat/completions``),
``responses`` the OpenAI Responses API (``/v1/responses``) and ``gemini``
Gemini's ``generateContent`` (``/v1beta/models/{model}:generateContent``).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from vical.serve.conversation import BadRequest, Conversation, decode_base64

CONTEXT_LIMIT = 32768
_GEMINI_RE = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):generateContent$")


def route(path: str) -> tuple[str, str] | None:
    """(API name, model named in the path or "") of a POST path; None for no route."""
    if path == "/v1/chat/completions":
        return "chat", ""
    if path == "/v1/responses":
        return "responses", ""
    gm = _GEMINI_RE.match(path)
    return ("gemini", gm.group(1)) if gm else None


# ------------------------------------------------------------------ reading requests

PartReader = Callable[[Conversation, Any], None]


def _text_part(conv: Conversation, part: Any) -> None:
    conv.texts.append(part.get("text", ""))


def _chat_image(conv: Conversation, part: Any) -> None:
    conv.add_data_url(part["image_url"]["url"])


def _chat_video(conv: Conversation, part: Any) -> None:
    conv.add_data_url(part["video_url"]["url"])


def _responses_image(conv: Conversation, part: Any) -> None:
    conv.add_data_url(part["image_url"])


_CHAT_PARTS: dict[str, PartReader] = {
    "text": _text_part,
    "image_url": _chat_image,
    "video_url": _chat_video,
}
_RESPONSES_PARTS: dict[str, PartReader] = {
    "input_text": _text_part,
    "input_image": _responses_image,
}


def _read_messages(
    conv: Conversation,
    messages: list[Any],
    parts: Mapping[str, PartReader],
    part_label: str,
    is_reply: Callable[[Any], bool],
) -> Conversation:
    """Read OpenAI-style messages (``role``, ``content`` text or typed parts) into ``conv``.

    A message ``is_reply`` is only counted; ``system`` and ``developer``
    messages are counted and read; the end of a ``user`` message closes the
    first turn. A part type missing from ``parts`` is a :class:`BadRequest`
    naming the ``part_label``.
    """
    for msg in messages:
        role = msg.get("role")
        if is_reply(msg):
            conv.n_assistant += 1
            continue
        if role in ("system", "developer"):
            conv.n_system += 1
        content = msg.get("content")
        if isinstance(content, str):
            conv.texts.append(content)
        else:
            for part in content or []:
                kind = part.get("type")
                read = parts.get(kind) if isinstance(kind, str) else None
                if read is None:
                    raise BadRequest(f"unsupported {part_label} part type {kind!r}")
                read(conv, part)
        if role == "user":
            conv.end_user_message()
    return conv


def _is_chat_reply(msg: Any) -> bool:
    return bool(msg.get("role") == "assistant")


def _is_responses_reply(item: Any) -> bool:
    role = item.get("role")
    return bool(
        role == "assistant" or (item.get("type") in ("reasoning", "message") and role is None)
    )


def read_chat(body: dict[str, Any], path_model: str = "") -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    return _read_messages(conv, messages, _CHAT_PARTS, "content", _is_chat_reply)


def read_responses(body: dict[str, Any], path_model: str = "") -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    if body.get("instructions"):
        conv.n_system += 1
    items = body.get("input")
    if isinstance(items, str):
        conv.texts.append(items)
        return conv
    if not isinstance(items, list) or not items:
        raise BadRequest("'input' must be a string or a non-empty list")
    return _read_messages(conv, items, _RESPONSES_PARTS, "input", _is_responses_reply)


def read_gemini(body: dict[str, Any], path_model: str) -> Conversation:
    conv = Conversation(model=path_model)
    if body.get("systemInstruction") or body.get("system_instruction"):
        conv.n_system += 1
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise BadRequest("'contents' must be a non-empty list")
    for c in contents:
        if c.get("role") == "model":
            conv.n_assistant += 1
            continue
        for part in c.get("parts") or []:
            if "text" in part:
                conv.texts.append(part["text"])
                continue
            blob = part.get("inlineData") or part.get("inline_data")
            if blob is None:
                raise BadRequest(f"unsupported part {sorted(part)}")
            mime = blob.get("mimeType") or blob.get("mime_type") or ""
            conv.add_media(mime, decode_base64(blob.get("data", ""), "inlineData"))
        conv.end_user_message()
    return conv


_READERS: dict[str, Callable[[dict[str, Any], str], Conversation]] = {
    "chat": read_chat,
    "responses": read_responses,
    "gemini": read_gemini,
}


def read_request(api: str, body: dict[str, Any], path_model: str) -> Conversation:
    """The conversation in a request to ``api`` (see :func:`route`); :class:`BadRequest`."""
    return _READERS[api](body, path_model)


# ------------------------------------------------------------------ errors


def error_body(api: str, status: int, message: str) -> dict[str, Any]:
    """The provider's error object for an HTTP ``status``."""
    if api == "gemini":
        names = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
        }
        return {"error": {"code": status, "message": message, "status": names.get(status, "")}}
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
        500: "server_error",
    }
    code = {429: "rate_limit_exceeded", 401: "invalid_api_key", 404: "model_not_found"}.get(status)
    return {"error": {"message": message, "type": kinds.get(status), "param": None, "code": code}}


def unknown_model_body(api: str, model: str, served: str) -> dict[str, Any]:
    """The provider's error (HTTP 404) for a model name it does not serve; ``served``
    says which names it does."""
    if api == "gemini":
        message = f"models/{model} is not found; this server serves {served}."
    else:
        message = f"The model `{model}` does not exist; this server serves {served}."
    return error_body(api, 404, message)


def context_error_body(api: str, conv: Conversation) -> dict[str, Any]:
    """The provider's context-length error (HTTP 400) for a conversation."""
    used = max(conv.estimated_tokens(), CONTEXT_LIMIT + 1)
    if api == "gemini":
        return {
            "error": {
                "code": 400,
                "message": f"The input token count ({used}) exceeds the maximum number of "
                f"tokens allowed ({CONTEXT_LIMIT}).",
                "status": "INVALID_ARGUMENT",
            }
        }
    return {
        "error": {
            "message": f"This model's maximum context length is {CONTEXT_LIMIT} tokens. "
            f"However, your messages resulted in {used} tokens. "
            "Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages" if api == "chat" else "input",
            "code": "context_length_exceeded",
        }
    }


# ------------------------------------------------------------------ replies


def _rid(prefix: str) -> str:
    return f"{prefix}{random.getrandbits(64):016x}"


def chat_reply(
    body: dict[str, Any], conv: Conversation, text: str, seen: str, n_in: int, n_out: int
) -> dict[str, Any]:
    return {
        "id": _rid("chatcmpl-vical-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": seen},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
    }


def responses_reply(
    body: dict[str, Any], conv: Conversation, text: str, seen: str, n_in: int, n_out: int
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if body.get("reasoning"):
        output.append(
            {
                "type": "reasoning",
                "id": _rid("rs_"),
                "summary": [{"type": "summary_text", "text": seen}],
            }
        )
    output.append(
        {
            "type": "message",
            "id": _rid("msg_"),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    )
    return {
        "id": _rid("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": conv.model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": body.get("temperature"),
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": {
            "input_tokens": n_in,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": n_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": n_in + n_out,
        },
    }


def gemini_reply(
    body: dict[str, Any], conv: Conversation, text: str, seen: str, n_in: int, n_out: int
) -> dict[str, Any]:
    # protobuf JSON: the REST API accepts camelCase and snake_case field names alike
    gen = body.get("generationConfig") or body.get("generation_config") or {}
    thinking = gen.get("thinkingConfig") or gen.get("thinking_config") or {}
    parts: list[dict[str, Any]] = []
    n_thought = 0
    if thinking.get("includeThoughts") or thinking.get("include_thoughts"):
        parts.append({"text": seen, "thought": True})
        n_thought = max(1, len(seen) // 4)
    parts.append({"text": text})
    usage = {
        "promptTokenCount": n_in,
        "candidatesTokenCount": n_out,
        "totalTokenCount": n_in + n_out + n_thought,
    }
    if n_thought:
        usage["thoughtsTokenCount"] = n_thought
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": conv.model,
        "responseId": _rid(""),
    }


ReplyBuilder = Callable[[dict[str, Any], Conversation, str, str, int, int], dict[str, Any]]
_REPLIES: dict[str, ReplyBuilder] = {
    "chat": chat_reply,
    "responses": responses_reply,
    "gemini": gemini_reply,
}


def reply_body(
    api: str, body: dict[str, Any], conv: Conversation, text: str, seen: str, n_in: int, n_out: int
) -> dict[str, Any]:
    """The provider's status-200 reply to request ``body``: final ``text``, reasoning ``seen``
    (where the request asked for it), ``n_in`` and ``n_out`` tokens."""
    return _REPLIES[api](body, conv, text, seen, n_in, n_out)
