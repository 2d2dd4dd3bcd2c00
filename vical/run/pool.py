"""Worker pools that stop when asked and never outlive their parent.

Every command that fans work out over processes (``eval``, ``baseline random``,
``verify``) runs it through :func:`run_pool`, which gives them one behaviour:

* workers ignore SIGINT (the terminal sends Ctrl-C to the whole process
  group); only the parent decides what an interrupt means;
* on Linux each worker asks the kernel for SIGKILL when its parent dies
  (``PR_SET_PDEATHSIG``), so ``kill -9`` of the main process leaves no
  worker behind writing into a run folder;
* the first SIGINT or SIGTERM stops scheduling and, from the signal handler
  itself, sends the workers SIGTERM: no worker starts anything (a model
  request) after it. The parent then makes sure they are gone (SIGKILL after
  a short grace), runs ``on_interrupt`` (remove half-written output) and
  raises :class:`Interrupted` within a few seconds; work already reported
  through ``on_result`` is kept;
* a second signal, at any point of that (the cleanup included), kills the
  workers, runs ``on_abort`` and exits the process at once with status 130,
  without a traceback: with both given, no half-written output is left
  whichever signal ends the run.

A worker that dies (killed, out of memory) surfaces as an error for the jobs
it held, never as a hang.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import process as _cf_process
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from vical.jobs import report

J = TypeVar("J")

_PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 2.0
# How often the parent looks for a signal while it waits for jobs. The kernel may hand
# a process's signal to one of the pool's helper threads; Python then runs the handler
# only when the main thread next wakes, so this bounds how late the first signal stops
# the workers (and so how many model requests could still go out).
LOOK_SECONDS = 0.02


class Interrupted(Exception):
    """The parent received SIGINT/SIGTERM; scheduling stopped and workers are gone."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux only).

    ``parent`` is the pid the parent had before the fork: if it is no longer this
    process's parent, the parent died before the request took effect. (Comparing
    with pid 1 would be wrong in a container, where the parent may be pid 1.)
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _worker_init(extra: Callable[[], None] | None, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)
    if extra is not None:
        extra()


# what a second signal prints before the process exits at once: the same `interrupted:`
# line a first signal ends with, saying what the hurry leaves
SECOND_SIGNAL_LINE = (
    b"\ninterrupted: stopped at once by a second signal; finished work is kept, anything "
    b"half-written sits in a temporary place the next run clears; run the same command "
    b"again to finish\n"
)


def exit_at_once(signum: int, frame: Any) -> None:
    """A signal handler for a process already leaving after an interrupt: exit 130 now."""
    with contextlib.suppress(OSError):
        os.write(2, SECOND_SIGNAL_LINE)
    os._exit(130)


def leave_handlers(old: dict[int, Any], interrupted: bool) -> None:
    """Restore ``old`` handlers; after an interrupt, a further signal exits at once
    instead (restoring Python's default would let it raise a traceback mid-cleanup)."""
    for s, h in old.items():
        signal.signal(s, exit_at_once if interrupted else h)


class SignalScope:
    """How SIGINT/SIGTERM behave while one piece of work runs (main thread only).

    The first signal is recorded (``received``, ``event``), runs ``on_first``
    (e.g. stop workers at once) and, with
    ``raise_first``, raised as ``KeyboardInterrupt`` where the work is (a
    ``BaseException``, so libraries that wrap every ``Exception`` let it
    through), except inside :meth:`deferred`. A second signal runs
    ``on_second`` (kill workers, remove half-written output) and exits the
    process at once with status 130. On leaving after an interrupt, a further
    signal exits at once too (see :func:`leave_handlers`).
    """

    def __init__(
        self,
        on_second: Callable[[], None] | None = None,
        raise_first: bool = True,
        on_first: Callable[[], None] | None = None,
    ):
        self.received: int | None = None
        self.event = threading.Event()
        self._on_second = on_second
        self._on_first = on_first
        self._raise_first = raise_first
        self._defer = False
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            if self._on_second is not None:
                with contextlib.suppress(Exception):
                    self._on_second()
            exit_at_once(signum, frame)
        self.received = signum
        self.event.set()
        if self._on_first is not None:
            with contextlib.suppress(Exception):
                self._on_first()
        if self._raise_first and not self._defer:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """A step that must not be cut (a final rename): a first signal only records."""
        if self.received is not None:
            raise Interrupted(self.received)
        self._defer = True
        try:
            yield
        finally:
            self._defer = False

    def interrupted(self) -> Interrupted | None:
        """The :class:`Interrupted` to raise when a signal was received, else None."""
        return None if self.received is None else Interrupted(self.received)

    def __enter__(self) -> SignalScope:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        leave_handlers(self._old, self.received is not None)


