"""A per-endpoint request rate limit shared by every worker process.

The state is one small file per endpoint (in the system temp folder), locked
with ``fcntl`` while a worker reserves its slot: requests start at least
``60 / per_minute`` seconds apart across all processes using that endpoint.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path


class RateLimiter:
    def __init__(self, endpoint: str, per_minute: float, folder: Path | None = None):
        if per_minute <= 0:
            raise ValueError(f"rate limit must be positive, got {per_minute}")
        self.interval = 60.0 / per_minute
        key = hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self.path = Path(folder or tempfile.gettempdir()) / f"vical-rate-{key}"
        self.last_slot: float | None = None  # the start time the last acquire reserved

    def next_slot(self) -> float | None:
        """The earliest start the shared state allows the next request (None before any)."""
        try:
            raw = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        return float(raw) if raw else None

    def acquire(self) -> float:
        """Wait for this request's slot; returns the seconds waited."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 64).decode().strip()
            now = time.time()
            slot = max(now, float(raw) if raw else 0.0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, f"{slot + self.interval:.6f}".encode())
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self.last_slot = slot
        wait = slot - now
        if wait > 0:
            time.sleep(wait)
        return max(wait, 0.0)
