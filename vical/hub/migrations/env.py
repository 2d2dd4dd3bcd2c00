"""Alembic environment of the hub: runs on the connection :func:`vical.hub.db.migrate`
passes, or on the URL of the configuration (``alembic`` on the command line)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from vical.hub.db import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        context.configure(connection=conn, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
    with engine.begin() as c:
        context.configure(connection=c, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


run()
