"""``vical hub worker``: claim verification jobs, run each in a limited child process,
record the verdict, publish accepted entries.

The child (:mod:`vical.hub.job`) gets an address-space limit, a CPU-time limit and a
file-size limit (``setrlimit``), its own session (so a timeout kills its whole process
group) and the parent-death signal (so a worker killed with ``kill -9`` takes its
child with it). While it runs, the worker renews the job's lease and copies its
progress into the database; a job whose worker died is taken again once its lease
expires. SIGTERM (or Ctrl-C) stops claiming and lets the job in hand finish (at most
``drain_seconds``; past that the job is handed back to the queue), then the worker
exits 0; a second signal hands the job back at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from vical.hub import queue
from vical.hub.config import HubConfig
from vical.hub.db import ACCEPTED, FAILED, REJECTED, TeamKey, make_engine, migrate
from vical.hub.logs import log
from vical.hub.store import BundleStore

logger = logging.getLogger("vical.hub.worker")


def _limits(cfg: HubConfig) -> Callable[[], None]:
    """What the child runs before it starts: resource limits, die with the parent."""
    import resource

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cfg.job_memory_bytes, cfg.job_memory_bytes))
        cpu = int(cfg.job_cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.job_file_bytes, cfg.job_file_bytes))
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    return apply


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# what a process past its address-space limit says, from Python, the loader, libc or C++
_OUT_OF_MEMORY = (
    "MemoryError",
    "Cannot allocate memory",
    "failed to map segment",
    "out of memory",
    "std::bad_alloc",
)


def _failure(rc: int, stderr: str, cfg: HubConfig) -> str:
    """A one-line reason for a child that ended without a verdict."""
    if rc == 3 or any(s.lower() in stderr.lower() for s in _OUT_OF_MEMORY):
        return f"failed: verification passed its memory limit ({cfg.job_memory_bytes} bytes)"
    if rc in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"failed: verification passed its CPU-time limit ({cfg.job_cpu_seconds} s)"
    if rc == -signal.SIGXFSZ:
        return f"failed: verification wrote a file past the limit of {cfg.job_file_bytes} bytes"
    last = stderr.strip().splitlines()[-1:] or [f"exit status {rc}"]
    return f"failed: verification stopped without a verdict ({last[0][:300]})"


def _progress(jobdir: Path) -> tuple[int, int] | None:
    """The child's last (done, total), from its progress file."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        p = json.loads((jobdir / "progress.json").read_bytes())
        return int(p["done"]), int(p["total"])
    return None


