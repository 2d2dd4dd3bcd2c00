"""The small HTTP plumbing shared by ``vical view`` and ``vical play``.

Both are local pages for one person, with a handful of routes each, so they use
the standard library's :class:`http.server.ThreadingHTTPServer` rather than a
web framework: vical depends on none (the baseline model server in
:mod:`vical.serve` is built the same way), the routes are a few lines each, and
nothing here needs templates, sessions or a router. One thread per request keeps
a long request (a move that waits for the simulator) from blocking the page's
other requests.

The server binds to 127.0.0.1 only. Because a page on another site can still
make the browser send requests to a local port, every request must name this
server in its ``Host`` header (no DNS-rebinding) and every POST must carry a
JSON body with ``Content-Type: application/json``, which a cross-site form
cannot send without the browser asking first.
"""

from __future__ import annotations

import json
import mimetypes
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

LOCALHOST = "127.0.0.1"
MAX_BODY = 1 << 16  # a POST of these pages is a few hundred bytes
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")

Reply = tuple[int, str, bytes]  # status, content type, body
GetRoute = Callable[[str, dict[str, str]], Reply]
PostRoute = Callable[[str, dict[str, Any]], Reply]


class HttpError(Exception):
    """A request this server refuses: status and a one-line reason for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def json_reply(obj: Any, status: int = 200) -> Reply:
    return status, "application/json", json.dumps(obj).encode()


def asset(package: str, name: str) -> Reply:
    """A file shipped as package data (``<package>/static/<name>``)."""
    if "/" in name or name.startswith(".") or not name:
        raise HttpError(404, f"no asset {name!r}")
    path = resources.files(package) / "static" / name
    if not path.is_file():
        raise HttpError(404, f"no asset {name!r}")
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind in ("application/javascript", "text/javascript"):
        kind += "; charset=utf-8"
    return 200, kind, path.read_bytes()


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 answering GET and POST through two callables.

    ``get(path, query)`` and ``post(path, body)`` return ``(status, type, bytes)``
    or raise :class:`HttpError`. ``port=0`` picks a free port; :attr:`url` says
    which one.
    """

    def __init__(self, get: GetRoute, post: PostRoute, port: int = 0) -> None:
        self._get, self._post = get, post
        self.httpd = ThreadingHTTPServer((LOCALHOST, port), self._handler())
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://{LOCALHOST}:{self.port}/"
        self._thread: threading.Thread | None = None

    def _allowed_hosts(self) -> set[str]:
        return {f"{LOCALHOST}:{self.port}", f"localhost:{self.port}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # a reply's body must not wait for an ACK

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the terminal shows the command's own lines, not one per request."""

            def _send(self, reply: Reply) -> None:
                status, kind, body = reply
                extra: dict[str, str] = {}
                if status == 200 and self.command == "GET":
                    # byte ranges, so a video can be seeked; "bytes=a-b", "bytes=a-", "bytes=-n"
                    extra["Accept-Ranges"] = "bytes"
                    m = _RANGE.match(self.headers.get("Range") or "")
                    if m and body and (m.group(1) or m.group(2)):
                        first, last = m.group(1), m.group(2)
                        if not first:
                            start, end = max(0, len(body) - int(last)), len(body) - 1
                        else:
                            start = int(first)
                            end = min(int(last), len(body) - 1) if last else len(body) - 1
                        if start <= end:
                            status, body = 206, body[start : end + 1]
                            extra["Content-Range"] = f"bytes {start}-{end}/{len(reply[2])}"
                        else:
                            status, body = 416, b""
                            extra["Content-Range"] = f"bytes */{len(reply[2])}"
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)

            def _checked(self, run: Callable[[], Reply]) -> None:
                try:
                    if self.headers.get("Host") not in server._allowed_hosts():
                        raise HttpError(403, "this server answers only requests for its own host")
                    reply = run()
                except HttpError as e:
                    reply = json_reply({"error": e.message}, e.status)
                except Exception as e:  # a bug or a missing extra: say so, keep serving
                    reply = json_reply({"error": f"{type(e).__name__}: {e}"}, 500)
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    # the browser went away mid-reply (a closed tab, a cancelled media
                    # download): nothing to tell anyone, nor to answer on this connection
                    self.close_connection = True

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                self._checked(lambda: server._get(parts.path, query))

            def do_POST(self) -> None:
                def run() -> Reply:
                    kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                    if kind != "application/json":
                        raise HttpError(415, "POST a JSON body (Content-Type: application/json)")
                    n = int(self.headers.get("Content-Length") or 0)
                    if n > MAX_BODY:
                        raise HttpError(413, f"body of {n} bytes; the limit is {MAX_BODY}")
                    try:
                        body = json.loads(self.rfile.read(n) or b"{}")
                    except ValueError:
                        raise HttpError(400, "the body is not JSON") from None
                    if not isinstance(body, dict):
                        raise HttpError(400, "the body must be a JSON object")
                    return server._post(urlsplit(self.path).path, body)

                self._checked(run)

        return Handler

    def start(self) -> None:
        """Serve in a background thread (tests, and commands that wait on something else)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        # shutdown() stops a loop on another thread (start()); in the foreground the loop
        # has already ended when close() runs, and shutdown() would wait for ever for a
        # loop that never began (a Ctrl-C before serve_forever)
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
