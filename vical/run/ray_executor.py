"""``vical eval --executor ray``: episodes as tasks on an existing Ray cluster.

The local executor (:func:`vical.run.pool.run_pool`) stays the default; this one
has the same interface and the same promises, on machines the run does not own:

* Each episode is one Ray task. It plays the episode into a temporary folder on
  whatever node runs it and returns the folder's files; the driver (the process
  running ``vical eval``) writes them into ``.partial/`` of the run folder and
  renames the folder into ``episodes/``. So the run folder lives on the
  driver's disk only (no shared file system), and it holds a whole episode or
  nothing, exactly as with local workers; resume works unchanged.
* A worker that dies (killed, out of memory, its node lost) is a system failure:
  Ray runs its task again, up to :data:`MAX_RETRIES` times, and only then is the
  episode reported as crashed, like a local worker's. An exception inside an
  episode is not retried: it is reported at once, as locally. The temporary
  folder a killed worker leaves behind is removed by the next episode on its node.
* The first SIGINT or SIGTERM stops scheduling, cancels the tasks in flight and
  raises :class:`vical.run.pool.Interrupted` within seconds; finished episodes
  are kept. A second signal exits at once. Leaving disconnects the driver, and
  Ray ends every task it still owned.
* ``on_result`` returning False stops scheduling; tasks in flight finish and are
  reported, as locally.

Before the first episode, one task reports the workers' vical version and
task-data digest; the run refuses a cluster that differs from the driver (run the
cluster from the same image). The API key variable an agent reads must be set on
the workers too: the driver never sends secrets through Ray.

Before connecting, the address is checked: something must listen there and answer
as a gRPC server does (a Ray head does), else the run stops at once instead of
waiting inside Ray. Whatever Ray raises while starting a private node or joining a
cluster becomes one :class:`RayExecutorError` line. Token authentication is off by
default in the pinned Ray (2.60.0); a cluster started with ``RAY_AUTH_MODE=token`` is
joined only with ``RAY_AUTH_MODE=token`` set for the driver too. A head lost during
the run (its GCS port stops answering) is noticed within seconds by
:class:`HeadWatch` and ends the run with :class:`RayClusterLost`; the episodes that
landed are kept, nothing is left in ``.partial/``, and the same command resumes.

``ray`` is an optional extra (``pip install 'vical[ray]'``), imported only here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from vical.errors import VicalError, import_optional
from vical.run.episode import EpisodeJob, run_episode
from vical.run.pool import Interrupted, SignalScope

MAX_RETRIES = 3  # runs of one task after its worker died, before the episode counts as crashed
POLL_SECONDS = 0.2
TMP_PREFIX = "vical-ray-"  # + worker pid: the temporary folder an episode is played into


class RayExecutorError(VicalError):
    """The Ray cluster cannot be used as asked; the message names the address or the fix."""


class RayClusterLost(RayExecutorError):
    """The cluster's head stopped answering during the run (finished episodes are kept)."""


HEAD_CHECK_SECONDS = 1.0  # how often the run checks that the head still answers
HEAD_LOST_AFTER = 3  # consecutive failed checks before the cluster counts as lost


def gcs_address(ray: Any) -> str | None:
    """The ``HOST:PORT`` of the connected cluster's head (its GCS), or None when Ray does
    not say (a Ray Client connection)."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:
        return None
    return str(address) if address else None


def head_answers(address: str, timeout: float = 2.0) -> bool:
    """Whether something still accepts connections at the head's ``HOST:PORT``."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError):
        return False
    return True


class HeadWatch:
    """Checks, at most every :data:`HEAD_CHECK_SECONDS`, that the head still answers.

    Ray itself only notices a lost head after a minute of reconnecting and then ends
    the process with a line of its own; this watch raises :class:`RayClusterLost`
    after :data:`HEAD_LOST_AFTER` failed checks instead (a few seconds)."""

    def __init__(self, address: str | None):
        self.address = address
        self.failures = 0
        self.last = time.monotonic()

    def check(self) -> None:
        if self.address is None or time.monotonic() - self.last < HEAD_CHECK_SECONDS:
            return
        self.last = time.monotonic()
        self.failures = 0 if head_answers(self.address) else self.failures + 1
        if self.failures >= HEAD_LOST_AFTER:
            raise RayClusterLost(
                f"lost the Ray cluster: its head at {self.address} stopped answering during the run"
            )


