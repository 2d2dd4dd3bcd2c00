"""A local model server speaking three provider APIs, answering with a baseline policy.

Endpoints (JSON over HTTP, standard library only):

* ``POST /v1/chat/completions`` — OpenAI-compatible chat completions
  (``image_url`` and OpenRouter's ``video_url`` parts);
* ``POST /v1/responses`` — the OpenAI Responses API (``input_image``);
* ``POST /v1beta/models/{model}:generateContent`` — Gemini's native REST
  call (``inlineData`` images and MP4 video), so ``google-genai`` can be
  pointed at it with ``http_options.base_url``;
* ``GET /v1/models`` — the built-in policy names;
* ``GET /stats`` — request counters as JSON.

Like a real model it reads the request: it decodes every image (a payload
that is not a valid image is rejected with HTTP 400), checks every video is
an MP4, finds the legal actions on the prompt's ``Legal actions:`` line and
answers ``[Action:<name>]`` followed by one line of explanation. The
*model* name picks the policy:

``random`` (and any name not listed here)
    a legal action drawn from a generator seeded by the server seed and the
    request body, so the same request always gets the same answer;
``first``
    always the first legal action;
``expert``
    a scripted expert where one exists (classic-control controllers, a
    breadth-first plan for Toy Text and MiniGrid; see :class:`ExpertPolicy`),
    otherwise the random policy;
``fault-<kind>[-<when>]``
    misbehave, for tests and smoke tests. Kinds:

    * the model's fault, in a well-formed reply: ``malformed`` (no marker),
      ``illegal`` (a name outside the list), ``conflict`` (two different
      markers), ``empty`` (empty text), ``huge`` (a legal marker line followed
      by about 5 MB of text, and as much visible reasoning);
    * HTTP errors: ``400``, ``429`` and ``500`` (429 carries ``Retry-After``),
      ``context-length`` (the provider's context-length error), ``401-echo``
      (401 whose message repeats the credential the request carried: the
      bearer token, ``x-goog-api-key`` or ``key=``, as careless proxies do);
    * broken infrastructure, all with status 200: ``not-json`` (``text/plain``
      body ``OK``), ``html`` (a ``text/html`` page), ``binary`` (JSON content
      type, bytes that are not UTF-8), ``null`` (the JSON ``null``),
      ``schemaless`` (the JSON object ``{}``), ``empty-body`` (no body at all);
    * time: ``slow-<ms>`` (answer normally after a delay), ``hang`` (accept the
      request and never answer; the connection is dropped when the server
      stops, or after an hour).

    ``<when>``: ``once`` (first request under this model name), ``<n>``
    (first n requests), ``always`` (the default) or, for ``context-length``,
    ``after-<n>`` (once the conversation holds n earlier replies). Counts are
    per model name over the server's life. Model-name faults apply to every
    request, text-only ones included.

Server-wide options make any model misbehave at a given rate
(``fault_rate``, drawing a kind from ``fault_kinds``) and answer after a fixed
``delay``. The rate applies only to requests that carry at least one image,
that is to the turns of an episode: a text-only request, such as the
preflight check an evaluation sends before its first episode, is always
answered normally, so injected faults land in the middle of a run.
``retry_after`` sets the ``Retry-After`` seconds of a 429.
Run it with ``python -m vical.serve --port 8000`` or ``vical serve-baseline``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from PIL import Image

from vical.agent.prompts import find_actions_line, next_turn_text

POLICIES = ("random", "first", "expert")
FAULT_KINDS = (
    "400",
    "429",
    "500",
    "context-length",
    "malformed",
    "illegal",
    "conflict",
    "empty",
    "slow",
    "hang",
    "not-json",
    "html",
    "binary",
    "null",
    "schemaless",
    "empty-body",
    "401-echo",
    "huge",
)
_FAULT_RE = re.compile(
    "^fault-("
    + "|".join(re.escape(k) for k in sorted(FAULT_KINDS, key=len, reverse=True))
    + r")(?:-(once|always|after-\d+|\d+))?$"
)
HANG_LIMIT = 3600.0  # seconds a "hang" fault holds a request when the server is not stopped
HUGE_CHARS = 5 * 1024 * 1024  # characters of filler in a "huge" reply
_GEMINI_RE = re.compile(r"^/v1(?:beta|alpha)?/models/([^/:]+):generateContent$")
_MOVE_BEFORE, _MOVE_AFTER = next_turn_text("\0").split("\0")
_MOVE_RE = re.compile("^" + re.escape(_MOVE_BEFORE) + "(.+?)" + re.escape(_MOVE_AFTER) + "$", re.M)
_ENV_ID_RE = re.compile(r"\(environment id: ([^)]+)\)")
CONTEXT_LIMIT = 32768


def _b64decode(text: str) -> bytes:
    """Decode standard or URL-safe base64 (google-genai sends the URL-safe alphabet)."""
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(text.encode("ascii"))
    return base64.b64decode(text, validate=True)


def check_fault_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """The fault kinds as a tuple; ValueError naming any unknown kind and the known ones."""
    found = tuple(kinds)
    bad = [k for k in found if k not in FAULT_KINDS]
    if bad:
        raise ValueError(
            f"unknown fault kind{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}; "
            f"known kinds: {', '.join(FAULT_KINDS)}"
        )
    return found


def parse_fault_kinds(text: str) -> tuple[str, ...]:
    """Parse a comma-separated list of fault kinds (see :func:`check_fault_kinds`)."""
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if not kinds:
        raise ValueError(f"no fault kind given; known kinds: {', '.join(FAULT_KINDS)}")
    return check_fault_kinds(kinds)


class BadRequest(Exception):
    """The request could not be read (HTTP 400)."""


@dataclass
class Conversation:
    """What the server read out of one request, whatever the API."""

    model: str
    texts: list[str] = field(default_factory=list)  # user text parts in order
    images: list[bytes] = field(default_factory=list)
    videos: list[bytes] = field(default_factory=list)
    n_assistant: int = 0
    n_system: int = 0
    image_sizes: list[tuple[int, int]] = field(default_factory=list)
    first_turn_images: int | None = None  # images in the first user message

    def end_user_message(self) -> None:
        if self.first_turn_images is None:
            self.first_turn_images = len(self.images)

    @property
    def start_frame(self) -> bytes | None:
        """The last image of the first user message: the episode's start frame."""
        n = self.first_turn_images
        return self.images[n - 1] if n else None

    def moves(self) -> list[str]:
        """Actions applied so far, read from the "your move … has been applied" lines."""
        return [m.group(1) for t in self.texts for m in _MOVE_RE.finditer(t)]

    def add_media(self, mime: str, data: bytes) -> None:
        if mime.startswith("image/"):
            try:
                with Image.open(io.BytesIO(data)) as im:
                    im.load()
                    self.image_sizes.append(im.size)
            except Exception as e:
                raise BadRequest(f"image {len(self.images) + 1} could not be decoded: {e}") from e
            self.images.append(data)
        elif mime.startswith("video/"):
            if mime != "video/mp4" or data[4:8] != b"ftyp":
                raise BadRequest(f"video {len(self.videos) + 1} is not an MP4 file")
            self.videos.append(data)
        else:
            raise BadRequest(f"unsupported media type {mime!r}")

    def add_data_url(self, url: str) -> None:
        m = re.match(r"^data:([^;,]+);base64,(.*)$", url, re.DOTALL)
        if not m:
            raise BadRequest("media must be a base64 data URL")
        try:
            data = _b64decode(m.group(2))
        except ValueError as e:
            raise BadRequest(f"media data is not valid base64: {e}") from e
        self.add_media(m.group(1), data)

    def estimated_tokens(self) -> int:
        return sum(len(t) for t in self.texts) // 4 + 85 * len(self.images) + 300 * len(self.videos)


