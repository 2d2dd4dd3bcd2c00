"""The wheel carries every data file the code reads at run time."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def test_wheel_contains_runtime_data(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    (wheel,) = tmp_path.glob("vical-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    yamls = {p.name for p in (ROOT / "vical" / "tasks").glob("*.yaml")}
    assert {f"vical/tasks/{n}" for n in yamls} <= names
    for required in (
        "vical/dataset/card_template.md",
        "vical/agent/prices.yaml",
        "vical/data/doctor.json",  # the record `vical doctor` checks against
        "vical/requirements.lock",
        "vical/cli/__init__.py",
    ):
        assert required in names, required
    assert not any(n.startswith(("tests/", "docker/")) for n in names)


# -- the lint tools: layering contracts, types, one ruff version ---------------------
BIN = Path(sys.executable).parent  # the virtualenv's scripts, next to its python


def _tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = BIN / name
    assert exe.is_file(), f"{exe} is missing: install the dev extra (pip install -e '.[dev]')"
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_import_layering_contracts_are_kept():
    """[tool.importlinter] in pyproject.toml: the layers, and no runtime import of authoring."""
    r = _tool("lint-imports", "--no-cache")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


def test_mypy_passes_on_the_package():
    """[tool.mypy] in pyproject.toml; strict flags on the modules listed there."""
    r = _tool("mypy", "vical")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


@pytest.mark.parametrize(
    "args", [("check", "."), ("format", "--check", ".")], ids=["check", "format"]
)
def test_ruff_passes_on_the_repository(args):
    """What `nox -s lint` runs first: the lint rules and the formatting, whole tree."""
    r = _tool("ruff", *args)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


def _locked(package: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and name.strip().lower().replace("_", "-") == package:
            return version.strip()
    raise AssertionError(f"{package} is not pinned in requirements.lock")


def test_ruff_is_pinned_once():
    """pre-commit's ruff hook runs the version the lock (and so `nox -s lint`) installs."""
    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (hook,) = [r for r in config["repos"] if r["repo"].endswith("/ruff-pre-commit")]
    assert hook["rev"] == f"v{_locked('ruff')}"
    for tool in ("mypy", "import-linter"):
        _locked(tool)