def ray_address(option: str | None) -> str | None:
    """The cluster to use: ``--ray-address``, else ``$RAY_ADDRESS`` (None when neither)."""
    return option or os.environ.get("RAY_ADDRESS") or None


# What an HTTP/2 client sends first (RFC 9113, 3.4): the preface, then an empty SETTINGS
# frame. A gRPC server, as Ray's head and its client server are, answers with a frame
# of its own whose type byte (the fourth) is SETTINGS.
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
HTTP2_SETTINGS = 4


def _answers_http2(conn: socket.socket) -> bool:
    """True when the peer answers the HTTP/2 preface with an HTTP/2 frame."""
    head = b""
    with contextlib.suppress(OSError):
        conn.sendall(HTTP2_PREFACE)
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    return len(head) == 9 and head[3] == HTTP2_SETTINGS


def check_reachable(address: str, timeout: float = 10.0) -> None:
    """Fail at once when nothing listens at a ``HOST:PORT`` (or ``ray://HOST:PORT``) address,
    or when what listens there is not a gRPC server (so not a Ray head).

    Without this, connecting to a wrong address waits for minutes inside Ray (for ever
    when another kind of server answers there). ``local`` and ``auto`` are left to Ray;
    so is the second check when Ray is told to use TLS (``RAY_USE_TLS``).
    """
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        if address in ("local", "auto"):
            return
        raise RayExecutorError(
            f"--ray-address {address!r} is not HOST:PORT, ray://HOST:PORT, `local` or `auto`"
        )
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except OSError as e:
        raise RayExecutorError(
            f"nothing answers at the Ray address {address!r} ({e.strerror or e}); check "
            "--ray-address (or RAY_ADDRESS) and that the cluster is up (`ray status` on its head)"
        ) from None
    with conn:
        tls = os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true")
        if not tls and not _answers_http2(conn):
            raise RayExecutorError(
                f"something answers at the Ray address {address!r}, but not a Ray head (it "
                "does not speak gRPC); check --ray-address (or RAY_ADDRESS): the head's port "
                "is the one `ray start --head --port` was given (6379 unless told), or 10001 "
                "with ray:// for Ray Client"
            )


def _ray() -> Any:
    return import_optional("ray", package="ray", extra="ray", needed_for="--executor ray")


