"""Simulators' private names: read only in vical.envs.compat, and still there.

Each module of :mod:`vical.envs.compat` lists the private names of one simulator
that vical relies on (``RELIED_ON``) and the version of the simulator it was
checked against (``LOCKED_VERSION``). These tests check that the version is the
one ``requirements.lock`` pins, that every listed name exists on the installed
simulator (a failure names the distribution, its version, the name and what
breaks), and that no other module of vical reads a simulator's private name.

The scan: the private names the simulator packages define (methods, classes,
attributes they assign, module globals) are collected from their source; a
vical module outside ``vical/envs/compat/`` may not read, write or call one of
them on another object (``env._player_y``, ``getattr(env, "_info")``) unless
vical defines that name itself, nor reach one through ``self``/``cls``/``super()``
in a class built on a simulator's class (``super()._gen_grid``) unless that class
defines it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
import types
from functools import cache
from pathlib import Path

import pytest

import vical
import vical.envs.compat as compat
from vical.envs.compat import Private, missing

ROOT = Path(vical.__file__).parent
COMPAT_DIR = ROOT / "envs" / "compat"
LOCK = ROOT.parent / "requirements.lock"
# the simulators' import packages (and the libraries they are built on)
SIMULATORS = (
    "ale_py",
    "flappy_bird_gymnasium",
    "gym",
    "gym3",
    "gymnasium",
    "highway_env",
    "minigrid",
    "procgen",
    "pygame",
    "tetris_gymnasium",
)
COMPAT_MODULES = sorted(m.name for m in pkgutil.iter_modules(compat.__path__))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# private names a source defines: functions, classes, assigned attributes and names
_DEFINED = re.compile(
    r"\b(?:def|class)\s+(_[A-Za-z0-9]\w*)"
    r"|\.(_[A-Za-z0-9]\w*)\s*(?::[^=\n]*)?=(?!=)"
    r"|^[ \t]*(_[A-Za-z0-9]\w*)\s*(?::[^=\n]*)?=(?!=)",
    re.MULTILINE,
)
# private names a source may touch on an object or by name
_TOUCHED = re.compile(r"\.(_[A-Za-z0-9]\w*)|[\"'](_[A-Za-z0-9]\w*)[\"']")
_IMPORTS_SIMULATOR = re.compile(
    r"^\s*(?:from|import)\s+(?:" + "|".join(SIMULATORS) + r")\b", re.MULTILINE
)


def _defined_privates(text: str) -> set[str]:
    return {n for m in _DEFINED.findall(text) for n in m if n}


def _class_privates(body: list[ast.stmt]) -> set[str]:
    return _defined_privates("\n".join(ast.unparse(node) for node in body))


@cache
def simulator_privates() -> frozenset[str]:
    """Every private name the installed simulator packages define (read from their source)."""
    names: set[str] = set()
    for package in SIMULATORS:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin, f"{package} is not installed"
        for path in Path(spec.origin).parent.rglob("*.py"):
            names |= _defined_privates(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(n for n in names if _is_private(n))


def _vical_sources() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT.parent)): p.read_text(encoding="utf-8")
        for p in sorted(ROOT.rglob("*.py"))
        if COMPAT_DIR not in p.parents
    }


def _simulator_bases(tree: ast.Module) -> set[str]:
    """Local names bound by the module's imports from a simulator package."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in SIMULATORS:
                names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in SIMULATORS:
                    names.add(a.asname or a.name.split(".")[0])
    return names


def _root_name(expr: ast.expr) -> str | None:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _is_self(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in ("self", "cls")
    return (
        isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"
    )


def private_reads(sources: dict[str, str]) -> list[str]:
    """``path:line: expression`` of every simulator private name the sources touch.

    Only files that touch a simulator's private name somewhere, or import a simulator,
    are parsed (the scan stays fast)."""
    sim = simulator_privates()
    ours: set[str] = set()
    for text in sources.values():
        ours |= _defined_privates(text)
    foreign = sim - ours
    found: list[str] = []
    for path, text in sources.items():
        touched = {n for m in _TOUCHED.findall(text) for n in m if n}
        if not (touched & sim) and not _IMPORTS_SIMULATOR.search(text):
            continue
        tree = ast.parse(text)
        bases = _simulator_bases(tree)
        for node in ast.walk(tree):
            # rule 1: a private name on another object, by attribute or by name
            if isinstance(node, ast.Attribute) and not _is_self(node.value):
                if node.attr in foreign:
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in foreign
            ):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            # rule 2: through self/cls/super() in a class built on a simulator's class
            elif isinstance(node, ast.ClassDef) and any(_root_name(b) in bases for b in node.bases):
                own = _class_privates(node.body)
                for inner in ast.walk(node):
                    if (
                        isinstance(inner, ast.Attribute)
                        and _is_self(inner.value)
                        and inner.attr in sim
                        and (isinstance(inner.value, ast.Call) or inner.attr not in own)
                    ):
                        found.append(f"{path}:{inner.lineno}: {ast.unparse(inner)}")
    return sorted(set(found))


