"""A local HTTP server run on a background thread: start, stop, ``with``.

The baseline model server and the audit labelling page both own a
:class:`http.server.ThreadingHTTPServer` in ``self._httpd``; this mixin gives
them one life cycle: :meth:`start` serves on a daemon thread, :meth:`stop`
shuts the server down and joins the thread, and ``with server:`` does both.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class BackgroundServer:
    """Mixin for a class that sets ``self._httpd`` (and ``self._thread = None``)."""

    _httpd: ThreadingHTTPServer
    _thread: threading.Thread | None

    @property
    def url(self) -> str:
        """``http://host:port`` the server listens on."""
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):  # typeshed allows it; an AF_INET server gives str
            host = host.decode()
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def before_stop(self) -> None:
        """Hook run first by :meth:`stop` (e.g. release requests that wait)."""

    def stop(self) -> None:
        self.before_stop()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
