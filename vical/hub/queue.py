"""The verification queue, kept in the ``submissions`` table.

A worker claims the oldest job that is queued, or running under a lease that has
expired (its worker died), in one statement: ``UPDATE ... WHERE id = (SELECT ...
LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING ...``. On PostgreSQL the row lock with
``SKIP LOCKED`` lets many workers on many machines claim at once without waiting
on each other or taking the same job; SQLite ignores the ``FOR UPDATE`` clause and
runs the statement under its single writer lock, so the claim is atomic on one host.

Every later write of the job (heartbeat, finish, release) names the claim's lease
token and changes nothing when the token is no longer the row's: a worker whose
lease expired and whose job was taken over cannot finish it a second time.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Engine

from vical.hub.db import (
    FAILED,
    QUEUED,
    RUNNING,
    Submission,
    add_event,
)

# a job that leaves its worker: no lease any more
_NO_LEASE = {"lease_token": None, "lease_owner": None, "lease_expires": None}


@dataclass(frozen=True)
class Claim:
    submission_id: str
    token: str
    attempts: int
    bundle_sha256: str
    key_id: str


def claim(engine: Engine, owner: str, lease_seconds: float, max_attempts: int) -> Claim | None:
    """Take the next job (None when there is none). A job whose workers were lost
    ``max_attempts`` times is failed instead of being run again."""
    while True:
        now = time.time()
        token = secrets.token_hex(16)
        t = Submission
        ready = or_(t.state == QUEUED, and_(t.state == RUNNING, t.lease_expires < now))
        pick = (
            select(t.id)
            .where(ready)
            .order_by(t.created_at, t.id)
            .limit(1)
            .with_for_update(skip_locked=True)
            .scalar_subquery()
        )
        stmt = (
            update(t)
            .where(t.id == pick)
            .where(ready)
            .values(
                state=RUNNING,
                lease_owner=owner[:200],
                lease_token=token,
                lease_expires=now + lease_seconds,
                attempts=t.attempts + 1,
                updated_at=now,
            )
            .returning(t.id, t.attempts, t.bundle_sha256, t.key_id)
        )
        with engine.begin() as conn:
            row = conn.execute(stmt).first()
            if row is None:
                return None
            sid, attempts, sha, key_id = row
            if attempts > max_attempts:
                conn.execute(
                    update(t)
                    .where(t.id == sid, t.lease_token == token)
                    .values(
                        **_NO_LEASE,
                        state=FAILED,
                        verdict=f"failed: its worker was lost {attempts - 1} times "
                        f"(the limit is {max_attempts}); a maintainer can queue it again",
                        updated_at=now,
                    )
                )
                add_event(conn, sid, "failed", owner, {"attempts": attempts - 1})
                continue
            add_event(conn, sid, "claimed", owner, {"attempt": attempts})
            return Claim(sid, token, attempts, sha, key_id)


def _update_held(
    engine: Engine, c: Claim, values: dict[str, Any], event: tuple[Any, ...] | None = None
) -> bool:
    """Write ``values`` into the job's row if the claim still holds its lease, with
    ``event`` (state, owner, detail) added in the same transaction; False (nothing
    written) when the lease was lost."""
    t = Submission
    with engine.begin() as conn:
        n = conn.execute(
            update(t)
            .where(t.id == c.submission_id, t.lease_token == c.token, t.state == RUNNING)
            .values(**values)
        ).rowcount
        if n == 1 and event is not None:
            add_event(conn, c.submission_id, *event)
    return n == 1


def heartbeat(
    engine: Engine,
    c: Claim,
    lease_seconds: float,
    progress: tuple[int, int] | None = None,
) -> bool:
    """Extend the lease (and record progress); False when the lease was lost."""
    values: dict[str, Any] = {"lease_expires": time.time() + lease_seconds}
    if progress is not None:
        values["progress_done"], values["progress_total"] = progress
    return _update_held(engine, c, values)


def finish(
    engine: Engine,
    c: Claim,
    owner: str,
    state: str,
    verdict: str,
    report: Any = None,
    entry: dict[str, Any] | None = None,
    progress: tuple[int, int] | None = None,
) -> bool:
    """Record the job's outcome once; False (nothing written) when the lease was lost."""
    more: dict[str, Any] = {}
    if progress is not None:
        more["progress_done"], more["progress_total"] = progress
    values = {
        **more,
        "state": state,
        "verdict": verdict,
        "report": None if report is None else json.dumps(report, sort_keys=True),
        "entry": None if entry is None else json.dumps(entry, sort_keys=True),
        "entry_id": None if entry is None else entry["id"],
        **_NO_LEASE,
        "updated_at": time.time(),
    }
    return _update_held(engine, c, values, (state, owner, {"verdict": verdict[:500]}))


def release(engine: Engine, c: Claim, owner: str, why: str) -> bool:
    """Give a job back to the queue unfinished (a worker told to stop); the attempt
    does not count."""
    values = {
        "state": QUEUED,
        **_NO_LEASE,
        "attempts": Submission.attempts - 1,
        "progress_done": None,
        "progress_total": None,
        "updated_at": time.time(),
    }
    return _update_held(engine, c, values, ("released", owner, {"why": why}))