def _kill(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _pids(pool: ProcessPoolExecutor) -> list[int]:
    procs = getattr(pool, "_processes", None) or {}
    return [p.pid for p in list(procs.values()) if p.pid]


def _terminate(pool: ProcessPoolExecutor) -> None:
    pids = _pids(pool)
    _kill(pids, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    _kill([p.pid for p in procs if p.is_alive() and p.pid], signal.SIGKILL)
    for p in procs:
        p.join(1.0)
    thread = getattr(pool, "_executor_manager_thread", None)  # shutdown forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    if thread is not None:
        _settle(thread)


def _settle(thread: threading.Thread) -> None:
    """Let the pool's management thread finish and take it off the exit hook's list.

    concurrent.futures wakes every pool's management thread at interpreter exit
    (``_python_exit``) without the pool's lock. A thread still closing its wake-up
    pipe then (its workers were just killed) makes that hook write to a closed
    pipe and print an "Exception ignored" traceback after the run ended cleanly.
    The thread needs no wake-up: its workers are dead, so it is already leaving.
    It stays a normal thread, which the interpreter joins at exit.
    """
    thread.join(GRACE_SECONDS)
    wakeups = getattr(_cf_process, "_threads_wakeups", None)
    if wakeups is not None:
        with contextlib.suppress(KeyError, TypeError):
            del wakeups[thread]
    if thread.is_alive():
        # A worker killed while it wrote a large result (frames) leaves half a message
        # in the result pipe: the thread waits for the rest for ever. Nothing it would
        # do matters any more (its workers are dead), so the interpreter's exit does not
        # wait for it, as it would not for a daemon thread.
        locks = getattr(threading, "_shutdown_locks", None)
        lock = getattr(thread, "_tstate_lock", None)
        if locks is not None and lock is not None:
            with getattr(threading, "_shutdown_locks_lock", contextlib.nullcontext()):
                locks.discard(lock)


def run_pool(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    workers: int,
    on_result: Callable[[J, Any, BaseException | None], bool | None],
    *,
    initializer: Callable[[], None] | None = None,
    on_abort: Callable[[], None] | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> bool:
    """Run ``fn(job)`` for each job on ``workers`` processes (in-process when 1).

    ``on_result(job, value, error)`` is called in the parent as each job ends;
    returning ``False`` stops scheduling new jobs (jobs in flight finish and
    are reported). Returns True when every job was scheduled, False when
    ``on_result`` stopped it early. Raises :class:`Interrupted` on the first
    SIGINT/SIGTERM (see the module docstring). ``on_abort`` runs, after the
    workers are dead, when a second signal makes the process exit at once
    (e.g. to remove half-written output); ``on_interrupt`` runs after the first
    signal, once the workers are dead and before :class:`Interrupted` is raised,
    still under the signal handlers (so a second signal cannot cut it short: it
    runs ``on_abort`` and exits).
    """
    queue: Iterator[J] = iter(jobs)
    if workers <= 1:
        return _run_inline(fn, queue, on_result, on_abort, on_interrupt)

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers, initializer=_worker_init, initargs=(initializer, os.getpid())
        )

    pool = new_pool()
    pending: dict[Future[Any], J] = {}
    stopped = False

    def kill_now() -> None:
        pids = _pids(pool)
        _kill(pids, signal.SIGKILL)
        for pid in pids:  # reap them, so nothing writes after this returns
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        if on_abort is not None:
            with contextlib.suppress(Exception):
                on_abort()

    def stop_workers() -> None:  # from the handler: nothing new starts in a worker
        _kill(_pids(pool), signal.SIGTERM)

    with SignalScope(kill_now, raise_first=False, on_first=stop_workers) as sig:
        try:

            def top_up() -> None:
                nonlocal pool
                while not stopped and sig.received is None and len(pending) < 2 * workers:
                    job = next(queue, None)
                    if job is None:
                        return
                    try:
                        fut = pool.submit(fn, job)
                    except BrokenProcessPool:
                        # a worker died: the jobs in flight fail (reported as errors
                        # by the loop below); the rest go to a fresh pool, unless the
                        # death was the first signal's doing
                        if sig.received is not None:
                            raise Interrupted(sig.received) from None
                        _terminate(pool)
                        pool = new_pool()
                        fut = pool.submit(fn, job)
                    pending[fut] = job

            top_up()
            while pending:
                done, _ = wait(pending, timeout=LOOK_SECONDS, return_when=FIRST_COMPLETED)
                if sig.received is not None:
                    raise Interrupted(sig.received)
                for fut in done:
                    job = pending.pop(fut)
                    err = fut.exception()
                    if on_result(job, None if err else fut.result(), err) is False:
                        stopped = True
                top_up()
            if sig.received is not None:
                raise Interrupted(sig.received)
        except BaseException as e:
            _terminate(pool)
            if isinstance(e, Interrupted) and on_interrupt is not None:
                on_interrupt()  # in the scope: a second signal here runs on_abort and exits
            raise
        pool.shutdown(wait=True)
    return not stopped


def _run_inline(
    fn: Callable[[J], Any],
    queue: Iterator[J],
    on_result: Callable[[J, Any, BaseException | None], bool | None],
    on_abort: Callable[[], None] | None = None,
    on_interrupt: Callable[[], None] | None = None,
) -> bool:
    """One job at a time in this process: Ctrl-C interrupts the job itself (and a job
    whose code swallowed the KeyboardInterrupt is the last one started)."""
    with SignalScope(on_abort) as scope:
        try:
            for job in queue:
                if not report(fn, job, on_result):
                    return False
                if scope.received is not None:
                    raise KeyboardInterrupt
            return True
        except KeyboardInterrupt:
            if scope.received is None:
                raise
            if on_interrupt is not None:
                on_interrupt()
            raise Interrupted(scope.received) from None
