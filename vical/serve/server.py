"""The server: :class:`BaselineServer` and the HTTP handler that answers for it."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from vical.serve.auditor import (
    audit_context,
    auditor_answer,
    check_auditor_mode,
    is_auditor_model,
    request_mode,
)
from vical.serve.background import BackgroundServer
from vical.serve.conversation import BadRequest, Conversation
from vical.serve.faults import (
    BROKEN_BODIES,
    HANG_LIMIT,
    Fault,
    check_fault_kinds,
    faulty_answer,
    is_fault_model,
    model_fault,
)
from vical.serve.policy import POLICIES, ExpertPolicy, legal_actions, pick_action
from vical.serve.wire import (
    context_error_body,
    error_body,
    read_request,
    reply_body,
    route,
    unknown_model_body,
)

# the model names a server answers, as its banner and its 404 state them
SERVED_MODELS = "random, first, expert, fault-<kind>[-<when>] and auditor-<mode>"


def is_served_model(model: str) -> bool:
    """Whether ``model`` is one of :data:`SERVED_MODELS`."""
    return model in POLICIES or is_fault_model(model) or is_auditor_model(model)


class BaselineServer(BackgroundServer):
    """The baseline server; ``with BaselineServer() as s:`` runs it on a free port.

    ``address`` is the ``(host, port)`` it listens on (port 0: a free one).
    """

    def __init__(
        self,
        address: tuple[str, int] = ("127.0.0.1", 0),
        *,
        seed: int = 0,
        delay: float = 0.0,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = ("malformed",),
        retry_after: float = 1.0,
        record_bodies: bool = False,
        auditor: str = "valid",
        wm: str = "copy-last",
        any_model: bool = True,
    ):
        check_fault_kinds(fault_kinds)
        from vical.wm.protocol import check_server_mode

        self.wm = check_server_mode(wm)  # how world-model requests (/v1/wm/predict) are answered
        self.auditor = check_auditor_mode(auditor)  # verdict mode for audit requests
        self.seed = seed
        self.delay = delay
        self.fault_rate = fault_rate
        self.fault_kinds = tuple(fault_kinds)
        self.retry_after = retry_after
        self.record_bodies = record_bodies
        # True: any other model name is answered by the random policy (tests name their
        # requests this way); False: it gets the provider's 404, as the command line does
        self.any_model = any_model
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()  # requests per model name
        self.stats: Counter[str] = Counter()  # "api:status" -> count
        self.requests: list[dict[str, Any]] = []
        self._rng = random.Random(seed)
        self.experts = ExpertPolicy()
        self.stopping = threading.Event()  # set by stop(): releases "hang" faults
        self._in_flight = 0  # requests being answered (finish_in_flight waits for them)
        self._idle = threading.Condition(self.lock)
        self._httpd = ThreadingHTTPServer(address, _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    def before_stop(self) -> None:
        self.stopping.set()

    def finish_in_flight(self, timeout: float = 60.0) -> bool:
        """Wait until every request being answered has had its answer (``hang`` faults
        are released first); False if some were still running after ``timeout`` s."""
        self.stopping.set()
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def _request_began(self) -> None:
        with self.lock:
            self._in_flight += 1

    def _request_ended(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()

    # -- decisions ------------------------------------------------------------------
    def choose_fault(self, conv: Conversation, n_before: int) -> Fault | None:
        fault = model_fault(conv.model, conv.n_assistant, n_before)
        if fault is not None:
            return fault
        if self.fault_rate > 0 and conv.images:  # episode turns only, never a text-only check
            with self.lock:
                hit = self._rng.random() < self.fault_rate
                kind = self._rng.choice(self.fault_kinds)
            if hit:
                return Fault(kind, 500 if kind == "slow" else None)
        return None

    def answer(self, conv: Conversation, raw: bytes, fault: Fault | None) -> tuple[str, str]:
        """(final text, visible reasoning) for a request."""
        ctx = audit_context(conv)
        if ctx is not None:  # a vical audit request: a verdict, not a move
            return auditor_answer(ctx, request_mode(conv.model, self.auditor), raw, self.seed)
        legal = legal_actions(conv)
        seen = (
            f"Read {len(conv.images)} image(s) {conv.image_sizes[-3:]} and "
            f"{len(conv.videos)} video(s); {conv.n_assistant} earlier repl(ies)."
        )
        if not legal:
            return "I cannot find a list of legal actions in the prompt.", seen
        action, policy, note = pick_action(conv, legal, self.seed, self.experts)
        if note is not None:
            seen = f"{seen} {note}"
        spoilt = faulty_answer(fault.kind if fault else None, action, legal, seen)
        if spoilt is not None:
            return spoilt
        return (
            f"[Action:{action}]\nThe {policy} baseline picked {action} from "
            f"{len(legal)} legal actions.",
            seen,
        )


def _make_handler(server: BaselineServer) -> type[BaseHTTPRequestHandler]:
    """The handler class of ``server``'s HTTP server (a :class:`_Handler` bound to it)."""

    class Handler(_Handler):
        baseline = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    """Answers the requests of :attr:`baseline` (bound by :func:`_make_handler`)."""

    baseline: ClassVar[BaselineServer]
    protocol_version = "HTTP/1.1"
    # headers and body leave in two writes; with Nagle's algorithm on, the body
    # waited for the client's delayed ACK of the headers (about 40 ms a reply)
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send_bytes(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(obj).encode(), "application/json", headers)

    def do_GET(self) -> None:
        server = self.baseline
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
        self.baseline._request_began()
        try:
            self._post()
        finally:
            self.baseline._request_ended()

    def _post(self) -> None:
        server = self.baseline
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        if path == "/v1/wm/predict":  # the world-model protocol (vical.wm.protocol)
            from vical.wm.protocol import serve_predict

            self._send_json(*serve_predict(raw, server.wm))
            return
        found = route(path)
        if found is None:
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            return
        api, path_model = found
        entry: dict[str, Any] = {"api": api, "path": path}
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            conv = read_request(api, body, path_model)
        except (BadRequest, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            entry["model"] = None
            self._finish(entry, api, 400, error_body(api, 400, f"bad request: {e}"))
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
        if not server.any_model and not is_served_model(conv.model):
            self._finish(entry, api, 404, unknown_model_body(api, conv.model, SERVED_MODELS))
            return
        with server.lock:
            n_before = server.counts[conv.model]
            server.counts[conv.model] += 1
        fault = server.choose_fault(conv, n_before)
        entry["fault"] = fault.kind if fault else None
        if server.delay:
            time.sleep(server.delay)
        if fault and fault.kind == "slow":
            time.sleep((fault.arg or 0) / 1000.0)
        if fault and self._answer_fault(entry, api, conv, fault.kind):
            return
        text, seen = server.answer(conv, raw, fault)
        out_tokens = max(1, len(text) // 4)
        in_tokens = conv.estimated_tokens()
        obj = reply_body(api, body, conv, text, seen, in_tokens, out_tokens)
        self._finish(entry, api, 200, obj)

    def _answer_fault(self, entry: dict[str, Any], api: str, conv: Conversation, kind: str) -> bool:
        """Answer with the injected fault ``kind`` instead of a reply; False for a fault
        that leaves the reply to be made (``slow``, and those of the reply's text)."""
        server = self.baseline
        if kind == "429":
            ra = server.retry_after
            ra_text = str(int(ra)) if float(ra).is_integer() else str(ra)
            self._finish(
                entry,
                api,
                429,
                error_body(api, 429, "rate limit reached (injected fault)"),
                {"Retry-After": ra_text},
            )
        elif kind == "400":
            self._finish(entry, api, 400, error_body(api, 400, "invalid request (injected fault)"))
        elif kind == "500":
            self._finish(entry, api, 500, error_body(api, 500, "internal error (injected fault)"))
        elif kind == "context-length":
            self._finish(entry, api, 400, context_error_body(api, conv))
        elif kind == "401-echo":
            heard = self._credential_heard()
            message = f"Incorrect API key provided: {heard} (injected fault)"
            self._finish(entry, api, 401, error_body(api, 401, message))
        elif kind == "hang":
            entry["status"] = None
            with server.lock:
                server.requests.append(entry)
                server.stats[f"{api}:hang"] += 1
            server.stopping.wait(HANG_LIMIT)
            self.close_connection = True  # drop the request without an answer
        elif kind in BROKEN_BODIES:
            ctype, data = BROKEN_BODIES[kind]
            self._finish_raw(entry, api, 200, data, ctype)
        else:
            return False
        return True

    def _finish(
        self,
        entry: dict[str, Any],
        api: str,
        status: int,
        obj: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Record the request and answer it with JSON ``obj``."""
        self._finish_raw(entry, api, status, json.dumps(obj).encode(), "application/json", headers)

    def _finish_raw(
        self,
        entry: dict[str, Any],
        api: str,
        status: int,
        data: bytes,
        ctype: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Record the request (its status, the per-API counts) and answer it with ``data``."""
        server = self.baseline
        entry["status"] = status
        with server.lock:
            server.requests.append(entry)
            server.stats[f"{api}:{status}"] += 1
        self._send_bytes(status, data, ctype, headers)

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
