"""The hub's tables, engines and migrations.

One schema serves SQLite (the embedded default) and PostgreSQL (production): times
are seconds since the epoch (floats), JSON is stored as text, and the migrations
under ``vical/hub/migrations`` are the only way the schema changes (:func:`migrate`).

``keys``         a team's Ed25519 public key; ``pending`` until a maintainer approves it
``submissions``  one uploaded bundle and its verification job: state, lease, progress,
                 verdict, and the leaderboard entry once accepted
``events``       every state change of a submission (who, when, what), append-only
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    create_engine,
    event,
    insert,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from vical.hub.config import HubError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

# a submission's states; the last four are final (withdrawn may also follow accepted)
QUEUED, RUNNING = "queued", "running"
ACCEPTED, REJECTED, FAILED, WITHDRAWN = "accepted", "rejected", "failed", "withdrawn"
FINAL = (ACCEPTED, REJECTED, FAILED, WITHDRAWN)
KEY_PENDING, KEY_APPROVED, KEY_REVOKED = "pending", "approved", "revoked"


class Base(DeclarativeBase):
    pass


class TeamKey(Base):
    __tablename__ = "keys"

    key_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    team: Mapped[str] = mapped_column(String(200))
    public_pem: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default=KEY_PENDING)
    created_at: Mapped[float] = mapped_column(Float)
    approved_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (Index("ix_submissions_state_created", "state", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(ForeignKey("keys.key_id"), index=True)
    team: Mapped[str] = mapped_column(String(200))
    bundle_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    size: Mapped[int] = mapped_column(BigInteger)
    address: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lease_owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_token: Mapped[str | None] = mapped_column(String(32), nullable=True)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True)
    progress_done: Mapped[int | None] = mapped_column(Integer, nullable=True)
    progress_total: Mapped[int | None] = mapped_column(Integer, nullable=True)
    verdict: Mapped[str | None] = mapped_column(Text, nullable=True)
    report: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON: episode verdicts
    entry_id: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    entry: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON: leaderboard entry


class Event(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id"), index=True)
    at: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(200))
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
    cur.execute("PRAGMA synchronous=FULL")  # a commit is on disk when it returns
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url`` (``sqlite:///FILE`` or ``postgresql+psycopg://...``)."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql"):
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    raise HubError(
        f"database URL {url!r}: use sqlite:///FILE or postgresql+psycopg://USER:PASS@HOST/DB"
    )


def alembic_config(url: str) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (a no-op when it is there)."""
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    if engine.dialect.name == "postgresql":
        # several processes may start at once: one migrates, the others wait for it
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(4747)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return
    import fcntl

    db_file = engine.url.database or ""
    lock_path = Path(f"{db_file}.migrate-lock") if db_file not in ("", ":memory:") else None
    lock = open(lock_path, "a+b") if lock_path else None  # noqa: SIM115
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one process of this host migrates at a time
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        if lock is not None:
            lock.close()


def schema_version(conn: Connection) -> str | None:
    """The migration the database is at (None: never migrated)."""
    try:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()
    except Exception:
        return None


def head_version() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None
    return head


def add_key(conn: Connection, key_id: str, team: str, public_pem: str, status: str) -> None:
    """Register a team's public key (a key approved at once has its approval time too)."""
    now = time.time()
    conn.execute(
        insert(TeamKey).values(
            key_id=key_id,
            team=team,
            public_pem=public_pem,
            status=status,
            created_at=now,
            approved_at=now if status == KEY_APPROVED else None,
        )
    )


def add_event(
    conn: Connection, submission_id: str, kind: str, actor: str, detail: Any = None
) -> None:
    conn.execute(
        insert(Event).values(
            submission_id=submission_id,
            at=time.time(),
            kind=kind,
            actor=actor[:200],
            detail=None if detail is None else json.dumps(detail, sort_keys=True),
        )
    )
