"""Backup and restore of the hub: the database's rows and the bundle store.

A backup is a folder: ``rows.json`` (every row of every table, read in one
transaction, so it is one consistent snapshot of a live hub), ``store/`` (the
bundles those rows name, copied after the snapshot: a row is only ever written
after its bundle is stored, so every bundle a row names is there) and
``backup.json`` (the schema version, the counts and each bundle's sha256).
:func:`restore` loads it into an empty database at the same schema version and an
empty store, checking every bundle's hash. Jobs that were running when the backup was
taken are taken again by the workers once their leases expire.

The same works on SQLite and PostgreSQL, and moves a hub from one to the other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from vical.hub.config import HubError
from vical.hub.db import Base, Event, Submission, TeamKey, head_version, migrate, schema_version
from vical.hub.store import BundleStore

# in the order their foreign keys need
TABLES = tuple(Base.metadata.tables[m.__tablename__] for m in (TeamKey, Submission, Event))


def backup(engine: Engine, store: BundleStore, out: Path) -> dict[str, Any]:
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise HubError(f"{out} is not empty: back up into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        version = schema_version(conn)
        for table in TABLES:
            result = conn.execute(select(table).order_by(*table.primary_key.columns))
            rows[table.name] = [dict(r._mapping) for r in result]
    (out / "rows.json").write_text(json.dumps(rows, sort_keys=True))
    shas = sorted({r["bundle_sha256"] for r in rows["submissions"]})
    for sha in shas:
        src = store.path(sha)
        dest = out / "store" / src.relative_to(store.root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    meta = {
        "schema": version,
        "counts": {name: len(v) for name, v in rows.items()},
        "bundles": shas,
    }
    (out / "backup.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


def restore(engine: Engine, store: BundleStore, src: Path) -> dict[str, Any]:
    from vical.hub.client import file_sha256

    src = Path(src)
    try:
        meta = json.loads((src / "backup.json").read_text())
        rows = json.loads((src / "rows.json").read_text())
    except (OSError, ValueError) as e:
        raise HubError(f"{src} is not a hub backup ({e})") from None
    migrate(engine)
    with engine.connect() as conn:
        if meta["schema"] != schema_version(conn):
            raise HubError(
                f"the backup is at schema {meta['schema']}, this hub at {head_version()}"
            )
        if conn.execute(select(func.count()).select_from(Submission)).scalar_one():
            raise HubError("the database already holds submissions: restore into an empty one")
    for sha in meta["bundles"]:
        f = src / "store" / sha[:2] / f"{sha}.tar.gz"
        if not f.is_file() or file_sha256(f) != sha:
            raise HubError(f"the backup's bundle {sha} is missing or damaged; nothing restored")
    for sha in meta["bundles"]:
        dest = store.path(sha)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "store" / sha[:2] / f"{sha}.tar.gz", dest)
    with engine.begin() as conn:
        for table in TABLES:
            if rows.get(table.name):
                conn.execute(table.insert(), rows[table.name])
        if engine.dialect.name == "postgresql":  # the events id sequence continues after the rows
            conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('events', 'id'), "
                "COALESCE((SELECT MAX(id) FROM events), 0) + 1, false)"
            )
    return dict(meta)
