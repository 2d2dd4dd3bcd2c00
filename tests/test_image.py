"""The pinned image (run by `nox -s image` after docker/build.sh; marker: image).

These tests need a built image (``VICAL_IMAGE``, default localhost/vical:<version>)
and a container engine: podman or docker on PATH. The Docker-SDK test starts
Podman's Docker-compatible socket itself when no Docker engine answers.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import HANG

from tests.engine import podman_env
from vical import __version__

pytestmark = pytest.mark.image

IMAGE = os.environ.get("VICAL_IMAGE", f"localhost/vical:{__version__}")
ENGINE = os.environ.get("ENGINE") or shutil.which("podman") or shutil.which("docker")
LOCK = Path(__file__).parents[1] / "requirements.lock"


README = Path(__file__).parents[1] / "README.md"


@functools.cache
def _engine_env() -> dict[str, str]:
    """The environment of every engine command here: with Podman, docker/containers.conf
    and the host's OCI runtime, chosen as docker/build.sh chooses it."""
    if ENGINE and Path(ENGINE).name == "podman":
        folder = tempfile.mkdtemp(prefix="vical-engine-")
        atexit.register(shutil.rmtree, folder, True)
        return podman_env(Path(folder))
    return dict(os.environ)


def _engine_run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([ENGINE, *args], capture_output=True, text=True, env=_engine_env(), **kw)


@pytest.fixture(scope="module", autouse=True)
def need_image():
    if ENGINE is None:
        pytest.skip("no container engine (podman or docker) installed")
    r = _engine_run("image", "inspect", IMAGE)
    if r.returncode != 0:
        pytest.fail(f"image {IMAGE} is not built; run docker/build.sh (nox -s image) first")


def test_image_packages_equal_the_lock():
    r = _engine_run(
        "run", "--rm", "--entrypoint", "python", IMAGE, "-m", "pip", "freeze", "--exclude-editable"
    )
    assert r.returncode == 0, r.stderr
    installed = {}
    for line in r.stdout.splitlines():
        if "==" in line:
            name, ver = line.split("==", 1)
            installed[name.lower().replace("_", "-")] = ver.strip()
    locked = {}
    for line in LOCK.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, ver = line.split("==", 1)
            locked[name.lower().replace("_", "-")] = ver.strip()
    installed.pop("vical", None)
    assert installed, "pip freeze printed nothing"
    unlocked = sorted(set(installed) - set(locked))
    assert not unlocked, f"installed in the image but not in the lock: {unlocked}"
    differ = {k: (installed[k], locked[k]) for k in installed if installed[k] != locked[k]}
    assert not differ, f"image versions differ from the lock: {differ}"


