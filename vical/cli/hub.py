"""``vical hub serve|worker|admin|register|status``: the leaderboard as a service."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vical.cli._common import console, fail

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from vical.hub.config import HubConfig
    from vical.hub.store import BundleStore

hub_app = typer.Typer(
    help="The leaderboard as a service: intake API, verification workers, pages.",
    no_args_is_help=True,
)
admin_app = typer.Typer(
    help="Maintainer actions on the hub's database (run where the hub runs).",
    no_args_is_help=True,
)
hub_app.add_typer(admin_app, name="admin")

HOME = typer.Option(
    None,
    "--home",
    help="Folder of the hub's data: store, work, embedded database "
    "(default: $VICAL_HUB_HOME or ./hub-data).",
)
DATABASE = typer.Option(
    None,
    "--database",
    help="SQLAlchemy URL, e.g. postgresql+psycopg://USER:PASS@HOST/DB "
    "(default: $VICAL_HUB_DATABASE, else SQLite in --home).",
)
TO = typer.Option(..., "--to", help="The hub's base URL, e.g. https://hub.example.org")


def need_hub(what: str, *modules: str) -> None:
    """One `error:` line naming the extra when a package of the hub is not installed."""
    from vical.errors import import_optional

    packages = {
        "fastapi": "fastapi",
        "uvicorn": "uvicorn",
        "sqlalchemy": "sqlalchemy",
        "alembic": "alembic",
        "httpx": "httpx",
    }
    for m in modules or ("sqlalchemy", "alembic"):
        import_optional(m, package=packages[m], extra="hub", needed_for=what)


def _config(home: Path | None, database: str | None, **more: object) -> HubConfig:
    from vical.hub.config import HubConfig

    return HubConfig.from_env(home=home, database=database, **more)


@hub_app.command("serve")
def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8470, "--port", help="Port to listen on."),
    home: Path = HOME,
    database: str = DATABASE,
    max_upload_mb: int = typer.Option(
        None, "--max-upload-mb", min=1, help="Size cap of one bundle (default 512 MiB)."
    ),
) -> None:
    """Serve the intake API, the leaderboard and the pages (admin token: $VICAL_HUB_ADMIN_TOKEN).
    SIGTERM or Ctrl-C lets uploads in flight finish, then exits 0."""
    need_hub("vical hub serve", "fastapi", "uvicorn", "sqlalchemy", "alembic")
    from vical.hub.app import serve
    from vical.hub.config import MiB

    cfg = _config(home, database, max_upload_bytes=max_upload_mb and max_upload_mb * MiB)
    raise typer.Exit(serve(cfg, host, port))


@hub_app.command("worker")
def worker_cmd(
    home: Path = HOME,
    database: str = DATABASE,
    max_jobs: int = typer.Option(None, "--max-jobs", min=1, help="Exit after this many jobs."),
) -> None:
    """Claim verification jobs and run them, until SIGTERM (which lets the job in hand
    finish, then exits 0). Run as many as you like, on as many machines as share the
    database and the bundle store."""
    need_hub("vical hub worker")
    from vical.hub.logs import setup
    from vical.hub.worker import serve_worker

    setup()
    raise typer.Exit(serve_worker(_config(home, database), max_jobs=max_jobs))


@hub_app.command("register")
def register_cmd(
    to: str = TO,
    key: Path = typer.Option(..., "--key", help="Your private key (from `vical keygen`)."),
    team: str = typer.Option(..., "--team", help="Your team's name."),
) -> None:
    """Register your public key with a hub; a maintainer approves it before you submit."""
    need_hub("vical hub register", "httpx")
    from vical.hub.client import register

    r = register(to, key, team)
    console.print(f"key {r['key_id']} of {r['team']}: {r['status']}")


@hub_app.command("status")
def status_cmd(
    submission: str = typer.Argument(..., help="Submission id (printed by `vical submit --to`)."),
    to: str = TO,
    wait: bool = typer.Option(False, "--wait", help="Follow it until the verdict."),
) -> None:
    """A submission's state, progress and verdict. Exit status 0 accepted or still in
    progress, 1 rejected, failed or withdrawn."""
    need_hub("vical hub status", "httpx")
    from vical.hub.client import follow, progress_line, status

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    s = follow(to, submission, say) if wait else status(to, submission)
    if not wait:
        say(progress_line(s))
    if s["state"] in ("rejected", "failed", "withdrawn"):
        raise typer.Exit(1)


def _engine_store(home: Path | None, database: str | None) -> tuple[HubConfig, Engine, BundleStore]:
    from vical.hub.config import HubConfig
    from vical.hub.db import make_engine, migrate
    from vical.hub.store import BundleStore

    cfg = HubConfig.from_env(home=home, database=database)
    engine = make_engine(cfg.database_url())
    migrate(engine)
    return cfg, engine, BundleStore(cfg.store_dir)


@admin_app.callback()
def _admin() -> None:
    """Maintainer actions on the hub's database (run where the hub runs)."""
    need_hub("vical hub admin")


