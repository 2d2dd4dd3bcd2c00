"""The API key and the endpoint's credentials: where they come from, what hides them.

The key is read from an environment variable (:func:`resolve_api_key`); a
keyless local server — an endpoint on this machine (:func:`is_local_endpoint`)
— gets the fixed :data:`LOCAL_DUMMY_KEY` when no variable was named. The key
and the credentials of the endpoint URL (userinfo, ``key=``-style query values)
go only into the SDK client: the agent reports the endpoint through
:func:`vical.agent.redact.redact_url`, and every string a server can influence
passes through :func:`vical.agent.redact.redact_text` with
:func:`secrets_for`'s strings before it is recorded or kept.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from urllib.parse import urlparse

from vical.agent.failures import ApiKeyMissing
from vical.agent.redact import url_secrets

LOCAL_DUMMY_KEY = "vical-local-no-key"


def is_local_endpoint(url: str | None) -> bool:
    """True for a URL whose host is this machine (localhost, 127.0.0.0/8, ::1)."""
    if not url:
        return False
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(
    backend: str, api_key_env: str | None, default_env: str, endpoint: str | None
) -> str:
    """Read the API key from the environment.

    ``api_key_env`` names the variable (default ``default_env``). When no
    variable was named and the default one is unset, a keyless local server
    (an endpoint on localhost) gets a fixed dummy key; anywhere else a missing
    key is an error naming the variable.
    """
    name = api_key_env or default_env
    key = os.environ.get(name)
    if key:
        return key
    if api_key_env is None and is_local_endpoint(endpoint):
        return LOCAL_DUMMY_KEY
    raise ApiKeyMissing(
        f"backend {backend}: the API key environment variable {name} is not set. "
        f"Export {name}=<your key>, or name another variable with --api-key-env. "
        "(A server on localhost needs no key when --api-key-env is not given.)"
    )


def secrets_for(api_key: str, endpoint: str | None) -> tuple[str, ...]:
    """What redaction must remove: the key, the endpoint's credentials, and the
    Basic-auth form of its userinfo (an HTTP client sends that header)."""
    found = [api_key, *url_secrets(endpoint)]
    if endpoint:
        parts = urlparse(endpoint)
        if parts.username is not None or parts.password is not None:
            pair = f"{parts.username or ''}:{parts.password or ''}"
            found.append(base64.b64encode(pair.encode()).decode("ascii"))
    return tuple(s for s in found if s and s != LOCAL_DUMMY_KEY)
