"""The hub's ASGI application (FastAPI): intake API, leaderboard, pages, health.

Uploads (``PUT /api/submissions``) are read from the request stream chunk by chunk,
never buffered whole: each chunk is hashed and written to a temporary file beside
the store, the upload is refused the moment it passes the size cap (or at once when
its declared length does), and only after the file is on disk and its signed manifest
checks out against the team's approved key does it take its content address and get
a row in the database. The response (202) comes after that commit: an accepted
upload survives a crash of the server a moment later.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import signal
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.requests import ClientDisconnect

from vical.hub import auth
from vical.hub.config import HubConfig
from vical.hub.db import (
    ACCEPTED,
    FINAL,
    KEY_APPROVED,
    KEY_PENDING,
    KEY_REVOKED,
    QUEUED,
    WITHDRAWN,
    Submission,
    TeamKey,
    add_event,
    add_key,
    head_version,
    make_engine,
    migrate,
    schema_version,
)
from vical.hub.logs import log
from vical.hub.pages import entry_page, leaderboard_page, status_page
from vical.hub.store import BundleStore, TooLarge

logger = logging.getLogger("vical.hub.app")


class RateLimiter:
    """At most ``limit`` events per ``window`` seconds for each name (this process)."""

    def __init__(self, limit: int, window: float = 3600.0) -> None:
        self.limit, self.window = limit, window
        self.seen: dict[str, deque[float]] = defaultdict(deque)
        self.lock = threading.Lock()

    def hit(self, name: str) -> float | None:
        """Count one event; the seconds to wait when over the limit (None: allowed)."""
        now = time.monotonic()
        with self.lock:
            q = self.seen[name]
            while q and now - q[0] > self.window:
                q.popleft()
            if len(q) >= self.limit:
                return self.window - (now - q[0])
            q.append(now)
            return None


def _problem(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def status_of(row: Submission) -> dict[str, Any]:
    """A submission as the status API shows it (public: the id is unguessable)."""
    return {
        "id": row.id,
        "team": row.team,
        "key_id": row.key_id,
        "bundle_sha256": row.bundle_sha256,
        "size": row.size,
        "state": row.state,
        "final": row.state in FINAL,
        "progress": {"done": row.progress_done, "total": row.progress_total}
        if row.progress_total is not None
        else None,
        "attempts": row.attempts,
        "verdict": row.verdict,
        "entry_id": row.entry_id if row.state == ACCEPTED else None,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "links": {"status": f"/api/submissions/{row.id}", "page": f"/submissions/{row.id}"},
    }


class Hub:
    """The application's state: settings, database, store, rate limiters."""

    def __init__(self, cfg: HubConfig, engine: Engine | None = None) -> None:
        self.cfg = cfg
        self.engine = engine or make_engine(cfg.database_url())
        migrate(self.engine)
        self.store = BundleStore(cfg.store_dir)
        self.store.sweep(older_than=3600.0)  # uploads cut short long ago
        self.by_address = RateLimiter(cfg.uploads_per_address_per_hour)

    # -- database helpers (run in the thread pool) -------------------------------
    def key(self, key_id: str) -> TeamKey | None:
        with Session(self.engine) as s:
            return s.get(TeamKey, key_id)

    def submission(self, sid: str) -> Submission | None:
        with Session(self.engine) as s:
            return s.get(Submission, sid)

    def by_sha(self, sha: str) -> Submission | None:
        with Session(self.engine) as s:
            return s.scalars(select(Submission).where(Submission.bundle_sha256 == sha)).first()

    def recent_uploads(self, key_id: str) -> int:
        since = time.time() - 3600
        with self.engine.connect() as conn:
            return int(
                conn.execute(
                    select(func.count())
                    .select_from(Submission)
                    .where(Submission.key_id == key_id, Submission.created_at > since)
                ).scalar_one()
            )

    def entries(self) -> list[dict[str, Any]]:
        from vical.submit.leaderboard import entry_problem

        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Submission.entry).where(
                    Submission.state == ACCEPTED, Submission.entry.is_not(None)
                )
            ).all()
        out = []
        for (text,) in rows:
            e = json.loads(text or "null")
            if entry_problem(e) is None:
                out.append(e)
        out.sort(key=lambda e: -float(e["report"]["columns"]["All"]["score"] or 0.0))
        return out

    def record(self, sha: str, size: int, key: TeamKey, address: str) -> tuple[Submission, bool]:
        """Insert the submission of a stored bundle; (row, created)."""
        now = time.time()
        sid = secrets.token_hex(16)
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(Submission).values(
                        id=sid,
                        key_id=key.key_id,
                        team=key.team,
                        bundle_sha256=sha,
                        size=size,
                        address=address[:64],
                        state=QUEUED,
                        created_at=now,
                        updated_at=now,
                        attempts=0,
                    )
                )
                add_event(conn, sid, "uploaded", f"key:{key.key_id}", {"size": size})
        except IntegrityError:
            existing = self.by_sha(sha)
            assert existing is not None
            return existing, False
        row = self.submission(sid)
        assert row is not None
        return row, True


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _authenticate(hub: Hub, request: Request, body_sha256: str) -> TeamKey | JSONResponse:
    """The approved key that signed this request, or the refusal."""
    from vical.submit.keys import KeyError_, load_public

    kid = request.headers.get(auth.KEY, "")
    if not kid:
        return _problem(401, f"unsigned request: send {auth.KEY}, {auth.TIME}, {auth.SIG}")
    key = await run_in_threadpool(hub.key, kid)
    if key is None:
        return _problem(
            403, f"key {kid} is not registered: run `vical hub register --to URL --key KEY`"
        )
    if key.status != KEY_APPROVED:
        return _problem(403, f"key {kid} is {key.status}: a maintainer must approve it first")
    try:
        pub = load_public(key.public_pem.encode())
    except KeyError_ as e:
        return _problem(500, str(e))
    why = auth.check_request(
        pub,
        request.method,
        request.url.path,
        request.headers.get(auth.TIME, ""),
        request.headers.get(auth.SIG, ""),
        body_sha256,
    )
    if why:
        return _problem(401, why)
    return key