@admin_app.command("migrate")
def admin_migrate(home: Path = HOME, database: str = DATABASE) -> None:
    """Bring the database to the newest schema (serve and worker do it when they start)."""
    from vical.hub.db import head_version

    _engine_store(home, database)
    console.print(f"schema at {head_version()}")


@admin_app.command("keys")
def admin_keys(home: Path = HOME, database: str = DATABASE) -> None:
    """List registered keys."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from vical.hub.db import TeamKey

    _, engine, _ = _engine_store(home, database)
    with Session(engine) as s:
        for k in s.scalars(select(TeamKey).order_by(TeamKey.created_at)):
            typer.echo(f"{k.key_id}\t{k.status}\t{k.team}")


def _set_key(home: Path | None, database: str | None, key_id: str, status: str) -> None:
    import time

    from sqlalchemy import update

    from vical.hub.db import KEY_APPROVED, TeamKey

    _, engine, _ = _engine_store(home, database)
    with engine.begin() as conn:
        n = conn.execute(
            update(TeamKey)
            .where(TeamKey.key_id == key_id)
            .values(status=status, approved_at=time.time() if status == KEY_APPROVED else None)
        ).rowcount
    if not n:
        fail(f"no key {key_id}: `vical hub admin keys` lists the registered ones")
    console.print(f"key {key_id}: {status}")


@admin_app.command("approve")
def admin_approve(key_id: str, home: Path = HOME, database: str = DATABASE) -> None:
    """Approve a team's key: its signed bundles are then taken."""
    _set_key(home, database, key_id, "approved")


@admin_app.command("revoke")
def admin_revoke(key_id: str, home: Path = HOME, database: str = DATABASE) -> None:
    """Revoke a team's key: no further upload is taken from it."""
    _set_key(home, database, key_id, "revoked")


@admin_app.command("add-key")
def admin_add_key(
    pubkey: Path = typer.Argument(..., help="The team's public key file (.pub)."),
    team: str = typer.Option(..., "--team", help="The team's name."),
    home: Path = HOME,
    database: str = DATABASE,
) -> None:
    """Register and approve a team's public key in one step."""
    from sqlalchemy import delete, select

    from vical.hub.db import KEY_APPROVED, TeamKey, add_key
    from vical.submit.keys import key_id, load_public

    if not pubkey.is_file():
        fail(f"{pubkey}: no such public key file")
    pem = pubkey.read_text()
    kid = key_id(load_public(pem.encode(), str(pubkey)))
    _, engine, _ = _engine_store(home, database)
    with engine.begin() as conn:
        conn.execute(delete(TeamKey).where(TeamKey.key_id == kid, TeamKey.status != KEY_APPROVED))
        if not conn.execute(select(TeamKey.key_id).where(TeamKey.key_id == kid)).first():
            add_key(conn, kid, team, pem, KEY_APPROVED)
    console.print(f"key {kid} of {team}: approved")


@admin_app.command("requeue")
def admin_requeue(submission: str, home: Path = HOME, database: str = DATABASE) -> None:
    """Queue a failed (or rejected) submission again, e.g. after raising a limit."""
    import time

    from sqlalchemy import update

    from vical.hub.db import FAILED, QUEUED, REJECTED, Submission, add_event

    _, engine, _ = _engine_store(home, database)
    with engine.begin() as conn:
        n = conn.execute(
            update(Submission)
            .where(Submission.id == submission, Submission.state.in_((FAILED, REJECTED)))
            .values(state=QUEUED, attempts=0, verdict=None, updated_at=time.time())
        ).rowcount
        if n:
            add_event(conn, submission, "requeued", "admin")
    if not n:
        fail(f"no failed or rejected submission {submission}")
    console.print(f"submission {submission}: queued")


@admin_app.command("backup")
def admin_backup(
    out: Path = typer.Argument(..., help="New folder for the backup."),
    home: Path = HOME,
    database: str = DATABASE,
) -> None:
    """Back up the database's rows and the bundle store (safe while the hub runs)."""
    from vical.hub.backup import backup

    _, engine, store = _engine_store(home, database)
    meta = backup(engine, store, out)
    console.print(f"backup {out}: {meta['counts']}, {len(meta['bundles'])} bundles")


@admin_app.command("restore")
def admin_restore(
    src: Path = typer.Argument(..., help="A folder made by `vical hub admin backup`."),
    home: Path = HOME,
    database: str = DATABASE,
) -> None:
    """Restore a backup into an empty database and store."""
    from vical.hub.backup import restore

    _, engine, store = _engine_store(home, database)
    meta = restore(engine, store, src)
    console.print(f"restored {src}: {meta['counts']}, {len(meta['bundles'])} bundles")