# -- the compat modules --------------------------------------------------------
def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


@pytest.mark.parametrize("name", COMPAT_MODULES)
def test_compat_module_is_pinned_to_the_locked_version(name):
    module = importlib.import_module(f"vical.envs.compat.{name}")
    dist = module.DISTRIBUTION
    assert _locked().get(dist) == module.LOCKED_VERSION, (
        f"vical.envs.compat.{name} was checked against {dist} {module.LOCKED_VERSION}; "
        f"requirements.lock pins {_locked().get(dist)}"
    )
    assert module.RELIED_ON and all(isinstance(p, Private) for p in module.RELIED_ON)
    doc = module.__doc__ or ""
    assert module.LOCKED_VERSION in doc, f"{name}'s docstring does not name its locked version"


@pytest.mark.parametrize("name", COMPAT_MODULES)
def test_every_private_name_a_compat_module_relies_on_exists(name):
    module = importlib.import_module(f"vical.envs.compat.{name}")
    problems = missing(module)
    assert not problems, "\n".join(problems)


def test_a_moved_private_name_fails_loudly_naming_it():
    """A compat module relying on a name the simulator lacks, or checked against
    another version, is reported with the name, the version and what breaks."""
    from vical.envs.compat import flappy

    owner = "flappy_bird_gymnasium.envs.flappy_bird_env:FlappyBirdEnv"
    fake = types.ModuleType("vical.envs.compat.fake")
    fake.DISTRIBUTION = flappy.DISTRIBUTION
    fake.LOCKED_VERSION = "0.0.1"
    fake.RELIED_ON = (
        Private(owner, "_player_height_gone", "instance", "the bird's height"),
        Private(owner, "_draw_everything", "class", "every frame"),
        Private(owner, "_player_y", "instance", "nothing (present)"),
    )
    fake.sample = flappy.sample
    problems = missing(fake)
    assert len(problems) == 3, problems
    assert "flappy-bird-gymnasium 0.4.0 is installed" in problems[0]
    assert "0.0.1" in problems[0]
    assert "FlappyBirdEnv._player_height_gone is gone" in problems[1]
    assert "flappy-bird-gymnasium 0.4.0" in problems[1]
    assert "the bird's height" in problems[1]
    assert "FlappyBirdEnv._draw_everything is gone (class attribute)" in problems[2]


# -- the scan ------------------------------------------------------------------
def test_no_module_outside_compat_touches_a_simulator_private_name():
    found = private_reads(_vical_sources())
    assert not found, (
        "simulator private names read outside vical/envs/compat/ (add a named function "
        "to the simulator's compat module and call it):\n" + "\n".join(found)
    )


INJECTED = {
    "vical/envs/games/bad_flappy.py": (
        "def height(env):\n"
        "    return env.unwrapped._player_y\n"
        "def frame(env):\n"
        "    env._draw_surface(show_score=False, show_rays=False)\n"
    ),
    "vical/envs/bad_procgen.py": "def info(env):\n    return getattr(env, '_info')\n",
    "vical/envs/games/bad_grid.py": (
        "from minigrid.envs.crossing import CrossingEnv\n"
        "class Custom(CrossingEnv):\n"
        "    def _gen_grid(self, width, height):\n"
        "        super()._gen_grid(width, height)\n"
        "        self._own = 1\n"
        "        self._own\n"
        "        self._rand_int(0, 3)\n"
    ),
}


def test_the_scan_catches_injected_private_reads():
    found = private_reads(INJECTED)
    assert found == [
        "vical/envs/bad_procgen.py:2: getattr(env, '_info')",
        "vical/envs/games/bad_flappy.py:2: env.unwrapped._player_y",
        "vical/envs/games/bad_flappy.py:4: env._draw_surface",
        "vical/envs/games/bad_grid.py:4: super()._gen_grid",
        "vical/envs/games/bad_grid.py:7: self._rand_int",
    ]
    # the same code in vical's own classes (no simulator base, own names) passes
    clean = {
        "vical/x.py": "class A:\n    def f(self):\n        self._info = 1\n        return self._info\n"
    }
    assert private_reads(clean) == []


def test_highway_stock_vehicles_take_the_collision_fast_path():
    """highway-env's own vehicles collide by the stock rule (the fast path applies);
    a vehicle class with its own collision test does not."""
    import gymnasium as gym

    import vical.envs.highway  # noqa: F401  (registers highway-v0, headless)
    from vical.envs.compat.highway import stock_collisions

    env = gym.make("highway-v0", render_mode="rgb_array").unwrapped
    env.reset(seed=0)
    vehicles = list(env.road.vehicles)
    assert len(vehicles) > 1 and all(stock_collisions(v) for v in vehicles)
    own = type("OwnRule", (type(vehicles[1]),), {"_is_colliding": lambda self, other, dt: None})
    vehicles[1].__class__ = own
    assert not stock_collisions(vehicles[1])
    env.close()