# ------------------------------------------------------------------ reading requests


def _read_chat(body: dict[str, Any]) -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for msg in messages:
        role = msg.get("role")
        if role == "assistant":
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
                if kind == "text":
                    conv.texts.append(part.get("text", ""))
                elif kind == "image_url":
                    conv.add_data_url(part["image_url"]["url"])
                elif kind == "video_url":
                    conv.add_data_url(part["video_url"]["url"])
                else:
                    raise BadRequest(f"unsupported content part type {kind!r}")
        if role == "user":
            conv.end_user_message()
    return conv


def _read_responses(body: dict[str, Any]) -> Conversation:
    conv = Conversation(model=str(body.get("model", "")))
    if body.get("instructions"):
        conv.n_system += 1
    items = body.get("input")
    if isinstance(items, str):
        conv.texts.append(items)
        return conv
    if not isinstance(items, list) or not items:
        raise BadRequest("'input' must be a string or a non-empty list")
    for item in items:
        role = item.get("role")
        if role == "assistant" or (item.get("type") in ("reasoning", "message") and role is None):
            conv.n_assistant += 1
            continue
        if role in ("system", "developer"):
            conv.n_system += 1
        content = item.get("content")
        if isinstance(content, str):
            conv.texts.append(content)
        else:
            for part in content or []:
                kind = part.get("type")
                if kind == "input_text":
                    conv.texts.append(part.get("text", ""))
                elif kind == "input_image":
                    conv.add_data_url(part["image_url"])
                else:
                    raise BadRequest(f"unsupported input part type {kind!r}")
        if role == "user":
            conv.end_user_message()
    return conv


