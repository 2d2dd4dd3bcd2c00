"""The hub's data model, migrations, store and queue, on SQLite and PostgreSQL: the
migrations make exactly the models' schema; a claim is atomic (many workers, each job
once); a lost lease fences its worker out; the store streams, caps and leaves nothing."""

from __future__ import annotations

import hashlib
import threading
import time

import pytest
from sqlalchemy import func, insert, select, update

from tests.hub_support import BACKENDS, fresh_database
from vical.hub import queue
from vical.hub.db import (
    ACCEPTED,
    QUEUED,
    RUNNING,
    Base,
    Event,
    Submission,
    TeamKey,
    make_engine,
    migrate,
    schema_version,
)
from vical.hub.store import BundleStore, TooLarge


@pytest.fixture(params=BACKENDS)
def engine(request, tmp_path):
    gen = fresh_database(request.param, tmp_path)
    url = next(gen)
    eng = make_engine(url)
    migrate(eng)
    yield eng
    eng.dispose()
    next(gen, None)


def _queue(engine, n: int) -> list[str]:
    now = time.time()
    with engine.begin() as c:
        c.execute(
            insert(TeamKey).values(
                key_id="k" * 16, team="T", public_pem="-", status="approved", created_at=now
            )
        )
        for i in range(n):
            c.execute(
                insert(Submission).values(
                    id=f"s{i:03d}",
                    key_id="k" * 16,
                    team="T",
                    bundle_sha256=hashlib.sha256(str(i).encode()).hexdigest(),
                    size=1,
                    address="a",
                    state=QUEUED,
                    created_at=now + i,
                    updated_at=now,
                    attempts=0,
                )
            )
    return [f"s{i:03d}" for i in range(n)]


def test_migrations_make_the_models_schema_and_run_twice(engine):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with engine.connect() as c:
        diff = compare_metadata(MigrationContext.configure(c), Base.metadata)
        assert diff == [], diff
        assert schema_version(c) == "0001"
    migrate(engine)  # at head: a no-op
    with engine.connect() as c:
        assert schema_version(c) == "0001"


def test_concurrent_claims_take_each_job_once(engine):
    ids = _queue(engine, 12)
    got: list[queue.Claim] = []
    lock = threading.Lock()

    def work(name: str) -> None:
        while (c := queue.claim(engine, name, 60, 5)) is not None:
            with lock:
                got.append(c)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.submission_id for c in got) == ids  # every job, none twice
    assert queue.claim(engine, "late", 60, 5) is None
    with engine.connect() as c:
        assert c.execute(select(func.count()).where(Submission.state == RUNNING)).scalar() == 12


def test_a_lost_lease_is_taken_over_and_fences_the_old_worker(engine):
    (sid,) = _queue(engine, 1)
    first = queue.claim(engine, "w1", 0.3, 5)
    assert first is not None and first.submission_id == sid
    assert queue.claim(engine, "w2", 0.3, 5) is None  # leased
    assert queue.heartbeat(engine, first, 0.3, (1, 4))
    time.sleep(0.5)  # w1 died: its lease runs out
    second = queue.claim(engine, "w2", 60, 5)
    assert second is not None and second.submission_id == sid and second.attempts == 2
    # the old worker comes back: nothing it writes lands
    assert not queue.heartbeat(engine, first, 60)
    assert not queue.finish(engine, first, "w1", ACCEPTED, "accepted: late")
    assert queue.finish(engine, second, "w2", ACCEPTED, "accepted: 4 tasks", progress=(4, 4))
    assert not queue.finish(engine, second, "w2", ACCEPTED, "accepted: twice")
    with engine.connect() as c:
        row = c.execute(select(Submission).where(Submission.id == sid)).one()
        kinds = [k for (k,) in c.execute(select(Event.kind).order_by(Event.id))]
    assert row.state == ACCEPTED and row.verdict == "accepted: 4 tasks"
    assert (row.progress_done, row.progress_total) == (4, 4) and row.lease_token is None
    assert kinds == ["claimed", "claimed", ACCEPTED]


def test_release_hands_the_job_back_without_counting_it(engine):
    (sid,) = _queue(engine, 1)
    c1 = queue.claim(engine, "w1", 60, 5)
    assert c1 is not None and queue.release(engine, c1, "w1", "stopping")
    c2 = queue.claim(engine, "w2", 60, 5)
    assert c2 is not None and c2.attempts == 1


def test_a_job_whose_workers_keep_dying_fails_after_max_attempts(engine):
    (sid,) = _queue(engine, 1)
    for _ in range(2):
        assert queue.claim(engine, "w", 0.01, 2) is not None
        time.sleep(0.05)
    assert queue.claim(engine, "w", 0.01, 2) is None  # a third loss: failed, not run
    with engine.connect() as c:
        row = c.execute(select(Submission).where(Submission.id == sid)).one()
    assert row.state == "failed" and "lost 2 times" in row.verdict


def test_withdrawn_jobs_are_not_claimed(engine):
    ids = _queue(engine, 2)
    with engine.begin() as c:
        c.execute(update(Submission).where(Submission.id == ids[0]).values(state="withdrawn"))
    got = queue.claim(engine, "w", 60, 5)
    assert got is not None and got.submission_id == ids[1]


def test_store_streams_hashes_and_addresses_by_content(tmp_path):
    store = BundleStore(tmp_path / "store")
    up = store.begin(cap=1000)
    for chunk in (b"a" * 400, b"b" * 400):
        up.write(chunk)
    path = up.commit()
    sha = hashlib.sha256(b"a" * 400 + b"b" * 400).hexdigest()
    assert path == store.path(sha) and path.read_bytes() == b"a" * 400 + b"b" * 400
    assert list(store.tmp_dir.iterdir()) == [] and store.files() == [path]


def test_store_refuses_past_the_cap_and_keeps_nothing(tmp_path):
    store = BundleStore(tmp_path / "store")
    up = store.begin(cap=1000)
    up.write(b"x" * 999)
    with pytest.raises(TooLarge, match="size cap of 1000 bytes"):
        up.write(b"xx")
    assert list(store.tmp_dir.iterdir()) == [] and store.files() == []


def test_store_names_are_digests_only(tmp_path):
    from vical.hub.config import HubError

    with pytest.raises(HubError, match="not a sha256"):
        BundleStore(tmp_path).path("../../etc/passwd")