def test_eval_inside_image_writes_to_mount(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    r = _engine_run(
        "run",
        "--rm",
        "-v",
        f"{out}:/out",
        IMAGE,
        "eval",
        "--tasks",
        "taxi/state1,cartpole/seed41",
        "--out",
        "/out/run",
        "--workers",
        "1",
        "--no-frames",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    import json

    manifest = json.loads((out / "run" / "manifest.json").read_text())
    assert manifest["image"]["version"] == __version__
    assert manifest["image"]["env_digest"].startswith("sha256:")
    assert len(list((out / "run" / "episodes").iterdir())) == 2


def _inspect() -> dict:
    import json

    r = _engine_run("image", "inspect", IMAGE)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[0]


def test_labels_name_version_revision_and_task_data():
    from vical.spec import tasks_digest

    config = _inspect()["Config"]
    labels = config.get("Labels") or {}
    assert labels["org.opencontainers.image.version"] == __version__
    assert re.fullmatch(
        r"[0-9a-f]{40}(-dirty)?|unknown", labels["org.opencontainers.image.revision"]
    )
    assert "org.opencontainers.image.source" in labels
    assert labels["io.vical.tasks-digest"] == tasks_digest()
    # a numeric user, so any host resolves it; never root
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", config["User"])


def test_history_puts_dependencies_before_the_source():
    r = _engine_run("history", "--no-trunc", "--format", "{{.CreatedBy}}", IMAGE)
    assert r.returncode == 0, r.stderr
    steps = r.stdout.splitlines()[::-1]  # oldest first
    deps = next(i for i, s in enumerate(steps) if "requirements.txt" in s and "pip install" in s)
    source = next(i for i, s in enumerate(steps) if "COPY" in s and "./vical" in s)
    assert deps < source, steps
    assert not [s for s in steps if "docker/ca" in s or ".crt" in s]


def test_no_layer_holds_ca_material(tmp_path):
    """The CA bundle used by pip at build time is a secret: in no layer, not even deleted."""
    archive = tmp_path / "image.tar"
    r = _engine_run("save", "-o", str(archive), IMAGE, timeout=900)
    assert r.returncode == 0, r.stderr
    # any file where the build put or mounted it: the secret's mount point may stay
    # behind as an empty directory, but no file may
    pattern = re.compile(r"(^|/)(opt/vical/ca|run/secrets)/|(^|/)(extra-ca[^/]*|pip_ca)$")
    found, layers = [], 0
    with tarfile.open(archive) as outer:
        for member in outer:
            if not member.isfile() or member.size < 1024:
                continue
            blob = outer.extractfile(member)
            try:
                inner = tarfile.open(fileobj=blob)  # noqa: SIM115 - closed by the with below
            except tarfile.TarError:
                continue  # a manifest or config, not a layer
            with inner:
                layers += 1
                found += [
                    f"{member.name}: {m.name}"
                    for m in inner
                    if not m.isdir() and pattern.search(m.name)
                ]
    assert layers >= 5, f"read only {layers} layers from the saved image"
    assert not found, found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def docker_host(tmp_path):
    """DOCKER_HOST for the Docker SDK: a running Docker engine, or Podman's socket."""
    import docker

    try:
        docker.from_env().ping()
        yield os.environ.get("DOCKER_HOST")
        return
    except Exception:
        pass
    if not shutil.which("podman"):
        pytest.skip("no Docker engine and no podman")
    sock = tmp_path / "podman.sock"
    env = podman_env(tmp_path)
    proc = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{sock}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.1)
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = f"unix://{sock}"
    try:
        yield os.environ["DOCKER_HOST"]
    finally:
        if old is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = old
        proc.terminate()
        proc.wait(timeout=HANG)


def test_one_command_submit_through_docker_sdk_verifies(tmp_path, docker_host):
    from vical.serve import BaselineServer
    from vical.submit.keys import keygen

    port = _free_port()
    server = BaselineServer(("127.0.0.1", port), seed=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "README.md").write_text("local dataset copy for the test\n")
    priv, pub = keygen(tmp_path / "key")
    bundle = tmp_path / "b.tar.gz"
    env = {**os.environ, "DOCKER_HOST": docker_host or ""}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "vical.cli",
            "submit",
            "--endpoint",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "random",
            "--dataset",
            str(dataset),
            "--key",
            str(priv),
            "--out",
            str(bundle),
            "--tasks",
            "taxi/state1,cliffwalking/base",
            "--workdir",
            str(tmp_path / "runs"),
            "--image",
            IMAGE,
            "--team",
            "test",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    server.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    v = subprocess.run(
        [sys.executable, "-m", "vical.cli", "verify", str(bundle), "--pubkey", str(pub)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert v.returncode == 0, v.stdout + v.stderr
    assert "PASS" in v.stdout


@pytest.mark.parametrize("level", ["numpy-max", "numpy-baseline+glibc-baseline"])
def test_float_physics_fingerprints_inside_the_image(level):
    """The image replays the float-physics fingerprints of tests/data/behaviour.json
    bit for bit, at the machine's own CPU level and held to the x86-64 baseline."""
    import json

    from tests.behaviour import BASELINE, level_env

    found = _engine_run(
        "run",
        "--rm",
        "--entrypoint",
        "python",
        IMAGE,
        "-c",
        "from numpy.core._multiarray_umath import __cpu_features__ as f; "
        "print(','.join(k for k, v in f.items() if v))",
    )
    assert found.returncode == 0, found.stderr
    env_args = []
    for k, v in level_env(level, found.stdout.strip().split(",")).items():
        env_args += ["-e", f"{k}={v}"]
    tests_dir = Path(__file__).parent
    r = _engine_run(
        "run",
        "--rm",
        *env_args,
        "-v",
        f"{tests_dir}:/opt/vical/src/tests:ro",
        "-w",  # the image's source tree, so that `tests` is found beside `vical`
        "/opt/vical/src",
        "--entrypoint",
        "python",
        IMAGE,
        "-m",
        "tests.behaviour",
        "--float-check",
        timeout=900,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    recorded = json.loads(BASELINE.read_text())
    assert len(got) == 14
    wrong = [k for k, v in got.items() if recorded[k.split(":")[0]][k.split(":", 1)[1]] != v]
    assert not wrong, f"{level}: {wrong}"


def readme_eval_line() -> str:
    """README's `docker run ... vical eval --endpoint ...` line, as written there."""
    found, fenced = [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("docker run ") and " vical eval " in line:
            found.append(line)
    assert len(found) == 1, f"README.md has {len(found)} `docker run ... vical eval` lines"
    assert "--endpoint URL" in found[0] and "--model M" in found[0], found[0]
    return found[0]


def _host_name() -> str:
    """The name the README gives the host as seen from inside a container of this engine."""
    return "host.containers.internal" if Path(ENGINE).name == "podman" else "host.docker.internal"


def _as_the_readme_says(line: str, port: int) -> str:
    """The README line with what README says to substitute: URL (an endpoint on the host,
    by the engine's name for the host), M (the model) and, with Podman, `podman` for
    `docker`; with Docker on Linux, the `--add-host` README says to add. Nothing else."""
    line = line.replace("--endpoint URL", f"--endpoint http://{_host_name()}:{port}/v1", 1)
    line = line.replace("--model M", "--model random", 1)
    if Path(ENGINE).name == "podman":
        line = "podman" + line.removeprefix("docker")
    elif sys.platform == "linux":
        line = line.replace(
            "docker run ", "docker run --add-host=host.docker.internal:host-gateway ", 1
        )
    return line


@pytest.fixture
def host_baseline():
    """`vical serve-baseline` on the host, listening on every interface as README says (a
    container reaches the host through the engine's bridge, not 127.0.0.1); its port."""
    vical = str(Path(sys.executable).with_name("vical"))
    port = _free_port()
    server = subprocess.Popen(
        [vical, "serve-baseline", "--host", "0.0.0.0", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while True:
            assert server.poll() is None, server.stderr.read()
            assert time.time() < deadline, "serve-baseline did not start listening"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=HANG)


def _containers() -> set[str]:
    r = _engine_run("ps", "-q", "--no-trunc")
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_readme_docker_run_line_survives_a_stop_and_resumes_against_the_host_baseline(
    tmp_path, host_baseline
):
    """README's `docker run ... vical eval --endpoint URL --model M ...` line, run as
    written (from a folder holding `out/`, writable by the image's user, with a key
    exported, as README says) against `vical serve-baseline` on the host. Stopped mid-run by the engine's `stop`
    (SIGTERM, then SIGKILL after 10 s), it exits by itself within those seconds keeping
    only whole episodes; the same line then resumes and completes every task."""
    from vical.run.results import load_all_results, read_manifest
    from vical.run.runner import episode_name, episode_problems
    from vical.spec import all_tasks

    line = _as_the_readme_says(readme_eval_line(), host_baseline)
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    episodes, partial = out / "run" / "episodes", out / "run" / ".partial"
    env = {**_engine_env(), "OPENAI_API_KEY": "any-value-the-baseline-ignores"}
    before = _containers()
    proc = subprocess.Popen(
        ["bash", "-c", line],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 900
        while not (episodes.is_dir() and len(list(episodes.iterdir())) >= 3):
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "no three episodes within 15 minutes"
            time.sleep(0.2)
        (container,) = _containers() - before
        stop = _engine_run("stop", container, timeout=120)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert stop.returncode == 0, stop.stderr
    assert proc.returncode == 130, stdout + stderr  # its own interrupt exit, not a kill
    assert "interrupted: finished episodes are kept" in stderr, stderr
    kept = sorted(p.name for p in episodes.iterdir())
    assert all(episode_problems(episodes / n) == [] for n in kept)
    assert not partial.exists() or not any(partial.iterdir())

    again = subprocess.run(
        ["bash", "-c", line],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=5400,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"{len(kept)} already finished" in again.stdout, again.stdout[-3000:]

    manifest = read_manifest(out / "run")
    assert manifest.agent_settings.get("model") == "random"
    assert f"{_host_name()}:{host_baseline}" in json.dumps(manifest.agent_settings)
    assert manifest.image and manifest.image["version"] == __version__
    every = {episode_name(t.id, 0) for t in all_tasks()}
    names = {p.name for p in episodes.iterdir()}
    assert names == every
    assert all(episode_problems(episodes / n) == [] for n in names)
    results = load_all_results(out / "run")
    assert len(results) == len(every)
    assert not [r.task_id for r in results if r.infrastructure_failure]  # every request answered
    assert not partial.exists() or not any(partial.iterdir())
