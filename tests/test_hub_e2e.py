"""``vical hub`` end to end, on SQLite and PostgreSQL: a server and two workers in their
own processes; honest bundles and forged ones from the attack tests' recipes, each
verdict seen on the status API and on the pages in a real browser; kill -9 of a worker
mid-job and of the server mid-upload lose and duplicate nothing; SIGTERM drains."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from tests.conftest import processes_naming
from tests.hub_support import (
    BACKENDS,
    Server,
    approve,
    forged,
    fresh_database,
    hub_env,
    model_run,
    put_headers_only,
    worker,
)
from tests.test_submit import _edit_score
from tests.test_submit_attacks import _edit_log, _logs, _set_condition
from vical.hub import auth, client
from vical.hub.db import Event, Submission, make_engine
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen, load_private

FAST = {"VICAL_HUB_LEASE_SECONDS": "2", "VICAL_HUB_POLL_SECONDS": "0.2"}


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    d = tmp_path_factory.mktemp("hubkit")
    priv, _ = keygen(d / "team")
    model_run(d / "demos")
    model_run(d / "nodemos", demos=False)
    for name in ("demos", "nodemos"):
        make_bundle(d / name, priv, d / f"{name}.tar.gz", team="Team A", partial=True)

    def no_steps(root):
        for log in _logs(root):
            _edit_log(log, lambda recs: [r for r in recs if r["type"] != "step"])

    forgeries = {
        "relabelled": (
            forged(d, priv, "nodemos", "relabelled", lambda r: _set_condition(r, demos=True)),
            "the run's condition (demos on)",
        ),
        "no-steps": (forged(d, priv, "demos", "no-steps", no_steps), "missing step record"),
        "score": (
            forged(d, priv, "demos", "score", lambda r: _edit_score(r, 100.0)),
            "failed replay verification",
        ),
    }
    other, _ = keygen(d / "stranger")
    make_bundle(d / "demos", other, d / "stranger.tar.gz", team="Mallory", partial=True)
    return {"dir": d, "key": d / "team", "forgeries": forgeries, "copies": _copies(d, 3)}


def _copies(d: Path, n: int) -> list[Path]:
    """``n`` distinct honest bundles of one run (each under another team name)."""
    out = []
    for k in range(n):
        b = d / f"copy{k}.tar.gz"
        if not b.exists():
            make_bundle(d / "demos", d / "team", b, team=f"Team {k}", partial=True)
        out.append(b)
    return out


# The end-to-end tests run on one database in the default suite: PostgreSQL where the
# machine has one (CI does), else SQLite; the other one under ``slow``.
_MAIN = "postgresql" if os.environ.get("VICAL_TEST_POSTGRES") else "sqlite"


@pytest.fixture(
    params=[b if b == _MAIN else pytest.param(b, marks=pytest.mark.slow) for b in BACKENDS]
)
def database(request, tmp_path):
    gen = fresh_database(request.param, tmp_path)
    yield next(gen)
    next(gen, None)


def _wait(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _final_events(engine) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    with engine.connect() as c:
        for sid, kind in c.execute(select(Event.submission_id, Event.kind).order_by(Event.id)):
            if kind in ("accepted", "rejected", "failed"):
                out.setdefault(sid, []).append(kind)
    return out


def test_end_to_end_honest_and_forged_bundles(kit, database, tmp_path, browser):
    from typer.testing import CliRunner

    from vical.cli import app

    home = tmp_path / "home"
    env = hub_env(**FAST)
    server = Server(home, database, env)
    workers = [worker(home, database, env, f"w{i}") for i in range(2)]
    try:
        approve(server.url, kit["key"])
        # the honest run, bundled, uploaded and followed to its verdict by `vical submit --to`
        r = CliRunner().invoke(
            app,
            [
                "submit",
                str(kit["dir"] / "demos"),
                "--key",
                str(kit["key"]),
                "--partial",
                "--team",
                "Team A",
                "-o",
                str(tmp_path / "honest.tar.gz"),
                "--to",
                server.url,
            ],
        )
        assert r.exit_code == 0, r.output
        said = " ".join(r.output.split())
        honest_id = re.search(r"uploaded: submission ([0-9a-f]{32})", said).group(1)
        assert said.endswith(": accepted: 2 tasks replayed and verified"), said
        # each forgery: accepted at intake (signed by the approved key), rejected by replay
        ids = {}
        for name, (bundle, _) in kit["forgeries"].items():
            ids[name] = client.upload(server.url, bundle, kit["key"])["id"]
        for name, (_, reason) in kit["forgeries"].items():
            s = client.follow(server.url, ids[name], lambda _line: None, interval=0.2, timeout=120)
            assert s["state"] == "rejected" and reason in s["verdict"], (name, s)
            assert "\n" not in s["verdict"]
        # a bundle signed by another key is refused at intake, nothing queued
        with pytest.raises(client.HubError, match=r"422.*refused before verification"):
            client.upload(server.url, kit["dir"] / "stranger.tar.gz", kit["key"])
        board = httpx.get(server.url + "/api/leaderboard").json()["entries"]
        assert [e["team"] for e in board] == ["Team A"]
        entry_id = board[0]["id"]

        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{server.url}/submissions/{honest_id}")
        assert page.locator("html").get_attribute("lang") == "en"
        assert page.locator("#state").inner_text() == "accepted"
        assert "accepted: 2 tasks replayed" in page.locator("#verdict").inner_text()
        assert page.get_by_role("progressbar", name="Progress").count() == 1
        page.get_by_role("link", name="The leaderboard entry").click()
        page.wait_for_url(f"**/reports/{entry_id}.html")
        assert "(Team A)" in page.locator("h1").inner_text()
        assert page.locator("table td.name").count() == 2  # one row per environment
        # the entry's trajectory viewer, exported by the worker
        page.get_by_role("link", name="Every episode in the viewer").click()
        page.wait_for_url(f"**/view/{entry_id}/index.html")
        page.wait_for_function("document.getElementById('runs-line').textContent.length > 0")
        page.goto(f"{server.url}/submissions/{ids['score']}")
        assert page.locator("#state").inner_text() == "rejected"
        assert "failed replay verification" in page.locator("#verdict").inner_text()
        page.goto(server.url + "/")
        partial = page.locator("#partial tbody tr td.name").all_inner_texts()
        assert len(partial) == 1 and "Team A" in partial[0]
        # a live page: opened while the job waits, it reaches the verdict by itself
        live = client.upload(server.url, kit["copies"][0], kit["key"])
        page.goto(f"{server.url}/submissions/{live['id']}")
        assert page.locator("#status").get_attribute("data-state") in ("queued", "running")
        page.wait_for_function(
            "document.getElementById('status').dataset.state === 'accepted'", timeout=120_000
        )
        assert "of" in page.locator("#progress-text").inner_text()
        assert not page.locator("#entry").is_hidden()
        assert not errors
        # `vical hub status` exits 0 for an accepted submission, 1 for a rejected one
        r = CliRunner().invoke(app, ["hub", "status", honest_id, "--to", server.url])
        assert r.exit_code == 0 and "accepted" in r.output, r.output
        r = CliRunner().invoke(app, ["hub", "status", ids["score"], "--to", server.url])
        assert r.exit_code == 1 and "failed replay verification" in " ".join(r.output.split())
        # --no-wait returns once the hub holds the bundle
        r = CliRunner().invoke(
            app,
            [
                "submit",
                str(kit["dir"] / "nodemos"),
                "--key",
                str(kit["key"]),
                "--partial",
                "-o",
                str(tmp_path / "later.tar.gz"),
                "--to",
                server.url,
                "--no-wait",
            ],
        )
        assert r.exit_code == 0 and "uploaded: submission" in r.output, r.output
        later = re.search(r"submission ([0-9a-f]{32})", r.output).group(1)
        assert client.status(server.url, later)["state"] in ("queued", "running")
        client.follow(server.url, later, lambda _line: None, interval=0.2, timeout=120)
    finally:
        codes = [w.stop() for w in workers] + [server.stop()]
    assert codes == [0, 0, 0]  # SIGTERM: drained, exit 0
    engine = make_engine(database)
    finals = _final_events(engine)
    assert len(finals) == 6 and all(len(v) == 1 for v in finals.values()), finals
    engine.dispose()


@pytest.mark.parametrize("kills", [2, pytest.param(20, marks=pytest.mark.slow)])
def test_kill9_of_workers_mid_job_loses_nothing(kit, database, tmp_path, kills):
    home = tmp_path / "home"
    env = hub_env(**FAST, VICAL_HUB_MAX_ATTEMPTS=str(kills + 5))  # one job may die every time
    server = Server(home, database, env)
    engine = make_engine(database)
    procs = []
    try:
        approve(server.url, kit["key"])
        ids = [client.upload(server.url, b, kit["key"])["id"] for b in kit["copies"]]
        for i in range(kills):
            w = worker(home, database, env, f"victim{i}")
            procs.append(w)
            tag = f":{w.p.pid}"

            def mine(tag=tag):
                with engine.connect() as c:
                    owners = c.execute(
                        select(Submission.lease_owner).where(Submission.state == "running")
                    ).scalars()
                    return any(o and o.endswith(tag) for o in owners)

            _wait(mine, 60, "the worker to claim a job")
            _wait(lambda: processes_naming(str(home / "work")), 30, "its verification child")
            time.sleep(0.3)
            w.kill9()
            # its verification child dies with it (parent-death signal)
            _wait(lambda: not processes_naming(str(home / "work")), 10, "the orphan to die")
        survivors = [worker(home, database, env, f"s{i}") for i in range(2)]
        procs += survivors

        def done():
            with engine.connect() as c:
                return not c.execute(
                    select(func.count()).where(Submission.state.in_(("queued", "running")))
                ).scalar()

        _wait(done, 180, "every job to finish")
        assert [w.stop() for w in survivors] == [0, 0]
    finally:
        for p in procs:
            p.kill9()
        server.stop()
    with engine.connect() as c:
        rows = c.execute(select(Submission.id, Submission.state, Submission.entry_id)).all()
        claims = c.execute(select(func.count()).where(Event.kind == "claimed")).scalar()
    assert sorted(r.id for r in rows) == sorted(ids)
    assert all(r.state == "accepted" for r in rows), rows
    assert len({r.entry_id for r in rows}) == len(ids)
    finals = _final_events(engine)
    assert sorted(finals) == sorted(ids) and all(v == ["accepted"] for v in finals.values())
    assert claims >= kills + len(ids)  # every killed claim was taken again
    engine.dispose()


def _slow_put(url: str, bundle: Path, key: Path, out: dict, pause: float = 0.05) -> None:
    """Upload ``bundle`` in 1 KiB pieces, ``pause`` s apart (an upload that takes a while)."""
    data = bundle.read_bytes()
    sha = client.file_sha256(bundle)
    headers = auth.signed_headers(load_private(key), "PUT", "/api/submissions", sha)
    headers["Content-Length"] = str(len(data))

    def chunks():
        for i in range(0, len(data), 1024):
            yield data[i : i + 1024]
            time.sleep(pause)

    try:
        r = httpx.put(url + "/api/submissions", content=chunks(), headers=headers, timeout=60)
        out["status"], out["body"] = r.status_code, r.json()
    except httpx.HTTPError as e:
        out["error"] = e


def _uploading(home: Path) -> bool:
    tmp = home / "store" / "tmp"
    return tmp.is_dir() and any(p.stat().st_size > 0 for p in tmp.iterdir())


@pytest.mark.parametrize("kills", [1, pytest.param(20, marks=pytest.mark.slow)])
def test_kill9_of_the_server_mid_upload_loses_and_duplicates_nothing(
    kit, database, tmp_path, kills
):
    home = tmp_path / "home"
    env = hub_env()
    acked: dict[str, str] = {}  # bundle sha256 -> submission id the hub acknowledged
    bundles = _copies(kit["dir"], kills)  # a new bundle each time: a known one is not re-read
    servers: list[Server] = []

    def start() -> Server:
        servers.append(Server(home, database, env))
        return servers[-1]

    try:
        for i in range(kills):
            server = start()
            if i == 0:
                approve(server.url, kit["key"])
            # everything acknowledged before a kill is there, bundle and row
            for sha, sid in acked.items():
                s = client.status(server.url, sid)
                assert s["bundle_sha256"] == sha and s["state"] == "queued"
                assert client.file_sha256(home / "store" / sha[:2] / f"{sha}.tar.gz") == sha
            assert not list((home / "store" / "tmp").iterdir())  # a dead server's file swept
            out: dict = {}
            t = threading.Thread(target=_slow_put, args=(server.url, bundles[i], kit["key"], out))
            t.start()
            _wait(lambda: _uploading(home), 30, "the upload to start")
            server.kill9()  # mid-upload
            t.join()
            assert "error" in out, out  # never acknowledged
            server = start()
            s = client.upload(server.url, bundles[i], kit["key"])  # the client sends it again
            assert s["bundle_sha256"] not in acked
            acked[s["bundle_sha256"]] = s["id"]
            server.kill9()  # right after the acknowledgement
        server = start()
        # sending every bundle again makes no second submission of any
        again = {client.upload(server.url, b, kit["key"])["id"] for b in bundles}
        assert again == set(acked.values())
        engine = make_engine(database)
        with engine.connect() as c:
            rows = c.execute(select(Submission.id, Submission.bundle_sha256)).all()
        engine.dispose()
        assert {r.bundle_sha256: r.id for r in rows} == acked  # none lost, none duplicated
        assert len(rows) == kills
        assert server.stop() == 0
    finally:
        for srv in servers:
            srv.kill9()


def test_sigterm_lets_the_upload_in_flight_finish(kit, tmp_path):
    home = tmp_path / "home"
    database = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    server = Server(home, database, hub_env())
    approve(server.url, kit["key"])
    out: dict = {}
    t = threading.Thread(target=_slow_put, args=(server.url, kit["copies"][1], kit["key"], out))
    t.start()
    _wait(lambda: _uploading(home), 30, "the upload to start")
    os.kill(server.p.pid, signal.SIGTERM)
    t.join()
    assert out.get("status") == 202, out
    assert server.stop() == 0
    # structured logs: one JSON object a line, the upload among them with its fields
    log = [json.loads(x) for x in server.log.read_text().splitlines()]
    (accepted,) = [e for e in log if e["event"] == "upload accepted"]
    assert accepted["submission"] == out["body"]["id"] and accepted["size"] > 0
    server = Server(home, database, hub_env())
    try:
        assert client.status(server.url, out["body"]["id"])["state"] == "queued"
    finally:
        server.stop()


def test_sigterm_lets_the_worker_finish_its_job(kit, tmp_path):
    home = tmp_path / "home"
    database = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    env = hub_env(**FAST)
    server = Server(home, database, env)
    try:
        approve(server.url, kit["key"])
        sid = client.upload(server.url, kit["copies"][2], kit["key"])["id"]
        w = worker(home, database, env, "drain")
        _wait(lambda: client.status(server.url, sid)["state"] == "running", 60, "the claim")
        os.kill(w.p.pid, signal.SIGTERM)  # once: a second signal would hand the job back
        assert w.p.wait(timeout=120) == 0
        s = client.status(server.url, sid)
        assert s["state"] == "accepted", s  # finished, not abandoned
        log = [json.loads(x) for x in w.log.read_text().splitlines() if x.startswith("{")]
        assert [e["event"] for e in log][-3:] == ["stopping", "job finished", "worker stopped"]
    finally:
        server.stop()


def test_upload_past_the_cap_is_refused_and_leaves_nothing(kit, tmp_path):
    home = tmp_path / "home"
    database = f"sqlite:///{tmp_path / 'hub.sqlite'}"
    server = Server(home, database, hub_env(), "--max-upload-mb", "1")
    try:
        approve(server.url, kit["key"])
        key = load_private(kit["key"])
        # declared too large: refused before a byte is read
        h = auth.signed_headers(key, "PUT", "/api/submissions", "0" * 64)
        h["Content-Length"] = str(2 * 1024**3)
        code, body = put_headers_only(server.url, "/api/submissions", h)
        assert code == 413 and "cap is 1048576 bytes" in body["error"]

        # streamed without a length: refused when it passes the cap
        def endless():
            for _ in range(3 * 1024):
                yield b"\0" * 1024

        h = auth.signed_headers(key, "PUT", "/api/submissions", "0" * 64)
        r = httpx.put(server.url + "/api/submissions", content=endless(), headers=h)
        assert r.status_code == 413 and "size cap" in r.json()["error"]
        assert list((home / "store").rglob("*.*")) == []  # nothing left on disk
        assert not list((home / "store" / "tmp").iterdir())
        # a client that goes away mid-upload: its part is removed too
        import socket

        h = auth.signed_headers(key, "PUT", "/api/submissions", "0" * 64)
        h["Content-Length"] = "100000"
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            head = "".join(f"{k}: {v}\r\n" for k, v in h.items())
            sock.sendall(f"PUT /api/submissions HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode())
            sock.sendall(b"\0" * 20000)
            _wait(lambda: _uploading(home), 30, "the upload to start")
        _wait(lambda: "upload cut short" in server.log.read_text(), 30, "the server to notice")
        assert not list((home / "store" / "tmp").iterdir())
        assert httpx.get(server.url + "/readyz").status_code == 200
    finally:
        assert server.stop() == 0
