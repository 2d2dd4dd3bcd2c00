"""One-command submission: run the pinned image against an endpoint, then bundle and sign.

``vical submit --endpoint URL --model M --key K`` fetches the dataset at a
pinned revision (or takes ``--dataset DIR``), starts the image through the
Docker SDK (which also speaks to Podman's Docker-compatible socket via
``DOCKER_HOST``) with the dataset and an output folder mounted, streams the
container's progress, and bundles the finished run with the local key.

SIGINT/SIGTERM while the container runs: the first stops it (``docker stop``
with a short grace, which sends SIGTERM so the evaluation inside keeps its
finished episodes, then a kill) and removes it, then raises
:class:`vical.run.pool.Interrupted`; a second one kills and removes the
container and exits the process at once with status 130.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vical import __version__
from vical.errors import VicalError

DEFAULT_IMAGE = f"localhost/vical:{__version__}"
DATASET_REPO = "vical-benchmark/v-ical"
# The dataset revision this vical version evaluates (a tag of the dataset repository).
DATASET_REVISION = f"v{__version__}"


# seconds `docker stop` waits after SIGTERM before it kills the container
STOP_TIMEOUT = 3


class ContainerError(VicalError, RuntimeError):
    pass


def stop_container(client: Any, ref: str, timeout: float = STOP_TIMEOUT) -> None:
    """Stop the container ``ref`` (id or name), kill it if that fails, and remove it.

    ``client`` is a ``docker.DockerClient``. A container that does not exist (never
    created, or already gone) is not an error.
    """
    from docker.errors import DockerException, NotFound

    api = client.api
    try:
        api.stop(ref, timeout=int(timeout))
    except NotFound:
        return
    except DockerException:
        pass
    with contextlib.suppress(DockerException):
        if api.inspect_container(ref)["State"].get("Running"):
            api.kill(ref)
    with contextlib.suppress(NotFound):
        api.remove_container(ref, force=True)


def fetch_dataset(local: Path | None, cache_dir: Path | None = None) -> Path:
    """A local dataset folder: ``local`` if given, else the pinned Hub revision."""
    if local is not None:
        local = Path(local)
        if not local.is_dir():
            raise ContainerError(f"--dataset {local}: no such folder")
        return local.resolve()
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            repo_id=DATASET_REPO,
            repo_type="dataset",
            revision=DATASET_REVISION,
            cache_dir=cache_dir,
        )
    except Exception as e:  # the Hub's messages run over several lines: the first is kept
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
        raise ContainerError(
            f"could not fetch dataset {DATASET_REPO}@{DATASET_REVISION} ({type(e).__name__}: "
            f"{first}); pass --dataset DIR with a local copy"
        ) from None
    return Path(path)


def _tasks_dir(dataset: Path) -> str | None:
    """The task files inside a dataset folder, as a path inside the container."""
    for rel in ("tasks", "data/tasks"):
        if (dataset / rel).is_dir() and any((dataset / rel).glob("*.yaml")):
            return f"/dataset/{rel}"
    return None


def run_in_image(
    *,
    endpoint: str,
    model: str,
    backend: str,
    out: Path,
    dataset: Path,
    image: str = DEFAULT_IMAGE,
    tasks: str | None = None,
    api_key_env: str | None = None,
    extra_args: list[str] | None = None,
    on_line: Callable[[str], None] = print,
) -> Path:
    """Run ``vical eval`` inside the image; returns the run folder on the host."""
    from docker.errors import DockerException, ImageNotFound

    import docker

    try:
        client = docker.from_env()
        client.ping()
    except DockerException as e:
        raise ContainerError(
            f"no container engine answered ({e}). Start Docker, or Podman's socket: "
            "`podman system service --time=0 unix:///tmp/podman.sock &` and "
            "`export DOCKER_HOST=unix:///tmp/podman.sock`"
        ) from None
    try:
        img = client.images.get(image)
    except ImageNotFound:
        raise ContainerError(
            f"image {image} not found; build it with docker/build.sh (or `nox -s image`)"
        ) from None
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o777)  # the image runs as a non-root user
    cmd = [
        "eval",
        "--backend",
        backend,
        "--endpoint",
        endpoint,
        "--model",
        model,
        "--out",
        "/out/run",
    ]
    if tasks:
        cmd += ["--tasks", tasks]
    if api_key_env:
        cmd += ["--api-key-env", api_key_env]
    cmd += list(extra_args or [])
    env: dict[str, Any] = {"VICAL_IMAGE_DIGEST": img.id}
    tdir = _tasks_dir(dataset)
    if tdir:
        # the dataset's task files in place of the image's own; images from before
        # VICAL_BUILTIN_TASKS_DIR read VICAL_TASKS_DIR as a replacement, newer ones add
        # its files over the same-named built-in ones: the same task set either way
        env["VICAL_BUILTIN_TASKS_DIR"] = tdir
        env["VICAL_TASKS_DIR"] = tdir
    if api_key_env and api_key_env in os.environ:
        env[api_key_env] = os.environ[api_key_env]
    from vical.run.pool import Interrupted, SignalScope

    # our own name, so the container can be found and removed even when a signal
    # lands while it is being created (before its id reached us)
    name = f"vical-submit-{os.getpid()}-{secrets.token_hex(4)}"

    def kill_now() -> None:
        fresh = docker.from_env(timeout=10)
        with contextlib.suppress(DockerException):
            fresh.api.remove_container(name, force=True)

    # first signal: KeyboardInterrupt (no library's `except Exception` swallows it); a
    # second kills and removes the container and exits at once with status 130
    with SignalScope(kill_now) as stop:
        try:
            container = client.containers.create(
                image,
                cmd,
                name=name,
                network_mode="host",
                environment=env,
                volumes={
                    str(dataset): {"bind": "/dataset", "mode": "ro"},
                    str(out): {"bind": "/out", "mode": "rw"},
                },
            )
            container.start()
            buf = b""
            for chunk in container.logs(stream=True, follow=True):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    on_line(line.decode(errors="replace"))
            if buf:
                on_line(buf.decode(errors="replace"))
            status = container.wait()
        except KeyboardInterrupt:
            # a fresh client: the interrupted one may hold a half-read response
            stop_container(docker.from_env(timeout=STOP_TIMEOUT + 10), name)
            if stop.received is None:
                raise
            raise Interrupted(stop.received) from None
        finally:
            with contextlib.suppress(DockerException, OSError):  # requests errors are OSErrors
                client.api.remove_container(name, force=True)
    code = status.get("StatusCode", 1)
    if code != 0:
        raise ContainerError(f"the evaluation inside {image} exited with status {code}")
    run = out / "run"
    if not (run / "manifest.json").exists():
        raise ContainerError(f"the container finished but wrote no run to {run}")
    return run
