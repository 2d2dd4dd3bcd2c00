"""Shared by the hub's tests: a fresh database on SQLite or PostgreSQL, a hub server
and workers in their own processes, signed requests."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PG_VAR = "VICAL_TEST_POSTGRES"
BACKENDS = ["sqlite", "postgresql"]


def postgres_url() -> str:
    """The PostgreSQL server .ci/run starts; skipped (outside CI only) without one."""
    url = os.environ.get(PG_VAR)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{PG_VAR} is not set: .ci/run starts PostgreSQL and sets it")
        pytest.skip(
            f'no PostgreSQL: set {PG_VAR} (e.g. eval "$(bash .ci/postgres.sh)"), as .ci/run does'
        )
    return url


def fresh_database(backend: str, tmp: Path):
    """A generator: the URL of an empty database, dropped afterwards (PostgreSQL)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp / 'hub.sqlite'}"
        return
    from sqlalchemy import create_engine, text

    base = postgres_url()
    name = f"hub_{secrets.token_hex(6)}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield base.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hub_env(**more: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VICAL_HUB_ADMIN_TOKEN": "admin-secret"}
    env.update(more)
    return env


class Proc:
    """A ``vical hub ...`` process in its own session, its log in a file."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        log.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(log, "ab")  # noqa: SIM115
        self.p = subprocess.Popen(
            [sys.executable, "-m", "vical.cli", "hub", *args],
            stdout=self._f,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )

    def kill9(self) -> None:
        """kill -9 the process alone (its verification child dies with it)."""
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGKILL)
        self.p.wait()
        if not self._f.closed:
            self._f.close()

    def stop(self, timeout: float = 60.0) -> int:
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=timeout)
        finally:
            if self.p.poll() is None:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()
            if not self._f.closed:
                self._f.close()
        return rc


class Server(Proc):
    def __init__(self, home: Path, database: str, env: dict[str, str], *more: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            ["serve", "--port", str(self.port), "--home", str(home), "--database", database, *more],
            home.parent / f"serve-{self.port}.log",
            env,
        )
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.p.poll() is not None or time.time() > deadline:
                raise AssertionError(f"the hub did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)


def worker(home: Path, database: str, env: dict[str, str], name: str) -> Proc:
    return Proc(
        ["worker", "--home", str(home), "--database", database],
        home.parent / f"worker-{name}.log",
        env,
    )


def approve(url: str, key_file: Path, team: str = "Team A") -> str:
    """Register ``key_file`` with the hub and approve it with the admin token."""
    from vical.hub.client import register

    kid = register(url, key_file, team)["key_id"]
    r = httpx.post(
        f"{url}/api/admin/keys/{kid}/approve",
        headers={"Authorization": "Bearer admin-secret"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    return str(kid)


def model_run(out: Path, demos: bool = True, tasks: str = "taxi/state1,cliffwalking/base") -> Path:
    """A run of the project's baseline model server (as the attack tests play it), its
    self-check recorded as skipped so bundling it does not run the doctor."""
    from vical.run import RunOptions, run_eval
    from vical.run.doctor import skipped_entry
    from vical.serve import BaselineServer
    from vical.spec import select_tasks

    with BaselineServer() as srv:
        run_eval(
            select_tasks(tasks),
            out,
            agent="openai-chat",
            agent_kwargs={"endpoint": srv.openai_base_url, "model": "baseline"},
            options=RunOptions(
                workers=1, progress=False, demos=demos, doctor=skipped_entry("hub tests")
            ),
        )
    return out


def forged(kit: Path, key: Path, which: str, name: str, edit) -> Path:
    """The bundle ``which`` edited by ``edit(root)`` and re-signed by the team's own key
    (the attack tests' recipe, tests/test_submit_attacks.py)."""
    from tests.test_submit import repack, unpack

    root = unpack(kit / f"{which}.tar.gz", kit / f"u-{name}")
    edit(root)
    return repack(root, kit / f"{name}.tar.gz", rehash=True, resign_key=key)


def put_headers_only(url: str, path: str, headers: dict[str, str]) -> tuple[int, dict]:
    """Send a PUT's headers (its declared length among them) and no body; the answer."""
    import http.client
    import json
    from urllib.parse import urlparse

    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("PUT", path)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()
