"""The content-addressed bundle store: ``store/ab/<sha256>.tar.gz``.

An upload streams into a temporary file beside the store (same file system), hashed
while it streams and refused the moment it passes the size cap; it takes its final
name only after its bytes are on disk (``fsync`` of the file, ``rename``, ``fsync`` of
the folder), so a name in the store always holds the whole bundle whose hash it is,
and an interrupted or refused upload leaves nothing behind but a temporary file that
:meth:`BundleStore.sweep` removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import time
from pathlib import Path

from vical.hub.config import HubError

SHA256 = re.compile(r"[0-9a-f]{64}")
_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64]


def _orphan(name: str) -> bool:
    """Whether a temporary upload was left by a process of this host that is gone."""
    parts = name.split("-")
    if len(parts) < 5 or parts[1] != _HOST or not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class TooLarge(HubError):
    """An upload passed the size cap; nothing of it is kept."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Upload:
    """One upload in progress: :meth:`write` chunks, then :meth:`commit` or :meth:`discard`."""

    def __init__(self, store: BundleStore, cap: int) -> None:
        self.store = store
        self.cap = cap
        self.size = 0
        self._hash = hashlib.sha256()
        # the host and process in the name: a restarted server removes what a dead one left
        self.tmp = store.tmp_dir / f"up-{_HOST}-{os.getpid()}-{time.monotonic_ns()}-{id(self)}"
        self._f = open(self.tmp, "xb")  # noqa: SIM115 (closed by commit or discard)

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.cap:
            self.discard()
            raise TooLarge(f"the upload passed the size cap of {self.cap} bytes; nothing was kept")
        self._hash.update(chunk)
        self._f.write(chunk)

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    def flush(self) -> None:
        """The bytes so far on disk (``fsync``)."""
        self._f.flush()
        os.fsync(self._f.fileno())

    def commit(self) -> Path:
        """Give the upload its content address; returns the stored path (durable)."""
        self.flush()
        self._f.close()
        dest = self.store.path(self.sha256)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.tmp, dest)
        _fsync_dir(dest.parent)
        return dest

    def discard(self) -> None:
        self._f.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


class BundleStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.tmp_dir = self.root / "tmp"
        self.tmp_dir.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        if not SHA256.fullmatch(sha256):
            raise HubError(f"{sha256!r} is not a sha256 digest (64 lowercase hex digits)")
        return self.root / sha256[:2] / f"{sha256}.tar.gz"

    def begin(self, cap: int) -> Upload:
        return Upload(self, cap)

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def sweep(self, older_than: float = 0.0) -> int:
        """Remove temporary files of uploads that never finished (their process of this
        host is gone, or they are older than ``older_than`` seconds); returns how many."""
        n = 0
        now = time.time()
        for p in self.tmp_dir.iterdir():
            try:
                if _orphan(p.name) or now - p.stat().st_mtime >= older_than:
                    p.unlink()
                    n += 1
            except FileNotFoundError:
                continue
        return n

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.glob("??/*.tar.gz") if p.is_file())