def create_app(cfg: HubConfig, engine: Engine | None = None) -> FastAPI:  # noqa: C901
    hub = Hub(cfg, engine)
    app = FastAPI(
        title="V-ICAL hub",
        version="1",
        summary="Upload signed results bundles, follow their verification, read the leaderboard.",
    )
    app.state.hub = hub

    # -- health ----------------------------------------------------------------------
    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"])
    def readyz() -> JSONResponse:
        """Readiness: the database answers at the newest schema and the store is writable."""
        problems = []
        try:
            with hub.engine.connect() as conn:
                version = schema_version(conn)
            if version != head_version():
                problems.append(f"schema at {version}, expected {head_version()}")
        except Exception as e:
            problems.append(f"database: {type(e).__name__}")
        probe = hub.store.tmp_dir / f"ready-{secrets.token_hex(4)}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as e:
            problems.append(f"store: {e.strerror}")
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})

    # -- keys ------------------------------------------------------------------------
    @app.post("/api/keys", tags=["teams"], status_code=201)
    async def register(request: Request) -> JSONResponse:
        """Register a team's public key (pending until a maintainer approves it). The
        request is signed with the key itself, which proves the team holds it."""
        from vical.submit.keys import KeyError_, key_id, load_public

        body = await request.body()
        if len(body) > 16384:
            return _problem(413, "a key registration is at most 16 KiB")
        try:
            data = json.loads(body)
            team, pem = str(data["team"]), str(data["public_key"])
            pub = load_public(pem.encode())
        except (ValueError, KeyError, TypeError, KeyError_) as e:
            return _problem(400, f"send JSON {{'team': ..., 'public_key': PEM}} ({e})")
        kid = key_id(pub)
        if request.headers.get(auth.KEY) != kid:
            return _problem(401, f"sign the registration with the key itself ({kid})")
        import hashlib

        why = auth.check_request(
            pub,
            "POST",
            request.url.path,
            request.headers.get(auth.TIME, ""),
            request.headers.get(auth.SIG, ""),
            hashlib.sha256(body).hexdigest(),
        )
        if why:
            return _problem(401, why)
        if not 1 <= len(team) <= 100:
            return _problem(400, "the team name is 1 to 100 characters")

        def register() -> tuple[str, int]:
            existing = hub.key(kid)
            if existing is not None:
                return existing.status, 200
            with hub.engine.begin() as conn:
                add_key(conn, kid, team, pem, KEY_PENDING)
            return KEY_PENDING, 201

        try:
            status, code = await run_in_threadpool(register)
        except IntegrityError:
            status, code = KEY_PENDING, 200
        log(logger, "key registered", key=kid, team=team, status=status)
        return JSONResponse({"key_id": kid, "team": team, "status": status}, status_code=code)

    # -- submissions -----------------------------------------------------------------
    @app.put(
        "/api/submissions",
        tags=["submissions"],
        status_code=202,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def upload(request: Request) -> JSONResponse:
        """Upload a signed bundle (the request body, ``application/gzip``). Signed with
        the team's approved key over the bundle's sha256 (``X-Vical-Sha256``). Returns
        the submission (202), or the existing one (200) when this bundle was sent before."""
        from vical.submit.archive import open_bundle
        from vical.submit.keys import load_public
        from vical.submit.unpack import check_sizes, read_signed_manifest
        from vical.submit.verdict import VerifyError

        address = _client_address(request)
        wait = hub.by_address.hit(address)
        if wait is not None:
            return _problem(
                429,
                f"too many uploads from {address}; retry in {wait:.0f} s",
                headers={"Retry-After": str(int(wait) + 1)},
            )
        declared = request.headers.get(auth.BODY, "")
        key = await _authenticate(hub, request, declared)
        if isinstance(key, JSONResponse):
            return key
        existing = await run_in_threadpool(hub.by_sha, declared)
        if existing is not None:
            if existing.key_id != key.key_id:
                return _problem(409, "this bundle was already submitted by another key")
            return JSONResponse(status_of(existing), status_code=200)
        if await run_in_threadpool(hub.recent_uploads, key.key_id) >= cfg.uploads_per_key_per_hour:
            return _problem(
                429,
                f"key {key.key_id} sent {cfg.uploads_per_key_per_hour} bundles in the "
                "last hour; retry later",
                headers={"Retry-After": "600"},
            )
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > cfg.max_upload_bytes:
            return _problem(
                413, f"the bundle is {length} bytes; the cap is {cfg.max_upload_bytes} bytes"
            )
        up = hub.store.begin(cfg.max_upload_bytes)
        try:
            async for chunk in request.stream():
                up.write(chunk)
        except TooLarge as e:
            log(logger, "upload refused", key=key.key_id, reason="size cap", address=address)
            return _problem(413, str(e))
        except ClientDisconnect:
            up.discard()
            log(logger, "upload cut short", key=key.key_id, size=up.size, address=address)
            return _problem(400, "the upload was cut short; nothing was kept")
        except BaseException:  # client gone, server stopping: keep nothing
            up.discard()
            raise
        try:
            await run_in_threadpool(up.flush)
            if up.sha256 != declared:
                up.discard()
                return _problem(
                    400, f"the body's sha256 is {up.sha256}, the request declared {declared!r}"
                )

            def check_manifest() -> str | None:
                try:
                    with open_bundle(up.tmp) as f:
                        signed = read_signed_manifest(
                            f, {key.key_id: load_public(key.public_pem.encode())}
                        )
                        check_sizes(signed, up.size)
                except VerifyError as e:
                    return str(e)
                return None

            why = await run_in_threadpool(check_manifest)
            if why:
                up.discard()
                return _problem(422, f"the bundle is refused before verification: {why}")
            await run_in_threadpool(up.commit)
        except BaseException:
            up.discard()
            raise
        row, created = await run_in_threadpool(hub.record, up.sha256, up.size, key, address)
        log(
            logger,
            "upload accepted" if created else "upload repeated",
            submission=row.id,
            key=key.key_id,
            size=up.size,
            sha256=up.sha256,
            address=address,
        )
        return JSONResponse(status_of(row), status_code=202 if created else 200)

    @app.get("/api/submissions/{sid}", tags=["submissions"])
    def status(sid: str) -> JSONResponse:
        """A submission's state, progress and verdict."""
        row = hub.submission(sid)
        if row is None:
            return _problem(404, f"no submission {sid}")
        return JSONResponse(status_of(row))

    @app.get("/api/submissions", tags=["submissions"])
    async def list_mine(request: Request) -> JSONResponse:
        """The signing key's submissions, newest first."""
        key = await _authenticate(hub, request, auth.EMPTY_SHA256)
        if isinstance(key, JSONResponse):
            return key

        def rows() -> list[dict[str, Any]]:
            with Session(hub.engine) as s:
                got = s.scalars(
                    select(Submission)
                    .where(Submission.key_id == key.key_id)
                    .order_by(Submission.created_at.desc())
                ).all()
                return [status_of(r) for r in got]

        return JSONResponse({"submissions": await run_in_threadpool(rows)})

    @app.delete("/api/submissions/{sid}", tags=["submissions"])
    async def withdraw(sid: str, request: Request) -> JSONResponse:
        """Withdraw a submission (signed by the key that sent it): it leaves the queue,
        or the leaderboard when it was accepted."""
        key = await _authenticate(hub, request, auth.EMPTY_SHA256)
        if isinstance(key, JSONResponse):
            return key

        def do() -> Submission | None:
            with hub.engine.begin() as conn:
                n = conn.execute(
                    update(Submission)
                    .where(Submission.id == sid, Submission.key_id == key.key_id)
                    .where(Submission.state != WITHDRAWN)
                    .values(
                        state=WITHDRAWN,
                        lease_token=None,
                        lease_owner=None,
                        lease_expires=None,
                        updated_at=time.time(),
                    )
                ).rowcount
                if n:
                    add_event(conn, sid, "withdrawn", f"key:{key.key_id}")
            row = hub.submission(sid)
            if n and row is not None and row.entry_id:  # its viewer leaves with it
                shutil.rmtree(cfg.views_dir / row.entry_id, ignore_errors=True)
            return row

        row = await run_in_threadpool(do)
        if row is None or row.key_id != key.key_id:
            return _problem(404, f"no submission {sid} of key {key.key_id}")
        return JSONResponse(status_of(row))

    @app.get("/api/leaderboard", tags=["leaderboard"])
    def leaderboard_json() -> dict[str, Any]:
        """Every accepted entry, best overall score first (the static site's leaderboard.json)."""
        return {"entries": hub.entries()}

    # -- maintainers ------------------------------------------------------------------
    def admin(request: Request) -> JSONResponse | None:
        token = request.headers.get("authorization", "")
        if not cfg.admin_token:
            return _problem(403, "the admin API is closed: start the hub with an admin token")
        if not secrets.compare_digest(token, f"Bearer {cfg.admin_token}"):
            return _problem(401, "maintainer actions need `Authorization: Bearer <admin token>`")
        return None

    @app.get("/api/admin/keys", tags=["maintainers"])
    def admin_keys(request: Request) -> JSONResponse:
        """Every registered key and its status."""
        if (refused := admin(request)) is not None:
            return refused
        with Session(hub.engine) as s:
            rows = s.scalars(select(TeamKey).order_by(TeamKey.created_at)).all()
            keys = [{"key_id": k.key_id, "team": k.team, "status": k.status} for k in rows]
        return JSONResponse({"keys": keys})

    def _set_key(key_id: str, status: str) -> bool:
        with hub.engine.begin() as conn:
            return bool(
                conn.execute(
                    update(TeamKey)
                    .where(TeamKey.key_id == key_id)
                    .values(
                        status=status, approved_at=time.time() if status == KEY_APPROVED else None
                    )
                ).rowcount
            )

    @app.post("/api/admin/keys/{key_id}/{action}", tags=["maintainers"])
    def admin_key(key_id: str, action: str, request: Request) -> JSONResponse:
        """``approve`` or ``revoke`` a team's key."""
        if (refused := admin(request)) is not None:
            return refused
        status = {"approve": KEY_APPROVED, "revoke": KEY_REVOKED}.get(action)
        if status is None:
            return _problem(404, f"unknown action {action!r}: approve or revoke")
        if not _set_key(key_id, status):
            return _problem(404, f"no key {key_id}")
        log(logger, f"key {status}", key=key_id)
        return JSONResponse({"key_id": key_id, "status": status})

    # -- pages -------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, tags=["pages"])
    def index() -> HTMLResponse:
        return HTMLResponse(leaderboard_page(hub.entries()))

    @app.get("/index.html", include_in_schema=False)
    def index_html() -> RedirectResponse:
        return RedirectResponse("/")

    @app.get("/reports/{entry_id}.html", response_class=HTMLResponse, tags=["pages"])
    def report(entry_id: str) -> Response:
        for e in hub.entries():
            if e["id"] == entry_id:
                has_view = (cfg.views_dir / entry_id / "index.html").is_file()
                return HTMLResponse(
                    entry_page(e, f"/view/{entry_id}/index.html" if has_view else None)
                )
        return HTMLResponse(
            "<!doctype html><html lang='en'><title>Not found</title><h1>No such entry</h1></html>",
            status_code=404,
        )

    @app.get("/submissions/{sid}", response_class=HTMLResponse, tags=["pages"])
    def submission_page(sid: str) -> Response:
        row = hub.submission(sid)
        if row is None:
            return HTMLResponse(
                "<!doctype html><html lang='en'><title>Not found</title>"
                "<h1>No such submission</h1></html>",
                status_code=404,
            )
        return HTMLResponse(status_page(status_of(row)))

    # each accepted entry's trajectory viewer, exported by the worker (static files)
    cfg.views_dir.mkdir(parents=True, exist_ok=True)
    app.mount("/view", StaticFiles(directory=cfg.views_dir, html=True), name="view")
    return app


def serve(cfg: HubConfig, host: str, port: int, on_ready: Callable[[], None] | None = None) -> int:
    """``vical hub serve``: uvicorn on ``host:port``. SIGTERM or Ctrl-C: stop accepting,
    let uploads in flight finish (up to 60 s), exit 0."""
    import uvicorn

    from vical.hub.logs import setup

    setup()
    app = create_app(cfg)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        timeout_graceful_shutdown=60,
        limit_concurrency=1000,
        backlog=2048,
    )
    server = uvicorn.Server(config)
    log(
        logger,
        "hub serving",
        host=host,
        port=port,
        database=app.state.hub.engine.url.render_as_string(),
        store=str(Path(cfg.store_dir).resolve()),
    )
    # uvicorn handles SIGTERM/SIGINT itself (stop accepting, finish requests in flight)
    # and raises them again once it has stopped: the handlers it then finds end quietly
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run()
    return 0