class Worker:
    def __init__(self, cfg: HubConfig, engine: Engine | None = None, name: str | None = None):
        self.cfg = cfg
        self.engine = engine or make_engine(cfg.database_url())
        self.store = BundleStore(cfg.store_dir)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.stopping = threading.Event()  # first signal: finish the job in hand, then exit
        self.abort = threading.Event()  # second signal (or drain timeout): hand it back now
        self.jobs_done = 0

    # -- signals --------------------------------------------------------------
    def install_signals(self) -> None:
        def handler(signum: int, _frame: FrameType | None) -> None:
            if self.stopping.is_set():
                self.abort.set()
            self.stopping.set()
            log(logger, "stopping", signal=signal.Signals(signum).name, worker=self.name)

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # -- the loop ---------------------------------------------------------------
    def run(self, max_jobs: int | None = None) -> int:
        log(logger, "worker started", worker=self.name)
        while not self.stopping.is_set():
            try:
                c = queue.claim(
                    self.engine, self.name, self.cfg.lease_seconds, self.cfg.max_attempts
                )
            except DBAPIError as e:  # the database restarting: wait and try again
                log(
                    logger,
                    "database unavailable",
                    logging.WARNING,
                    worker=self.name,
                    error=type(e.orig).__name__,
                )
                self.stopping.wait(max(1.0, self.cfg.poll_seconds))
                continue
            if c is None:
                self.stopping.wait(self.cfg.poll_seconds)
                continue
            self.process(c)
            self.jobs_done += 1
            if max_jobs is not None and self.jobs_done >= max_jobs:
                break
        log(logger, "worker stopped", worker=self.name, jobs=self.jobs_done)
        return 0

    def _pubkey(self, key_id: str) -> str:
        with self.engine.connect() as conn:
            pem = conn.execute(select(TeamKey.public_pem).where(TeamKey.key_id == key_id))
            return str(pem.scalar_one())

    def process(self, c: queue.Claim) -> None:
        cfg = self.cfg
        jobdir = cfg.work_dir / f"{c.submission_id}-{c.token[:8]}"
        shutil.rmtree(jobdir, ignore_errors=True)
        (jobdir / "tmp").mkdir(parents=True)
        try:
            (jobdir / "team.pub").write_text(self._pubkey(c.key_id))
            log(
                logger,
                "job started",
                worker=self.name,
                submission=c.submission_id,
                attempt=c.attempts,
            )
            self._run_child(c, jobdir)
        finally:
            shutil.rmtree(jobdir, ignore_errors=True)

    def _run_child(self, c: queue.Claim, jobdir: Path) -> None:
        cfg = self.cfg
        env = {**os.environ, "TMPDIR": str(jobdir / "tmp")}
        cmd = [
            sys.executable,
            "-m",
            "vical.hub.job",
            str(self.store.path(c.bundle_sha256)),
            str(jobdir / "team.pub"),
            str(jobdir),
            str(cfg.job_workers),
            "1" if cfg.export_viewer else "0",
        ]
        with open(jobdir / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
                preexec_fn=_limits(cfg),
            )
            outcome = self._watch(c, proc, jobdir)
        if outcome is not None:
            return
        stderr = (jobdir / "stderr.txt").read_text(errors="replace")
        result_file = jobdir / "result.json"
        if proc.returncode == 0 and result_file.is_file():
            result = json.loads(result_file.read_bytes())
            state = ACCEPTED if result["state"] == "accepted" else REJECTED
            verdict, entry = result["verdict"], result.get("entry")
            if entry is not None and result.get("viewer"):
                self._publish_viewer(jobdir / "view", entry["id"])
        else:
            state, verdict, entry = FAILED, _failure(proc.returncode, stderr, cfg), None
        report = {"verdict": verdict, "attempt": c.attempts}
        done = queue.finish(
            self.engine, c, self.name, state, verdict, report, entry, _progress(jobdir)
        )
        log(
            logger,
            "job finished" if done else "job finished after its lease was lost",
            worker=self.name,
            submission=c.submission_id,
            state=state,
            recorded=done,
        )

    def _publish_viewer(self, src: Path, entry_id: str) -> None:
        """Move an exported viewer into the store, replacing an earlier one whole."""
        dest = self.cfg.views_dir / entry_id
        dest.parent.mkdir(parents=True, exist_ok=True)
        old = dest.with_name(f"{entry_id}.old-{self.name.replace(':', '-')}")
        shutil.rmtree(old, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.replace(dest, old)
        shutil.move(src, dest)
        shutil.rmtree(old, ignore_errors=True)

    def _watch(self, c: queue.Claim, proc: subprocess.Popen[bytes], jobdir: Path) -> str | None:
        """Renew the lease until the child ends; a reason string when the job was
        given up (lease lost, handed back), None when the child ended by itself."""
        cfg = self.cfg
        beat = max(0.2, cfg.lease_seconds / 3)
        started = time.monotonic()
        drain_deadline: float | None = None
        while True:
            try:
                proc.wait(timeout=min(beat, 0.5))
                return None
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if now - started > cfg.job_wall_seconds:
                _kill_group(proc)
                verdict = f"failed: verification passed its time limit ({cfg.job_wall_seconds:g} s)"
                queue.finish(self.engine, c, self.name, FAILED, verdict, {"verdict": verdict})
                return "timeout"
            if self.stopping.is_set() and drain_deadline is None:
                drain_deadline = now + cfg.drain_seconds
            if self.abort.is_set() or (drain_deadline is not None and now > drain_deadline):
                _kill_group(proc)
                queue.release(self.engine, c, self.name, "worker stopped")
                log(logger, "job handed back", worker=self.name, submission=c.submission_id)
                return "released"
            if now - getattr(self, "_last_beat", 0.0) >= beat:
                self._last_beat = now
                progress = _progress(jobdir)
                try:
                    kept = queue.heartbeat(self.engine, c, cfg.lease_seconds, progress)
                except DBAPIError:  # not reachable now: the next beat tries again
                    kept = True
                if not kept:
                    _kill_group(proc)
                    log(
                        logger,
                        "lease lost",
                        logging.WARNING,
                        worker=self.name,
                        submission=c.submission_id,
                    )
                    return "lease lost"


def serve_worker(cfg: HubConfig, max_jobs: int | None = None) -> int:
    """The ``vical hub worker`` process: migrate, then run until signalled."""
    engine = make_engine(cfg.database_url())
    migrate(engine)
    w = Worker(cfg, engine)
    w.install_signals()
    return w.run(max_jobs=max_jobs)
