"""The teams' side of the hub: register a key, upload a bundle, follow its status.

Used by ``vical submit RUN --key KEY --to URL``, ``vical hub register`` and
``vical hub status``. The upload streams the file (never read whole into memory),
signed over its sha256; a connection that breaks mid-upload is retried (a bundle the
hub already holds is answered with its existing submission, so a retry never makes a
second one).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from vical.hub import auth
from vical.hub.config import HubError
from vical.submit.keys import load_private, public_pem

CHUNK = 1024 * 1024
FINAL = ("accepted", "rejected", "failed", "withdrawn")


def _url(base: str, path: str) -> str:
    return base.rstrip("/") + path


def _error(r: httpx.Response) -> HubError:
    try:
        msg = r.json().get("error") or r.text
    except ValueError:
        msg = r.text
    return HubError(f"the hub answered {r.status_code}: {' '.join(str(msg).split())[:400]}")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def register(url: str, key_file: Path, team: str, timeout: float = 30.0) -> dict[str, Any]:
    """Send the key's public half for a maintainer to approve."""
    key = load_private(key_file)
    body = json.dumps({"team": team, "public_key": public_pem(key.public_key()).decode()}).encode()
    headers = auth.signed_headers(key, "POST", "/api/keys", hashlib.sha256(body).hexdigest())
    try:
        r = httpx.post(_url(url, "/api/keys"), content=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise HubError(f"cannot reach the hub at {url}: {e}") from None
    if r.status_code not in (200, 201):
        raise _error(r)
    return dict(r.json())


def upload(
    url: str,
    bundle: Path,
    key_file: Path,
    retries: int = 5,
    timeout: float = 600.0,
    on_retry: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Upload ``bundle``; the submission's status (new, or the one this bundle made before)."""
    key = load_private(key_file)
    bundle = Path(bundle)
    if not bundle.is_file():
        raise HubError(f"{bundle}: no such bundle file")
    sha = file_sha256(bundle)
    size = bundle.stat().st_size
    last = ""
    for attempt in range(retries + 1):
        headers = auth.signed_headers(key, "PUT", "/api/submissions", sha)
        headers |= {"Content-Type": "application/gzip", "Content-Length": str(size)}
        try:
            r = httpx.put(
                _url(url, "/api/submissions"),
                content=_chunks(bundle),
                headers=headers,
                timeout=timeout,
            )
        except httpx.HTTPError as e:
            last = f"{type(e).__name__}: {e}"
        else:
            if r.status_code in (200, 202):
                return dict(r.json())
            if r.status_code < 500 and r.status_code != 429:
                raise _error(r)
            last = str(_error(r))
        if attempt < retries:
            if on_retry is not None:
                on_retry(f"upload interrupted ({last}); retrying")
            time.sleep(min(10.0, 0.5 * 2**attempt))
    raise HubError(f"cannot upload {bundle} to {url} after {retries + 1} tries: {last}")


def status(url: str, sid: str, timeout: float = 30.0) -> dict[str, Any]:
    try:
        r = httpx.get(_url(url, f"/api/submissions/{sid}"), timeout=timeout)
    except httpx.HTTPError as e:
        raise HubError(f"cannot reach the hub at {url}: {e}") from None
    if r.status_code != 200:
        raise _error(r)
    return dict(r.json())


def progress_line(s: dict[str, Any]) -> str:
    p = s.get("progress") or {}
    prog = f", {p['done']}/{p['total']} episodes replayed" if p.get("total") else ""
    verdict = f": {s['verdict']}" if s.get("verdict") else ""
    return f"submission {s['id']}: {s['state']}{prog}{verdict}"


def follow(
    url: str,
    sid: str,
    on_line: Callable[[str], None],
    interval: float = 1.0,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Poll the status until it is final, calling ``on_line`` with each new progress line."""
    start = time.monotonic()
    shown = ""
    while True:
        try:
            s = status(url, sid)
        except HubError as e:
            if "cannot reach" not in str(e):
                raise
            s = None  # the hub restarting: try again
        if s is not None:
            line = progress_line(s)
            if line != shown:
                on_line(line)
                shown = line
            if s["state"] in FINAL:
                return s
        if timeout is not None and time.monotonic() - start > timeout:
            raise HubError(
                f"submission {sid} is not final after {timeout:g} s; "
                f"see `vical hub status {sid} --to {url}`"
            )
        time.sleep(interval)
