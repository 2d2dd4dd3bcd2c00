"""``vical view``'s local server: the viewer's file tree (:mod:`vical.view.site`) over HTTP.

Only GET: the viewer changes nothing. Paths are those of an exported folder, so
the page is the same in both places. Two requests also start work the page will
want next: the table's data warms the runs' simulators, and an episode's data
starts replaying its frames, so its first frame is there soon after. The server is
:class:`vical.view.web.LocalServer` (standard library, 127.0.0.1 only; the reasons
for that choice are in :mod:`vical.view.web`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from vical.view.data import Catalog, ViewError
from vical.view.site import EPISODE_DATA, page
from vical.view.web import HttpError, LocalServer, Reply


def make_server(catalog: Catalog, port: int = 0) -> LocalServer:
    """A server for ``catalog`` on 127.0.0.1 (``port`` 0: any free port); not yet started."""

    def get(path: str, query: dict[str, str]) -> Reply:
        rel = path.lstrip("/")
        if rel == "data/index.js":
            catalog.warm_simulators()
        m = EPISODE_DATA.match(rel)
        if m:
            with contextlib.suppress(ViewError):  # page() names an unknown episode
                catalog.warm(*m.groups())
        return page(catalog, rel)

    def post(path: str, body: dict[str, Any]) -> Reply:
        raise HttpError(405, "the viewer only reads")

    return LocalServer(get, post, port)
