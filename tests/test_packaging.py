"""The wheel carries every data file the code reads at run time."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "vical"


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
    "play", "report", "run", "serve", "spec", "submit", "view", "wm", "errors", "hub",
    "bounded", "jobs",
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
    """[tool.mypy] in pyproject.toml: the whole package in strict mode."""
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


def _sanctioned_imports() -> list[tuple[str, str]]:
    """The imports the layers contract ignores by name (``importer -> imported``)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    pairs = [line.split("->") for line in layers.get("ignore_imports", [])]
    return [(a.strip(), b.strip()) for a, b in pairs]


def _strongly_connected(graph) -> list[list[str]]:
    """The strongly connected components of an import graph (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == module:
                        break
                components.append(sorted(component))
    return components


def test_no_import_cycles_between_modules():
    """No two modules of vical import each other, directly or round a circle: every
    import counts (module level, call time, TYPE_CHECKING), as grimp (which
    import-linter installs) finds them. The one exception is an import the layers
    contract sanctions by name in pyproject.toml (``ignore_imports``); removing it
    there makes this test cover it too."""
    import grimp

    graph = grimp.build_graph("vical", cache_dir=None)
    for importer, imported in _sanctioned_imports():
        graph.remove_import(importer=importer, imported=imported)
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    shown = []
    for component in cycles:
        shown.append(" <-> ".join(component))
        for a in component:
            for b in component:
                for d in graph.get_import_details(importer=a, imported=b):
                    shown.append(f"    {a} -> {b} (line {d['line_number']}: {d['line_contents']})")
    assert not cycles, "import cycles between modules:\n" + "\n".join(shown)


MAX_MODULE_LINES = 700


def _long_modules(root: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    return sorted(
        f"{p.relative_to(root.parent)}: {n} lines"
        for p in root.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > limit
    )


def test_no_module_of_the_package_is_over_700_lines():
    """A module past 700 lines holds more than one concern: split it by concern."""
    assert _long_modules(PACKAGE) == []


def test_the_module_size_check_sees_a_long_module(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * 700)
    (pkg / "long.py").write_text("x = 1\n" * 701)
    assert _long_modules(pkg) == ["pkg/long.py: 701 lines"]
