"""The hub's settings: one dataclass, filled from the command line or ``VICAL_HUB_*``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from vical.errors import VicalError


class HubError(VicalError, ValueError):
    """The hub cannot start or an operation cannot run; the message says why."""


MiB = 1024 * 1024


def _default_home() -> Path:
    return Path(os.environ.get("VICAL_HUB_HOME", "hub-data"))


@dataclass
class HubConfig:
    """Everything the server and the workers read.

    ``database``: an SQLAlchemy URL; empty means the embedded default, an SQLite file
    ``home/hub.sqlite``. PostgreSQL: ``postgresql+psycopg://user:pass@host/db``.
    """

    home: Path = field(default_factory=_default_home)
    database: str = ""
    admin_token: str = ""  # empty: the admin API is closed
    max_upload_bytes: int = 512 * MiB
    uploads_per_key_per_hour: int = 20
    uploads_per_address_per_hour: int = 60
    lease_seconds: float = 60.0
    max_attempts: int = 5
    job_memory_bytes: int = 4096 * MiB
    job_cpu_seconds: int = 3600
    job_wall_seconds: float = 7200.0
    job_file_bytes: int = 2048 * MiB
    job_workers: int = 1  # parallel replays inside one job
    poll_seconds: float = 1.0
    drain_seconds: float = 600.0  # SIGTERM: how long a worker lets its job finish
    export_viewer: bool = True  # accepted bundles: export `vical view`'s trajectory viewer

    @property
    def store_dir(self) -> Path:
        return self.home / "store"

    @property
    def views_dir(self) -> Path:
        """Trajectory viewers of accepted entries, one folder per entry id."""
        return self.store_dir / "views"

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    def database_url(self) -> str:
        if self.database:
            return self.database
        return f"sqlite:///{(self.home / 'hub.sqlite').resolve()}"

    @classmethod
    def from_env(cls, **overrides: object) -> HubConfig:
        """Defaults, then ``VICAL_HUB_<FIELD>`` variables, then ``overrides`` (not None)."""
        cfg = cls()
        for f in fields(cls):
            raw = os.environ.get(f"VICAL_HUB_{f.name.upper()}")
            if raw is None:
                continue
            current = getattr(cfg, f.name)
            try:
                if isinstance(current, bool):
                    if raw.lower() not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                        raise ValueError(raw)
                    value: object = raw.lower() in ("1", "true", "yes", "on")
                else:
                    value = type(current)(raw) if not isinstance(current, Path) else Path(raw)
            except ValueError:
                raise HubError(
                    f"VICAL_HUB_{f.name.upper()}={raw!r}: not a {type(current).__name__}"
                ) from None
            setattr(cfg, f.name, value)
        for name, value in overrides.items():
            if value is not None:
                setattr(cfg, name, value)
        return cfg
