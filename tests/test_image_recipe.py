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
        [exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
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