def remove_orphans() -> None:
    """Remove the temporary episode folders of workers that were killed mid-episode.

    A killed worker cannot clean up; the next episode on the node does, for every
    folder whose worker process (named in the folder) no longer exists.
    """
    for folder in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = folder.name[len(TMP_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # alive, someone else's
            pass


def play_on_worker(job: EpisodeJob) -> tuple[str, dict[str, bytes]]:
    """On a Ray worker: play ``job`` into a temporary folder; its files, by relative path."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    remove_orphans()
    with tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-") as tmp:
        name = run_episode(replace(job, run_dir=tmp))
        folder = Path(tmp) / "episodes" / name
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
    return name, files


def worker_identity() -> tuple[str, str]:
    """On a Ray worker: (vical version, task-data digest)."""
    from vical import __version__
    from vical.spec import tasks_digest

    return __version__, tasks_digest()


def land_episode(run_dir: Path, name: str, files: dict[str, bytes]) -> str:
    """Write an episode's files under ``.partial/`` and rename the folder into ``episodes/``."""
    tmp = run_dir / ".partial" / f"{name}.{uuid.uuid4().hex[:8]}"
    try:
        for rel, data in files.items():
            path = tmp / rel
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise RayExecutorError(f"episode {name}: a worker returned the path {rel!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        final = run_dir / "episodes" / name
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            raise RayExecutorError(f"episode {name} arrived twice; the first copy is kept")
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return name


@contextlib.contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Connect to the cluster at ``address`` (``local``: start a private one); disconnect after.

    Raises :class:`RayExecutorError` without an address, when nothing answers there,
    or when the workers run another vical or other task data than this process.
    """
    if address is None:
        raise RayExecutorError(
            "--executor ray needs the cluster's address: pass --ray-address HOST:PORT (or "
            "ray://HOST:10001 for Ray Client, or `local` for a private one-machine cluster), "
            "or set RAY_ADDRESS"
        )
    ray = _ray()
    check_reachable(address)
    private = address == "local"
    try:
        ray.init(
            address=address,
            log_to_driver=False,
            logging_level="warning",
            # a private cluster listens on the loopback interface only
            **({"include_dashboard": False, "_node_ip_address": "127.0.0.1"} if private else {}),
        )
    except Exception as e:  # whatever Ray raises while starting or joining a node
        if private:
            raise RayExecutorError(
                f"cannot start a private Ray node (--ray-address local): {_one_line(e)}; "
                "check the free disk and memory and RAY_TMPDIR, or start a cluster with "
                "`ray start --head` and pass its address"
            ) from None
        # Ray sends its token to an address given explicitly only when told to
        token = os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token"
        raise RayExecutorError(
            f"cannot connect to the Ray cluster at {address!r}: {_one_line(e)}; check "
            "--ray-address (or RAY_ADDRESS) and that the cluster is up (`ray status`)"
            + (
                ""
                if token
                else "; a cluster started with token authentication (RAY_AUTH_MODE=token on "
                "its head) also needs RAY_AUTH_MODE=token here, with its token in "
                "~/.ray/auth_token or RAY_AUTH_TOKEN"
            )
        ) from None
    try:
        from vical import __version__
        from vical.spec import tasks_digest

        theirs = ray.get(ray.remote(num_cpus=0)(worker_identity).remote(), timeout=300)
        ours = (__version__, tasks_digest())
        if tuple(theirs) != ours:
            raise RayExecutorError(
                f"the Ray cluster's workers run vical {theirs[0]} with task data "
                f"{theirs[1][:12]}, this command vical {ours[0]} with {ours[1][:12]}; run the "
                "cluster from the same vical image as the driver"
            )
        yield ray
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()


def _one_line(error: BaseException) -> str:
    """An exception as one line: its type (unless a plain Exception) and first line."""
    first = next((ln.strip() for ln in str(error).splitlines() if ln.strip()), "")
    kind = type(error).__name__
    if kind == "Exception" and first:
        return first
    return f"{kind}: {first}" if first else kind


def _cause(error: BaseException) -> BaseException:
    """The exception raised inside a Ray task, rather than Ray's wrapper around it."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def cluster_cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def run_on_ray(
    ray: Any,
    jobs: Iterable[EpisodeJob],
    workers: int | None,
    on_result: Callable[[EpisodeJob, Any, BaseException | None], bool | None],
    *,
    on_abort: Callable[[], None] | None = None,
) -> bool:
    """Play every job as a Ray task, at most ``workers`` at once (None: the cluster's CPUs).

    ``ray`` is the module as :func:`connected` gives it: the caller connects
    first (and so can report a cluster it cannot use before it shows any
    progress) and disconnects after. Same contract as
    :func:`vical.run.pool.run_pool` (see the module docstring):
    ``on_result(job, episode name, error)`` is called in this process as each
    episode lands; returns True when every job was scheduled.
    """
    queue = iter(jobs)
    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES, retry_exceptions=False)(play_on_worker)
    limit = max(1, workers or cluster_cpus(ray))
    pending: dict[Any, EpisodeJob] = {}
    stopped = False
    watch = HeadWatch(gcs_address(ray))

    def cancel_all() -> None:
        for ref in list(pending):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)

    def land(ref: Any, job: EpisodeJob) -> bool:
        """Land a finished task's episode and report it; False when told to stop."""
        try:
            name, files = ray.get(ref)
            land_episode(Path(job.run_dir), name, files)
        except Exception as e:
            return on_result(job, None, _cause(e)) is not False
        return on_result(job, name, None) is not False

    def abort() -> None:
        cancel_all()
        if on_abort is not None:
            with contextlib.suppress(Exception):
                on_abort()

    with SignalScope(abort, raise_first=False) as sig:
        try:
            while True:
                while not stopped and sig.received is None and len(pending) < limit:
                    job = next(queue, None)
                    if job is None:
                        break
                    pending[remote.remote(job)] = job
                if not pending:
                    break
                done, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_SECONDS)
                if sig.received is not None:
                    raise Interrupted(sig.received)
                if not done:
                    watch.check()
                for ref in done:
                    if not land(ref, pending.pop(ref)):
                        stopped = True
            if sig.received is not None:
                raise Interrupted(sig.received)
        except RayClusterLost:
            pending.clear()  # nothing to cancel: the tasks went with the cluster
            raise
        except BaseException:
            cancel_all()
            deadline = time.monotonic() + 5.0
            while pending and time.monotonic() < deadline:  # let the cancels land
                done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.5)
                for ref in done:
                    pending.pop(ref, None)
            raise
    return not stopped