def _read_gemini(body: dict[str, Any], model: str) -> Conversation:
    conv = Conversation(model=model)
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
            try:
                data = _b64decode(blob.get("data", ""))
            except ValueError as e:
                raise BadRequest(f"inlineData is not valid base64: {e}") from e
            conv.add_media(mime, data)
        conv.end_user_message()
    return conv


# ------------------------------------------------------------------ the server


@dataclass
class Fault:
    kind: str
    arg: int | None = None  # slow: milliseconds


class ExpertPolicy:
    """Scripted experts behind the ``expert`` model name.

    The task is recognised from the prompt's environment id and the start
    frame (compared with each candidate task's start frame, encoded the way
    the protocol encodes frames); the moves applied so far are read from the
    later turns. Classic-control tasks get their scripted controller, run on
    a fresh environment replayed through those moves; grid worlds (Toy Text,
    MiniGrid) follow a shortest passing plan found by breadth-first search.
    Anywhere else, or off the plan, the answer falls back to the random
    policy, and the reasoning line says so.
    """

    SEARCH_FAMILIES = ("toytext", "minigrid")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._start_frames: dict[str, dict[str, str]] = {}  # paper id -> {jpeg sha: task id}
        self._plans: dict[str, list[str] | None] = {}

    def _identify(self, conv: Conversation) -> str | None:
        from vical.agent.protocol import encode_jpeg
        from vical.envs import make_env
        from vical.spec import all_tasks

        m = next((m for t in conv.texts if (m := _ENV_ID_RE.search(t))), None)
        start = conv.start_frame
        if m is None or start is None:
            return None
        paper_id = m.group(1)
        with self.lock:
            if paper_id not in self._start_frames:
                table: dict[str, str] = {}  # start frame sha256 -> task id
                for task in all_tasks():
                    if task.env.paper_id == paper_id:
                        with make_env(task) as env:
                            jpeg = encode_jpeg(env.reset())
                        table.setdefault(hashlib.sha256(jpeg).hexdigest(), task.id)
                self._start_frames[paper_id] = table
            return self._start_frames[paper_id].get(hashlib.sha256(start).hexdigest())

    def action(self, conv: Conversation) -> tuple[str | None, str]:
        """(action or None, a note for the reasoning line)."""
        from vical.spec import get_task

        task_id = self._identify(conv)
        if task_id is None:
            return None, "Expert: task not recognised."
        task = get_task(task_id)
        moves = conv.moves()
        try:
            from vical.demos.experts import CONTROLLERS, bfs_expert
        except ImportError:
            return None, "Expert: vical.demos is not available."
        if task.env.env in CONTROLLERS:
            from vical.envs import make_env

            with make_env(task) as env:
                env.reset()
                for a in moves:
                    env.step(a)
                return CONTROLLERS[task.env.env](env), f"Expert: controller on {task_id}."
        if task.env.family not in self.SEARCH_FAMILIES:
            return None, f"Expert: no expert for {task_id}."
        with self.lock:
            if task_id not in self._plans:
                found = bfs_expert(task)
                self._plans[task_id] = found.actions if found else None
            plan = self._plans[task_id]
        if plan is None or moves != plan[: len(moves)] or len(moves) >= len(plan):
            return None, f"Expert: off the plan for {task_id}."
        return plan[len(moves)], f"Expert: plan step {len(moves) + 1}/{len(plan)} on {task_id}."


