"""How a request to a model API can fail, in one vocabulary for every backend.

A backend turns whatever its SDK raises (or a reply it cannot read) into an
:class:`ApiFailure`. Its ``kind`` decides what the protocol
(:class:`vical.agent.protocol.ProtocolAgent`) does next:

* :data:`RETRYABLE` — a connection error, a timeout, HTTP 408/409/429 or 5xx,
  or a *malformed reply* (status 200 but a body that is not a reply of the
  provider's API, see :func:`malformed_reply`): the same request is sent again
  after a backoff (:mod:`vical.agent.retry`);
* :data:`CONTEXT_LENGTH` — the provider says the conversation no longer fits
  (:func:`looks_like_context_error`): the episode ends with ``token_overflow``;
* :data:`FATAL` — anything else: the decision ends with ``api_error``.

Its ``reason`` says what happened, finer than the kind, and is recorded in the
``api_error`` log records. The two configuration errors a run can meet before
its first move are here too: :class:`ApiKeyMissing` (raised by
:func:`vical.agent.credentials.resolve_api_key`) and :class:`PreflightError`,
whose one-line message :func:`preflight_message` writes.
"""

from __future__ import annotations

from vical.agent.redact import redact_text
from vical.errors import AgentConfigError

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


def looks_like_context_error(message: str, code: str | None = None) -> bool:
    """True when an error's message or code says the conversation is too long."""
    text = f"{code or ''} {message}".lower()
    return any(p in text for p in _CONTEXT_PHRASES)


def preflight_message(
    e: ApiFailure,
    *,
    endpoint: str | None,
    model: str | None,
    key_env: str,
    request_timeout: float | None,
    api_label: str,
    secrets: tuple[str, ...] = (),
) -> str:
    """The one line a :class:`PreflightError` carries: the endpoint (already
    redacted) and the model, what failed, and what to check. The server's message
    is redacted of ``secrets`` (and anything shaped like a credential);
    ``key_env`` names the variable the key was read from."""
    where = endpoint or "the provider's default endpoint"
    head = f"{where} (model {model!r})"
    said = " ".join(redact_text(e.message, secrets).split())[:200]
    status = e.status
    if e.reason == TIMEOUT:
        what = (
            f"no reply within {request_timeout:g} s" if request_timeout else "the request timed out"
        )
        advice = "the server may be hung or overloaded; check it, or raise --request-timeout"
    elif e.reason == CONNECTION:
        what = f"cannot connect ({said})"
        advice = "is the server running? check --endpoint"
    elif e.reason == MALFORMED_REPLY:
        what = f"the endpoint did not answer like {api_label} server ({said})"
        advice = "check that --endpoint points at the API itself and that --backend matches it"
    elif status in (401, 403):
        what = f"HTTP {status}: the key in ${key_env} was refused ({said})"
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
