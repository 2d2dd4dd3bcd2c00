"""The wheel carries every data file the code reads at run time."""

from __future__ import annotations

import os
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


RUNTIME = [
    "agent", "audit", "dataset", "demos", "envs", "gym", "interop", "outcomes", "paper",
    "play", "report", "run", "serve", "spec", "submit", "view", "wm", "errors",
]  # fmt: skip


def _package_copy(dst: Path) -> Path:
    """The package and its lint configuration, copied to ``dst`` (edits stay there)."""
    import shutil

    shutil.copytree(ROOT / "vical", dst / "vical", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def _entry(pkg: str) -> Path:
    """The file an edit of runtime package ``pkg`` goes into (a module or a package)."""
    return Path("vical") / (
        f"{pkg}/__init__.py" if (ROOT / "vical" / pkg).is_dir() else f"{pkg}.py"
    )


def test_an_authoring_import_in_any_runtime_package_breaks_the_contract(tmp_path):
    """Every runtime package is a source of the forbidden-authoring contract: a copy of
    the package with an authoring import added to each one (at module level in half of
    them, inside a function, as a call-time import, in the other half) fails
    lint-imports, and the report names every edited package."""
    top = [p.name for p in (ROOT / "vical").iterdir() if p.name not in ("__pycache__",)]
    runtime = {
        Path(n).stem
        for n in top
        if n.endswith(".py") or (ROOT / "vical" / n / "__init__.py").exists()
    }
    assert runtime - {"__init__", "__main__", "cli", "authoring"} == set(RUNTIME)
    root = _package_copy(tmp_path)
    for i, pkg in enumerate(RUNTIME):
        f = root / _entry(pkg)
        line = (
            "import vical.authoring.plan  # added by the test\n"
            if i % 2 == 0
            else "def _added_by_the_test():\n    from vical.authoring import plan\n\n    return plan\n"
        )
        f.write_text(f.read_text() + "\n\n" + line)
    r = subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert r.returncode != 0 and "BROKEN" in r.stdout, r.stdout[-3000:]
    report = r.stdout[r.stdout.index("The runtime does not import the authoring tools") :]
    missing = [p for p in RUNTIME if f"vical.{p} " not in report and f"vical.{p}." not in report]
    assert not missing, (missing, report[-4000:])


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
