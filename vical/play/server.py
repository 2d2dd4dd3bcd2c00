"""``vical play``'s web app: the routes between the page and a :class:`PlaySession`.

The page (``static/index.html`` and ``play.js``) polls nothing: every request
answers with the whole state the page draws from, and a move's request answers
only once the simulator has produced the next frame. Routes:

``GET /``                 the page
``GET /static/<file>``    its script and style sheet
``GET /api/state``        the session's state (see :meth:`PlaySession.state`)
``GET /demo/<i>.mp4``     demonstration video ``i`` of the current task
``POST /api/start``       begin the current task's episode
``POST /api/act``         ``{"step": n, "action": name, "input": how}``: one decision
``POST /api/next``        leave a finished episode for the next task

The server is :class:`vical.view.web.LocalServer` (standard library, 127.0.0.1
only); the reasons for that choice are in :mod:`vical.view.web`.
"""

from __future__ import annotations

import re
from typing import Any

from vical.play.human import Refused
from vical.play.session import PlaySession
from vical.view.web import HttpError, LocalServer, Reply, asset, json_reply

_DEMO = re.compile(r"^/demo/(\d+)\.mp4$")
_PACKAGE = "vical.play"


def make_server(session: PlaySession, port: int = 0) -> LocalServer:
    """A server for ``session`` on 127.0.0.1 (``port`` 0: any free port); not yet started."""

    def get(path: str, query: dict[str, str]) -> Reply:
        if path in ("/", "/index.html"):
            return asset(_PACKAGE, "index.html")
        if path.startswith("/static/"):
            return asset(_PACKAGE, path.removeprefix("/static/"))
        if path == "/api/state":
            return json_reply(session.state())
        m = _DEMO.match(path)
        if m:
            try:
                return 200, "video/mp4", session.demo_mp4(int(m.group(1)))
            except Refused as e:
                raise HttpError(404, str(e)) from None
        raise HttpError(404, f"no page {path}")

    def post(path: str, body: dict[str, Any]) -> Reply:
        try:
            if path == "/api/start":
                session.start()
            elif path == "/api/act":
                step, action = body.get("step"), body.get("action")
                if not isinstance(step, int) or not isinstance(action, str):
                    raise HttpError(400, 'send {"step": <int>, "action": <name>}')
                given = str(body.get("input") or "button")[:40]
                session.act(step, action, given)
            elif path == "/api/next":
                session.next()
            else:
                raise HttpError(404, f"no action {path}")
        except Refused as e:
            raise HttpError(409, str(e)) from None
        return json_reply(session.state())

    return LocalServer(get, post, port)
