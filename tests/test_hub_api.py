"""The hub's intake API in process (FastAPI's test client): keys, signatures, the size
and hash checks, rate limits, listing and withdrawing, the admin token, health, the
OpenAPI schema; the worker's limits; backup and restore across SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.hub_support import fresh_database
from vical.hub import auth
from vical.hub.app import create_app
from vical.hub.config import HubConfig
from vical.hub.db import make_engine
from vical.run import RunOptions, run_eval
from vical.run.doctor import skipped_entry
from vical.spec import select_tasks
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen, load_private, public_pem

ADMIN = {"Authorization": "Bearer admin-secret"}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    d = tmp_path_factory.mktemp("hubapi")
    team, _ = keygen(d / "team")
    other, _ = keygen(d / "other")
    run_eval(
        select_tasks("taxi/state1"),
        d / "run",
        options=RunOptions(workers=1, progress=False, frames="none", doctor=skipped_entry("t")),
    )
    for k in range(3):
        make_bundle(d / "run", team, d / f"b{k}.tar.gz", team=f"Team {k}", partial=True)
    make_bundle(d / "run", other, d / "other.tar.gz", team="Other", partial=True)
    return d


def _hub(tmp_path, database: str | None = None, **cfg) -> tuple[TestClient, HubConfig]:
    config = HubConfig(
        home=tmp_path / "home",
        database=database or f"sqlite:///{tmp_path / 'hub.sqlite'}",
        admin_token="admin-secret",
        **cfg,
    )
    return TestClient(create_app(config)), config


def _register(c: TestClient, key_file, team="Team A", approve=True) -> str:
    key = load_private(key_file)
    body = json.dumps({"team": team, "public_key": public_pem(key.public_key()).decode()}).encode()
    h = auth.signed_headers(key, "POST", "/api/keys", hashlib.sha256(body).hexdigest())
    r = c.post("/api/keys", content=body, headers=h)
    assert r.status_code in (200, 201), r.text
    kid = r.json()["key_id"]
    if approve:
        assert c.post(f"/api/admin/keys/{kid}/approve", headers=ADMIN).status_code == 200
    return kid


def _put(c: TestClient, bundle, key_file, **override):
    data = bundle.read_bytes()
    sha = override.pop("sha", hashlib.sha256(data).hexdigest())
    h = auth.signed_headers(load_private(key_file), "PUT", "/api/submissions", sha)
    h.update(override)
    return c.put("/api/submissions", content=data, headers=h)


def test_health_readiness_and_openapi(tmp_path):
    c, cfg = _hub(tmp_path)
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/readyz").json() == {"status": "ready"}
    paths = c.get("/openapi.json").json()["paths"]
    for p in ("/api/submissions", "/api/submissions/{sid}", "/api/leaderboard", "/api/keys"):
        assert p in paths, p
    assert "application/gzip" in paths["/api/submissions"]["put"]["requestBody"]["content"]
    engine = make_engine(cfg.database_url())
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM alembic_version"))
    r = c.get("/readyz")
    assert r.status_code == 503 and "schema at None" in r.json()["problems"][0]


def test_an_upload_needs_an_approved_key_and_its_signature(kit, tmp_path):
    c, cfg = _hub(tmp_path)
    bundle, key = kit / "b0.tar.gz", kit / "team"
    assert c.put("/api/submissions", content=b"x").status_code == 401
    r = _put(c, bundle, key)
    assert r.status_code == 403 and "vical hub register" in r.json()["error"]
    kid = _register(c, key, approve=False)
    r = _put(c, bundle, key)
    assert r.status_code == 403 and "pending" in r.json()["error"]
    assert c.post(f"/api/admin/keys/{kid}/approve").status_code == 401  # no token
    assert c.post(f"/api/admin/keys/{kid}/approve", headers=ADMIN).status_code == 200
    r = _put(
        c,
        bundle,
        key,
        **{
            auth.SIG: auth.signed_headers(load_private(kit / "other"), "PUT", "/api/submissions")[
                auth.SIG
            ]
        },
    )
    assert r.status_code == 401 and "does not match" in r.json()["error"]
    r = _put(c, bundle, key, **{auth.TIME: str(int(time.time()) - 3600)})
    assert r.status_code == 401 and "clock" in r.json()["error"]
    r = _put(c, bundle, key, sha="0" * 64)
    assert r.status_code == 400 and "declared" in r.json()["error"]
    # a bundle another key signed, sent with this key: refused before it is queued
    r = _put(c, kit / "other.tar.gz", key)
    assert r.status_code == 422 and "refused before verification" in r.json()["error"]
    assert list((cfg.store_dir / "tmp").iterdir()) == [] and list(cfg.store_dir.glob("??/*")) == []
    r = _put(c, bundle, key)
    assert r.status_code == 202 and r.json()["state"] == "queued"
    again = _put(c, bundle, key)
    assert again.status_code == 200 and again.json()["id"] == r.json()["id"]
    sha = hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert (cfg.store_dir / sha[:2] / f"{sha}.tar.gz").read_bytes() == bundle.read_bytes()


def test_rate_limits_per_key_and_per_address(kit, tmp_path):
    c, _ = _hub(tmp_path, uploads_per_key_per_hour=1)
    _register(c, kit / "team")
    assert _put(c, kit / "b0.tar.gz", kit / "team").status_code == 202
    r = _put(c, kit / "b1.tar.gz", kit / "team")
    assert r.status_code == 429 and "last hour" in r.json()["error"] and r.headers["retry-after"]
    c2, _ = _hub(tmp_path / "2", uploads_per_address_per_hour=2)
    _register(c2, kit / "team")
    codes = [_put(c2, kit / f"b{k}.tar.gz", kit / "team").status_code for k in range(3)]
    assert codes == [202, 202, 429]


def test_list_withdraw_and_the_leaderboard(kit, tmp_path):
    from vical.hub import queue
    from vical.hub.job import run_job

    c, cfg = _hub(tmp_path)
    _register(c, kit / "team")
    _register(c, kit / "other", team="Other")
    sid = _put(c, kit / "b0.tar.gz", kit / "team").json()["id"]
    other = _put(c, kit / "b1.tar.gz", kit / "team").json()["id"]
    # verify one the way a worker's child does, and publish it
    engine = make_engine(cfg.database_url())
    claim = queue.claim(engine, "test", 60, 5)
    assert claim is not None and claim.submission_id == sid
    (tmp_path / "job").mkdir()
    (tmp_path / "team.pub").write_bytes(kit.joinpath("team.pub").read_bytes())
    result = run_job(
        cfg.store_dir / claim.bundle_sha256[:2] / f"{claim.bundle_sha256}.tar.gz",
        tmp_path / "team.pub",
        tmp_path / "job",
        1,
    )
    assert result["state"] == "accepted" and json.loads(
        (tmp_path / "job" / "progress.json").read_text()
    ) == {"done": 1, "total": 1}
    assert queue.finish(engine, claim, "test", "accepted", result["verdict"], None, result["entry"])
    board = c.get("/api/leaderboard").json()["entries"]
    assert [e["team"] for e in board] == ["Team 0"]
    mine = auth.signed_headers(load_private(kit / "team"), "GET", "/api/submissions")
    listed = c.get("/api/submissions", headers=mine).json()["submissions"]
    assert {s["id"] for s in listed} == {sid, other}
    # only the key that sent it can withdraw it
    h = auth.signed_headers(load_private(kit / "other"), "DELETE", f"/api/submissions/{sid}")
    assert c.delete(f"/api/submissions/{sid}", headers=h).status_code == 404
    h = auth.signed_headers(load_private(kit / "team"), "DELETE", f"/api/submissions/{sid}")
    r = c.delete(f"/api/submissions/{sid}", headers=h)
    assert r.status_code == 200 and r.json()["state"] == "withdrawn"
    assert c.get("/api/leaderboard").json()["entries"] == []
    assert "withdrawn" in c.get(f"/submissions/{sid}").text
    engine.dispose()


def _worker_run(kit, tmp_path, **limits):
    from vical.hub.worker import Worker

    c, cfg = _hub(tmp_path, **limits)
    _register(c, kit / "team")
    sid = _put(c, kit / "b2.tar.gz", kit / "team").json()["id"]
    w = Worker(cfg, name="limits")
    assert w.run(max_jobs=1) == 0
    assert not list(cfg.work_dir.iterdir())  # the job's folder is removed
    return c.get(f"/api/submissions/{sid}").json()


def test_a_job_past_its_time_limit_fails_with_the_reason(kit, tmp_path):
    s = _worker_run(kit, tmp_path, job_wall_seconds=0.5)
    assert (
        s["state"] == "failed"
        and s["verdict"] == "failed: verification passed its time limit (0.5 s)"
    )


def test_a_job_past_its_memory_limit_fails_with_the_reason(kit, tmp_path):
    s = _worker_run(kit, tmp_path, job_memory_bytes=150 * 1024 * 1024)
    assert s["state"] == "failed" and "memory limit (157286400 bytes)" in s["verdict"], s


@pytest.mark.parametrize(("source", "target"), [("sqlite", "postgresql"), ("postgresql", "sqlite")])
def test_backup_and_restore_move_a_hub_between_databases(kit, tmp_path, source, target):
    from vical.hub.backup import backup, restore
    from vical.hub.config import HubError
    from vical.hub.store import BundleStore

    src_db = fresh_database(source, tmp_path / "a")
    dst_db = fresh_database(target, tmp_path / "b")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a_url, b_url = next(src_db), next(dst_db)
    try:
        c, cfg = _hub(tmp_path / "a", a_url)
        _register(c, kit / "team")
        ids = [_put(c, kit / f"b{k}.tar.gz", kit / "team").json()["id"] for k in range(2)]
        a = make_engine(a_url)
        meta = backup(a, BundleStore(cfg.store_dir), tmp_path / "backup")
        assert meta["counts"] == {"keys": 1, "submissions": 2, "events": 2}
        with pytest.raises(HubError, match="not empty"):
            backup(a, BundleStore(cfg.store_dir), tmp_path / "backup")
        b = make_engine(b_url)
        store_b = BundleStore(tmp_path / "b" / "home" / "store")
        restore(b, store_b, tmp_path / "backup")
        c2, _ = _hub(tmp_path / "b", b_url)
        for sid in ids:
            assert (
                c2.get(f"/api/submissions/{sid}").json() == c.get(f"/api/submissions/{sid}").json()
            )
        assert sorted(p.name for p in store_b.files()) == sorted(
            p.name for p in BundleStore(cfg.store_dir).files()
        )
        # the restored hub takes new uploads (its sequences continue) and refuses a second restore
        assert _put(c2, kit / "b2.tar.gz", kit / "team").status_code == 202
        with pytest.raises(HubError, match="restore into an empty one"):
            restore(b, store_b, tmp_path / "backup")
        a.dispose()
        b.dispose()
    finally:
        next(src_db, None)
        next(dst_db, None)


def test_admin_commands_keys_approve_requeue_backup(kit, tmp_path):
    from typer.testing import CliRunner

    from vical.cli import app

    home = ["--home", str(tmp_path / "home"), "--database", f"sqlite:///{tmp_path / 'hub.sqlite'}"]
    run = CliRunner().invoke
    r = run(app, ["hub", "admin", "add-key", str(kit / "team.pub"), "--team", "Team A", *home])
    assert r.exit_code == 0 and "approved" in r.output, r.output
    c, cfg = _hub(tmp_path)
    kid = _register(c, kit / "other", team="Other", approve=False)
    listed = run(app, ["hub", "admin", "keys", *home]).output.splitlines()
    assert sorted(line.split("\t")[1:] for line in listed) == [
        ["approved", "Team A"],
        ["pending", "Other"],
    ]
    assert run(app, ["hub", "admin", "approve", kid, *home]).exit_code == 0
    assert _put(c, kit / "other.tar.gz", kit / "other").status_code == 202
    r = run(app, ["hub", "admin", "approve", "0" * 16, *home])
    assert r.exit_code == 2 and "no key 0000000000000000" in r.output
    # a failed job queued again by a maintainer
    s = _worker_run(kit, tmp_path / "w", job_wall_seconds=0.5)
    home_w = [
        "--home",
        str(tmp_path / "w" / "home"),
        "--database",
        f"sqlite:///{tmp_path / 'w' / 'hub.sqlite'}",
    ]
    assert run(app, ["hub", "admin", "requeue", s["id"], *home_w]).exit_code == 0
    c2, _ = _hub(tmp_path / "w")
    assert c2.get(f"/api/submissions/{s['id']}").json()["state"] == "queued"
    r = run(app, ["hub", "admin", "backup", str(tmp_path / "bk"), *home_w])
    assert r.exit_code == 0 and "1 bundles" in r.output, r.output


def test_a_worker_waits_out_an_unreachable_database(tmp_path, caplog):
    import logging
    import threading

    from vical.hub.worker import Worker

    cfg = HubConfig(home=tmp_path / "home", poll_seconds=0.2)
    w = Worker(cfg, make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none"), name="w")
    threading.Timer(2.5, w.stopping.set).start()
    with caplog.at_level(logging.WARNING, logger="vical.hub.worker"):
        assert w.run() == 0  # no crash: it retried until told to stop
    assert [r.getMessage() for r in caplog.records].count("database unavailable") >= 2


@pytest.mark.parametrize(
    ("argv", "package"),
    [
        (["hub", "serve"], "fastapi"),
        (["hub", "status", "x", "--to", "http://127.0.0.1:9"], "httpx"),
        (["hub", "admin", "keys"], "sqlalchemy"),
    ],
)
def test_a_missing_hub_package_is_one_error_naming_the_extra(argv, package, monkeypatch):
    import sys

    from typer.testing import CliRunner

    from vical.cli import app

    monkeypatch.setitem(sys.modules, package, None)  # as if it were not installed
    r = CliRunner().invoke(app, argv)
    assert r.exit_code != 0 and f"needs the Python package '{package}'" in r.output, r.output
    assert "pip install 'vical[hub]'" in r.output and "Traceback" not in r.output