class BaselineServer:
    """The baseline server; ``with BaselineServer() as s:`` runs it on a free port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        seed: int = 0,
        delay: float = 0.0,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = ("malformed",),
        retry_after: float = 1.0,
        record_bodies: bool = False,
    ):
        check_fault_kinds(fault_kinds)
        self.seed = seed
        self.delay = delay
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.retry_after = retry_after
        self.record_bodies = record_bodies
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # requests per model name
        self.stats: Counter[str] = Counter()  # "api:status" -> count
        self.requests: list[dict[str, Any]] = []
        self._rng = random.Random(seed)
        self.experts = ExpertPolicy()
        self.stopping = threading.Event()  # set by stop(): releases "hang" faults
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):  # typeshed allows it; an AF_INET server gives str
            host = host.decode()
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> BaselineServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> BaselineServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- decisions ------------------------------------------------------------------
    def choose_fault(self, conv: Conversation, n_before: int) -> Fault | None:
        m = _FAULT_RE.match(conv.model)
        if m:
            kind, when = m.group(1), m.group(2)
            if kind == "slow":
                return Fault("slow", int(when) if when and when.isdigit() else 500)
            if when is None or when == "always":
                active = True
            elif when == "once":
                active = n_before < 1
            elif when.startswith("after-"):
                active = conv.n_assistant >= int(when[len("after-") :])
            else:
                active = n_before < int(when)
            if active:
                return Fault(kind)
        if self.fault_rate > 0 and conv.images:  # episode turns only, never a text-only check
            with self.lock:
                hit = self._rng.random() < self.fault_rate
                kind = self._rng.choice(self.fault_kinds)
            if hit:
                return Fault(kind, 500 if kind == "slow" else None)
        return None

    def answer(self, conv: Conversation, raw: bytes, fault: Fault | None) -> tuple[str, str]:
        """(final text, visible reasoning) for a request."""
        legal = None
        for t in conv.texts:
            legal = find_actions_line(t)
            if legal:
                break
        seen = (
            f"Read {len(conv.images)} image(s) {conv.image_sizes[-3:]} and "
            f"{len(conv.videos)} video(s); {conv.n_assistant} earlier repl(ies)."
        )
        if not legal:
            return "I cannot find a list of legal actions in the prompt.", seen
        policy = conv.model if conv.model in ("first", "expert") else "random"
        action = None
        if policy == "first":
            action = legal[0]
        elif policy == "expert":
            action, note = self.experts.action(conv)
            seen = f"{seen} {note}"
        if action is None or action not in legal:
            policy = "random" if policy != "expert" else "expert (random fallback)"
            digest = hashlib.sha256(f"{self.seed}|".encode() + raw).digest()
            action = random.Random(int.from_bytes(digest[:8], "big")).choice(legal)
        kind = fault.kind if fault else None
        if kind == "malformed":
            return f"I would probably go with {action} here.", seen
        if kind == "illegal":
            return "[Action:Teleport]\nThat is my choice.", seen
        if kind == "empty":
            return "", seen
        if kind == "huge":
            filler = "All work and no play makes a long reply. "
            bulk = filler * (HUGE_CHARS // len(filler) + 1)
            return f"[Action:{action}]\n{bulk[:HUGE_CHARS]}", f"{seen}\n{bulk[:HUGE_CHARS]}"
        if kind == "conflict":
            other = next((a for a in legal if a != action), action)
            return f"[Action:{action}]\nOn second thought, [Action:{other}] could also work.", seen
        return (
            f"[Action:{action}]\nThe {policy} baseline picked {action} from "
            f"{len(legal)} legal actions.",
            seen,
        )


def _make_handler(server: BaselineServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                data = [{"id": p, "object": "model", "owned_by": "vical"} for p in POLICIES]
                self._send_json(200, {"object": "list", "data": data})
            elif self.path == "/stats":
                with server.lock:
                    self._send_json(
                        200, {"models": dict(server.counts), "responses": dict(server.stats)}
                    )
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            gm = _GEMINI_RE.match(path)
            api = (
                "chat"
                if path == "/v1/chat/completions"
                else "responses"
                if path == "/v1/responses"
                else "gemini"
                if gm
                else None
            )
            if api is None:
                self._send_json(404, {"error": {"message": f"no route {path}"}})
                return
            entry: dict[str, Any] = {"api": api, "path": path}
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise BadRequest("the body must be a JSON object")
                if api == "chat":
                    conv = _read_chat(body)
                elif api == "responses":
                    conv = _read_responses(body)
                else:
                    assert gm is not None
                    conv = _read_gemini(body, gm.group(1))
            except (BadRequest, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
                entry["model"] = None
                self._finish(entry, api, 400, _error(api, 400, f"bad request: {e}"))
                return
            entry.update(
                model=conv.model,
                n_images=len(conv.images),
                n_videos=len(conv.videos),
                n_system=conv.n_system,
                n_assistant=conv.n_assistant,
            )
            if server.record_bodies:
                entry["body"] = body
            with server.lock:
                n_before = server.counts[conv.model]
                server.counts[conv.model] += 1
            fault = server.choose_fault(conv, n_before)
            entry["fault"] = fault.kind if fault else None
            if server.delay:
                time.sleep(server.delay)
            if fault and fault.kind == "slow":
                time.sleep((fault.arg or 0) / 1000.0)
            if fault and fault.kind == "429":
                ra = server.retry_after
                ra_text = str(int(ra)) if float(ra).is_integer() else str(ra)
                self._finish(
                    entry,
                    api,
                    429,
                    _error(api, 429, "rate limit reached (injected fault)"),
                    {"Retry-After": ra_text},
                )
                return
            if fault and fault.kind == "400":
                self._finish(entry, api, 400, _error(api, 400, "invalid request (injected fault)"))
                return
            if fault and fault.kind == "500":
                self._finish(entry, api, 500, _error(api, 500, "internal error (injected fault)"))
                return
            if fault and fault.kind == "context-length":
                self._finish(entry, api, 400, _context_error(api, conv))
                return
            if fault and fault.kind == "401-echo":
                heard = self._credential_heard()
                message = f"Incorrect API key provided: {heard} (injected fault)"
                self._finish(entry, api, 401, _error(api, 401, message))
                return
            if fault and fault.kind == "hang":
                entry["status"] = None
                with server.lock:
                    server.requests.append(entry)
                    server.stats[f"{api}:hang"] += 1
                server.stopping.wait(HANG_LIMIT)
                self.close_connection = True  # drop the request without an answer
                return
            if fault and fault.kind in _BROKEN_BODIES:
                ctype, data = _BROKEN_BODIES[fault.kind]
                self._finish_raw(entry, api, 200, data, ctype)
                return
            text, seen = server.answer(conv, raw, fault)
            out_tokens = max(1, len(text) // 4)
            in_tokens = conv.estimated_tokens()
            if api == "chat":
                obj = _chat_reply(conv, text, seen, in_tokens, out_tokens)
            elif api == "responses":
                obj = _responses_reply(body, conv, text, seen, in_tokens, out_tokens)
            else:
                obj = _gemini_reply(body, conv, text, seen, in_tokens, out_tokens)
            self._finish(entry, api, 200, obj)

        def _finish(
            self,
            entry: dict[str, Any],
            api: str,
            status: int,
            obj: Any,
            headers: dict[str, str] | None = None,
        ) -> None:
            entry["status"] = status
            with server.lock:
                server.requests.append(entry)
                server.stats[f"{api}:{status}"] += 1
            self._send_json(status, obj, headers)

        def _finish_raw(
            self, entry: dict[str, Any], api: str, status: int, data: bytes, ctype: str
        ) -> None:
            entry["status"] = status
            with server.lock:
                server.requests.append(entry)
                server.stats[f"{api}:{status}"] += 1
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _credential_heard(self) -> str:
            """The credential the request carried, whichever way it was sent."""
            auth = self.headers.get("Authorization") or ""
            if auth:
                return auth.split(" ", 1)[-1]
            goog = self.headers.get("x-goog-api-key") or self.headers.get("api-key")
            if goog:
                return goog
            query = parse_qs(urlsplit(self.path).query)
            return (query.get("key") or ["<none>"])[0]

    return Handler


# status-200 bodies that no provider would send (content type, bytes)
_BROKEN_BODIES: dict[str, tuple[str, bytes]] = {
    "not-json": ("text/plain", b"OK"),
    "html": (
        "text/html; charset=utf-8",
        b"<!DOCTYPE html><html><head><title>Welcome</title></head>"
        b"<body><h1>It works!</h1><p>This is a web server, not a model.</p></body></html>",
    ),
    "binary": ("application/json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8\xff\xe0"),
    "null": ("application/json", b"null"),
    "schemaless": ("application/json", b"{}"),
    "empty-body": ("application/json", b""),
}


# ------------------------------------------------------------------ provider formats


def _error(api: str, status: int, message: str) -> dict[str, Any]:
    if api == "gemini":
        names = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
        }
        return {"error": {"code": status, "message": message, "status": names.get(status, "")}}
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        500: "server_error",
    }
    code = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status)
    return {"error": {"message": message, "type": kinds.get(status), "param": None, "code": code}}


def _context_error(api: str, conv: Conversation) -> dict[str, Any]:
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


def _rid(prefix: str) -> str:
    return f"{prefix}{random.getrandbits(64):016x}"


def _chat_reply(conv: Conversation, text: str, seen: str, n_in: int, n_out: int) -> dict[str, Any]:
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


def _responses_reply(
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


def _gemini_reply(
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


def build_parser(prog: str = "python -m vical.serve") -> argparse.ArgumentParser:
    """The command line of the server (also behind ``vical serve-baseline``)."""
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Baseline model server: OpenAI chat/responses and Gemini generateContent.",
    )
    ap.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    ap.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random policy")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds to wait before answering")
    ap.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="probability that a request carrying an image (an episode turn) misbehaves; "
        "text-only requests are never hit",
    )
    ap.add_argument(
        "--fault-kinds",
        type=_fault_kinds_arg,
        default=("malformed",),
        help=f"comma-separated kinds drawn when --fault-rate hits: {','.join(FAULT_KINDS)}",
    )
    ap.add_argument(
        "--retry-after", type=float, default=1.0, help="Retry-After seconds sent with a 429"
    )
    return ap


def _fault_kinds_arg(text: str) -> tuple[str, ...]:
    try:
        return parse_fault_kinds(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None, prog: str = "python -m vical.serve") -> None:
    args = build_parser(prog).parse_args(argv)
    if not 0.0 <= args.fault_rate <= 1.0:
        build_parser(prog).error(f"--fault-rate must be between 0 and 1, not {args.fault_rate}")
    server = BaselineServer(
        args.host,
        args.port,
        seed=args.seed,
        delay=args.delay,
        fault_rate=args.fault_rate,
        fault_kinds=args.fault_kinds,
        retry_after=args.retry_after,
    )
    faults = (
        f"\n  Injected faults:            rate {args.fault_rate:g} on image turns, "
        f"kinds {','.join(args.fault_kinds)}"
        if args.fault_rate
        else ""
    )
    print(
        f"vical baseline server on {server.url}\n"
        f"  OpenAI-compatible base URL: {server.openai_base_url}  (models: random, first, expert)\n"
        f"  Gemini base URL:            {server.url}{faults}",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()
        server._httpd.server_close()


if __name__ == "__main__":
    main()
