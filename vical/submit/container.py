"""One-command submission: run the pinned image against an endpoint, then bundle and sign.

``vical submit --endpoint URL --model M --key K`` fetches the dataset at a
pinned revision (or takes ``--dataset DIR``), starts the image through the
Docker SDK (which also speaks to Podman's Docker-compatible socket via
``DOCKER_HOST``) with the dataset and an output folder mounted, streams the
container's progress, and bundles the finished run with the local key.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vical import __version__

DEFAULT_IMAGE = f"localhost/vical:{__version__}"
DATASET_REPO = "vical-benchmark/v-ical"
# The dataset revision this vical version evaluates (a tag of the dataset repository).
DATASET_REVISION = f"v{__version__}"


class ContainerError(RuntimeError):
    pass


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
    except Exception as e:
        raise ContainerError(
            f"could not fetch dataset {DATASET_REPO}@{DATASET_REVISION} ({type(e).__name__}: "
            f"{e}); pass --dataset DIR with a local copy"
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
        env["VICAL_TASKS_DIR"] = tdir
    if api_key_env and api_key_env in os.environ:
        env[api_key_env] = os.environ[api_key_env]
    container = client.containers.run(
        image,
        cmd,
        detach=True,
        network_mode="host",
        environment=env,
        volumes={
            str(dataset): {"bind": "/dataset", "mode": "ro"},
            str(out): {"bind": "/out", "mode": "rw"},
        },
    )
    try:
        buf = b""
        for chunk in container.logs(stream=True, follow=True):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                on_line(line.decode(errors="replace"))
        if buf:
            on_line(buf.decode(errors="replace"))
        status = container.wait()
    finally:
        with contextlib.suppress(DockerException):
            container.remove(force=True)
    code = status.get("StatusCode", 1)
    if code != 0:
        raise ContainerError(f"the evaluation inside {image} exited with status {code}")
    run = out / "run"
    if not (run / "manifest.json").exists():
        raise ContainerError(f"the container finished but wrote no run to {run}")
    return run
