"""The world-model HTTP protocol (``vical-wm/1``): one JSON request, one JSON reply.

``POST <endpoint>/v1/wm/predict`` with ``Content-Type: application/json``::

    {"protocol": "vical-wm/1",
     "case": "3f9c0a1d2b7e4c55",             # an opaque id (for logs only)
     "env": "taxi",                           # the environment key
     "actions": ["Down", "Up", ...],          # the environment's action vocabulary
     "context": {"frames": ["<base64 PNG>", ...],   # oldest first, last = now
                 "actions": ["Up", ...]},          # action i leads from frame i to i+1
     "intervention": ["Right", "Right", ...]}       # the actions to predict, in order

``case`` is an opaque id, fresh for every evaluation (it names no published case).
An intervention entry may be ``"(no action)"`` (:data:`vical.wm.cases.NO_ACTION`):
no decision is taken at that step (the no-op control, in a game without a NOOP
action: such a world changes only when a decision is taken).

The reply (status 200)::

    {"frames": ["<base64 PNG>", ...]}   # one RGB frame per intervention action

Any other status, or a reply without exactly that many decodable frames, is an
error that stops the evaluation (it names the case and what came back).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import numpy.typing as npt

from vical.wm.cases import NO_ACTION, Request
from vical.wm.sim import decode_png, encode_png

PROTOCOL = "vical-wm/1"
PATH = "/v1/wm/predict"


class ProtocolError(RuntimeError):
    """A world-model endpoint answered outside the protocol."""


def request_body(request: Request) -> dict[str, Any]:
    """A request as the protocol's JSON object."""
    return {
        "protocol": PROTOCOL,
        "case": request.case,
        "env": request.env,
        "actions": list(request.actions),
        "context": {
            "frames": [base64.b64encode(encode_png(f)).decode() for f in request.context],
            "actions": list(request.context_actions),
        },
        "intervention": list(request.intervention),
    }


def parse_request(body: dict[str, Any]) -> Request:
    """A protocol request back into a :class:`Request` (the server side)."""
    if body.get("protocol") != PROTOCOL:
        raise ProtocolError(f"protocol {body.get('protocol')!r} is not {PROTOCOL!r}")
    try:
        ctx = body["context"]
        frames = [decode_png(base64.b64decode(s)) for s in ctx["frames"]]
        req = Request(
            case=str(body["case"]),
            env=str(body["env"]),
            actions=[str(a) for a in body["actions"]],
            context=frames,
            context_actions=[str(a) for a in ctx["actions"]],
            intervention=[str(a) for a in body["intervention"]],
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed world-model request: {e}") from e
    if not req.context:
        raise ProtocolError("a world-model request needs at least one context frame")
    unknown = [a for a in req.intervention if a not in req.actions and a != NO_ACTION]
    if unknown:
        raise ProtocolError(f"intervention actions {unknown} are not in the vocabulary")
    return req


def reply_body(frames: list[npt.NDArray[np.uint8]]) -> dict[str, Any]:
    return {"frames": [base64.b64encode(encode_png(f)).decode() for f in frames]}


def parse_reply(body: Any, request: Request) -> list[npt.NDArray[np.uint8]]:
    if not isinstance(body, dict) or not isinstance(body.get("frames"), list):
        raise ProtocolError(f"{request.case}: the reply has no 'frames' list")
    try:
        frames = [decode_png(base64.b64decode(s)) for s in body["frames"]]
    except (TypeError, ValueError, OSError) as e:
        raise ProtocolError(f"{request.case}: a reply frame is not a base64 PNG ({e})") from e
    if len(frames) != len(request.intervention):
        raise ProtocolError(
            f"{request.case}: {len(frames)} frames for {len(request.intervention)} actions"
        )
    return frames


def post_predict(endpoint: str, request: Request, timeout: float) -> list[npt.NDArray[np.uint8]]:
    """POST one request to ``endpoint`` and return its predicted frames."""
    data = json.dumps(request_body(request)).encode()
    req = urllib.request.Request(
        endpoint + PATH, data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raise ProtocolError(
            f"{request.case}: {endpoint}{PATH} answered {e.code}: {e.read()[:200]!r}"
        ) from e
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as e:
        raise ProtocolError(f"{request.case}: {endpoint}{PATH}: {e}") from e
    return parse_reply(body, request)


# -- the baseline server's side -----------------------------------------------------
SERVER_MODES = ("copy-last", "blank")


def check_server_mode(mode: str) -> str:
    if mode not in SERVER_MODES:
        raise ValueError(f"world-model mode {mode!r} is not one of {', '.join(SERVER_MODES)}")
    return mode


def serve_predict(raw: bytes, mode: str) -> tuple[int, dict[str, Any]]:
    """(status, JSON reply) of the baseline server for one ``/v1/wm/predict`` request.

    ``copy-last`` answers the last context frame once per action; ``blank`` answers
    black frames of the context's size (a model that draws nothing).
    """
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ProtocolError("the body must be a JSON object")
        req = parse_request(body)
    except (ProtocolError, json.JSONDecodeError) as e:
        return 400, {"error": {"message": f"bad request: {e}"}}
    last = req.context[-1]
    frame = last if mode == "copy-last" else np.zeros_like(last)
    return 200, reply_body([frame for _ in req.intervention])
