"""docker/hub/compose.yaml: PostgreSQL, the hub and two workers, every command one the
command line takes, every setting one the hub reads (no engine runs compose here)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from urllib.parse import urlparse

import yaml

import vical
from vical.hub.config import HubConfig

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker" / "hub" / "compose.yaml").read_text())


def _parse(argv: list[str]):
    """The click context of the command `vical ARGV` (fails on an unknown command or option)."""
    from tests.test_readme import parse

    path, _, ctx = parse(list(argv), "compose: vical " + " ".join(argv))
    return path, ctx


def test_services_postgres_hub_and_two_workers():
    s = COMPOSE["services"]
    assert set(s) == {"postgres", "hub", "worker"}
    assert s["postgres"]["image"].endswith("postgres:15")
    assert s["worker"]["deploy"]["replicas"] == 2
    for name in ("hub", "worker"):
        assert s[name]["image"] == f"${{VICAL_IMAGE:-localhost/vical:{vical.__version__}}}"
        assert s[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert s[name]["stop_grace_period"]  # time to drain on SIGTERM
        assert s[name]["volumes"] == ["hub:/out"]  # the image's user owns /out


def test_commands_and_settings_are_the_hubs():
    s = COMPOSE["services"]
    path, serve = _parse(s["hub"]["command"])
    assert path == ("hub", "serve") and serve.params["host"] == "0.0.0.0"
    assert _parse(s["worker"]["command"])[0] == ("hub", "worker")
    known = {f"VICAL_HUB_{f.name.upper()}" for f in fields(HubConfig)}
    for name in ("hub", "worker"):
        env = s[name]["environment"]
        assert set(env) <= known, set(env) - known
        url = urlparse(env["VICAL_HUB_DATABASE"])
        assert url.scheme == "postgresql+psycopg" and url.hostname == "postgres"
        assert url.path == "/" + s["postgres"]["environment"]["POSTGRES_DB"]
        assert env["VICAL_HUB_HOME"].startswith("/out/")
    port = serve.params["port"]
    assert s["hub"]["ports"] == [f"127.0.0.1:{port}:{port}"]
    assert f"127.0.0.1:{port}/readyz" in " ".join(s["hub"]["healthcheck"]["test"])
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "chown 10001:10001 /out" in dockerfile
