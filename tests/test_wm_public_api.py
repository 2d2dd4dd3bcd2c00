"""The world-model track reaches simulators only through the adapter's public API.

Every module under ``vical/wm/`` is parsed and checked for
- an attribute ``x._name`` (one leading underscore, dunders excepted) unless ``x`` is
  ``self`` or ``cls`` and ``_name`` is one the world-model package's own classes
  define, or ``x`` is a module of the world-model package;
- the simulator behind an adapter (``adapter.env``, ``env.adapter.ale``...): the
  adapter's own methods read and set its state;
- ``getattr``/``setattr``/``hasattr``/``delattr`` with a constant ``_name``;
- ``from <another package> import _name``;
- a ``# type: ignore`` on a line that names an adapter, or one silencing an unknown
  attribute (``attr-defined``, or a bare ``type: ignore``).

``VICAL_WM_DIR`` points the check at another copy of the package (a checkout of an
older revision, to see that it fails there).
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

import pytest

import vical.wm

WM_DIR = Path(os.environ.get("VICAL_WM_DIR") or Path(vical.wm.__file__).parent)
WM_PACKAGE = "vical.wm"
ACCESSORS = {"getattr", "setattr", "hasattr", "delattr"}
SIMULATORS = {"env", "ale", "grid_env"}  # the attributes adapters keep their simulator in


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_privates(trees: list[ast.Module]) -> set[str]:
    """The ``_names`` the package's own classes define: methods, class attributes and
    attributes assigned on ``self``/``cls`` inside a class body."""
    names: set[str] = set()
    for tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                ):
                    names.add(node.attr)
    return {n for n in names if _private(n)}


def _wm_module_aliases(tree: ast.Module) -> set[str]:
    """Names the module binds to modules of the world-model package."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == WM_PACKAGE or a.name.startswith(WM_PACKAGE + "."):
                    aliases.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module == WM_PACKAGE:
            aliases.update(a.asname or a.name for a in node.names)
    return aliases


def _names_an_adapter(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return "adapter" in node.id.lower()
    return isinstance(node, ast.Attribute) and node.attr == "adapter"


def _in_wm(module: str | None, level: int) -> bool:
    return level > 0 or module == WM_PACKAGE or (module or "").startswith(WM_PACKAGE + ".")


def violations(source: str, own: set[str], where: str = "<source>") -> list[str]:
    """Every reach past the public API in one module's source (see the module docstring)."""
    tree = ast.parse(source)
    aliases = _wm_module_aliases(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and _private(node.attr):
            recv = node.value
            if isinstance(recv, ast.Name) and recv.id in ("self", "cls") and node.attr in own:
                continue
            if isinstance(recv, ast.Name) and recv.id in aliases:
                continue
            found.append(f"{line}: {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in SIMULATORS
            and _names_an_adapter(node.value)
        ) or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ACCESSORS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"{line}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and not _in_wm(node.module, node.level):
            for a in node.names:
                if _private(a.name):
                    found.append(f"{line}: from {node.module} import {a.name}")
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        m = re.search(r"type:\s*ignore(\[[^\]]*\])?", tok.string)
        if m is None:
            continue
        code = lines[tok.start[0] - 1][: tok.start[1]]
        codes = m.group(1) or ""
        if "adapter" in code.lower() or not codes or "attr-defined" in codes:
            found.append(f"{where}:{tok.start[0]}: {code.strip()}  {tok.string}")
    return found


def _modules() -> list[Path]:
    return sorted(WM_DIR.rglob("*.py"))


def test_the_world_model_track_uses_only_the_public_adapter_api():
    sources = {p: p.read_text(encoding="utf-8") for p in _modules()}
    assert len(sources) >= 10, WM_DIR  # the package itself, not an empty folder
    own = _own_privates([ast.parse(s) for s in sources.values()])
    found = [v for p, s in sources.items() for v in violations(s, own, p.name)]
    assert not found, "\n".join(found)


# -- the check itself ---------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "adapter._frame = None\n",
        "def f(env):\n    return env.adapter.env._get_obs()\n",
        "e = env.adapter.env  # type: ignore[attr-defined]\n",
        "g = env.adapter.game  # type: ignore[union-attr]\n",
        "x = thing.value  # type: ignore\n",
        "x = getattr(adapter, '_frame')\n",
        "setattr(adapter, '_frame', None)\n",
        "from vical.envs.core import _STARTS\n",
        "e = renderer_adapter.env\ne.s = 3\n",
        "row = env.adapter.env.s\n",
        "class A:\n    def f(self):\n        return self._unknown\n",
        "class A:\n    def f(self):\n        return super()._frame\n",
    ],
)
def test_the_check_finds_a_reach_past_the_api(source):
    assert violations(source, {"_own"})


@pytest.mark.parametrize(
    "source",
    [
        "class A:\n    def __init__(self):\n        self._own = 1\n    def f(self):\n"
        "        return self._own\n",
        "from vical.wm import sim\nx = sim._NO_TIME_OUT\n",
        "from vical.wm.sim import _envs\n",
        "from . import sim\n",
        "x = obj.__class__.__name__\n",
        "a = np.errstate(invalid='ignore')  # type: ignore[no-any-return]\n",
        "x = adapter.frame()\n",
        "x = self.env.adapter.state_facts()\n",
    ],
)
def test_the_check_passes_public_and_own_access(source):
    assert violations(source, {"_own"}) == []


def test_own_privates_are_those_the_classes_define():
    tree = ast.parse(
        "class A:\n    _k = 1\n    def _m(self):\n        self._a = 2\n"
        "def f(adapter):\n    adapter._frame = None\n"
    )
    assert _own_privates([tree]) == {"_k", "_m", "_a"}
