"""When to send a failed request again, and how long to wait first.

A request that fails with a retryable :class:`~vical.agent.failures.ApiFailure`
(a connection error, a timeout — no reply within ``request_timeout``,
:data:`DEFAULT_REQUEST_TIMEOUT` by default —, HTTP 408/409/429 or 5xx, or a
malformed reply) is sent again, up to ``transport_retries`` times (3), after
:func:`backoff_delay`: an exponential backoff with jitter, at most
``retry_max_delay`` and at least the server's ``Retry-After``
(:func:`parse_retry_after`). A ``Retry-After`` longer than ``max_retry_after``
(:data:`DEFAULT_MAX_RETRY_AFTER`) is not waited for: the decision ends with
``api_error`` at once, and its record says why (``gave_up``). The loop itself is
the agent's (:meth:`vical.agent.protocol.ProtocolAgent.act`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

DEFAULT_REQUEST_TIMEOUT = 120.0  # seconds per HTTP request
DEFAULT_MAX_RETRY_AFTER = 120.0  # longest Retry-After the protocol waits for


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
        try:
            when = parsedate_to_datetime(ra)
        except (TypeError, ValueError):
            return None
        return max(when.timestamp() - time.time(), 0.0)


def backoff_delay(
    attempt: int,
    base_delay: float,
    max_delay: float,
    rng: random.Random,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait before resending after failed ``attempt`` (0 first):
    ``base_delay * 2**attempt`` with jitter (×0.5 to ×1.5, drawn from ``rng``), at
    most ``max_delay``, and never shorter than the server's ``retry_after`` (which
    the caller has already held to its ``max_retry_after``)."""
    base = base_delay * 2.0**attempt
    wait = min(max_delay, base * (0.5 + rng.random()))
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait
