"""Request signatures: a team signs each request with its Ed25519 key
(:mod:`vical.submit.keys`), the hub checks it against the key a maintainer approved.

The signed text names the method, the path, the time and the sha256 of the body
(for an upload, of the bundle)::

    vical-hub-v1\\n<METHOD>\\n<path>\\n<unix time>\\n<sha256 hex of the body>

and travels in three headers: ``X-Vical-Key`` (key id), ``X-Vical-Time``,
``X-Vical-Signature`` (base64). A signature older or newer than five minutes is
refused, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from vical.submit.keys import check, key_id, sign

WINDOW = 300.0
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
KEY, TIME, SIG, BODY = "X-Vical-Key", "X-Vical-Time", "X-Vical-Signature", "X-Vical-Sha256"


def message(method: str, path: str, when: str, body_sha256: str) -> bytes:
    return f"vical-hub-v1\n{method.upper()}\n{path}\n{when}\n{body_sha256}".encode()


def signed_headers(
    key: Ed25519PrivateKey, method: str, path: str, body_sha256: str = EMPTY_SHA256
) -> dict[str, str]:
    when = str(int(time.time()))
    return {
        KEY: key_id(key.public_key()),
        TIME: when,
        SIG: sign(key, message(method, path, when, body_sha256)),
        BODY: body_sha256,
    }


def check_request(
    pub: Ed25519PublicKey,
    method: str,
    path: str,
    when: str,
    signature: str,
    body_sha256: str,
    now: float | None = None,
) -> str | None:
    """Why a signed request is refused (None when it is good)."""
    try:
        t = float(when)
    except ValueError:
        return f"{TIME} {when!r} is not a unix time"
    if abs((now or time.time()) - t) > WINDOW:
        return f"{TIME} is more than {WINDOW:g} s away from the hub's clock; check the clock"
    if not check(pub, message(method, path, when, body_sha256), signature):
        return "the request signature does not match the registered key"
    return None
