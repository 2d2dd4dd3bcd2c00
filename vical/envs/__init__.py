"""Simulator adapters, one module per family, behind :mod:`vical.envs.core`.

``make_env(task)`` imports the task's family module lazily (so a family's
simulator package is only needed when one of its tasks is used) and asks it
for an :class:`~vical.envs.core.Adapter`.

Everything specific to ONE environment is found by one convention,
:func:`env_module`: the module named after the environment key in a package
of per-environment modules. At run time that package is the game-module
package (:func:`game_packages`: ``vical.envs.games``, plus any packages
named in ``$VICAL_GAME_PACKAGES``); a game module's ``Adapter`` class, when it
has one, is the environment's adapter (for any family). The authoring tools
(:mod:`vical.authoring`) look up their per-environment modules the same way.
"""

from __future__ import annotations

import atexit
import importlib
import os
from collections import deque
from types import ModuleType

# Simulators draw off-screen: without these SDL (pygame, used by the Toy Text,
# MiniGrid, highway and Flappy Bird renderers) probes for a display and prints
# "XDG_RUNTIME_DIR is invalid or not set" into the user's terminal.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

from vical.envs.core import Adapter, InvalidActionError, Step, frame_sha256
from vical.envs.environment import VicalEnv, reusable, start_snapshots_enabled
from vical.spec import EnvSpec, TaskSpec, TaskSpecError, get_task
from vical.spec.checks import check_adapter_actions, check_simulator
from vical.spec.families import FAMILIES

# the package of the built-in game modules; $VICAL_GAME_PACKAGES (comma-separated,
# importable package names) adds packages searched before it
GAME_PACKAGE = "vical.envs.games"
GAME_PACKAGES_VAR = "VICAL_GAME_PACKAGES"


def game_packages() -> list[str]:
    """Packages searched for an environment's game module, in order."""
    extra = [p.strip() for p in os.environ.get(GAME_PACKAGES_VAR, "").split(",") if p.strip()]
    return [*extra, GAME_PACKAGE]


def find_module(name: str) -> ModuleType | None:
    """Import ``name``; None when that module does not exist (errors inside it propagate)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            return None
        raise


def env_module(packages: list[str], spec: EnvSpec) -> ModuleType | None:
    """THE per-environment lookup: ``<package>.<env key>`` in the first of ``packages`` having it."""
    for package in packages:
        mod = find_module(f"{package}.{spec.env}")
        if mod is not None:
            return mod
    return None


def game_module(spec: EnvSpec) -> ModuleType | None:
    """The environment's game module (rules, RAM readers, its own ``Adapter``), if any."""
    return env_module(game_packages(), spec)


def make_adapter(task: TaskSpec) -> Adapter:
    """The family's adapter for a task, after the checks that wait until a game is made.

    Loading a task file checks what is cheap to check (:mod:`vical.spec.checks`);
    here the slow registries (MiniGrid, Procgen, highway-env, Tetris, Flappy Bird)
    are read before the game is built, and the vocabulary is checked against the
    action space of the game built. Both raise :class:`~vical.spec.TaskSpecError`.
    """
    check_simulator(task.env)
    game = game_module(task.env)
    if game is not None and hasattr(game, "Adapter"):
        adapter: Adapter = game.Adapter(task)
    else:
        module = importlib.import_module(f"vical.envs.{FAMILIES[task.env.family].module}")
        adapter = module.make_adapter(task)
    try:
        check_adapter_actions(task.env, adapter)
    except TaskSpecError:
        adapter.close()
        raise
    return adapter


def preload(tasks: list[TaskSpec]) -> None:
    """Import the game and family modules (and read the registries) the tasks need.

    Called by a parent process before it forks its workers, so each worker
    inherits the imports instead of repeating them at its first episode. Best
    effort: a problem is left for the episode that meets it to report.
    """
    seen: set[str] = set()
    for task in tasks:
        if task.env.env in seen:
            continue
        seen.add(task.env.env)
        try:
            check_simulator(task.env)
            game_module(task.env)
            importlib.import_module(f"vical.envs.{FAMILIES[task.env.family].module}")
        except Exception:  # reported by the episode that builds the task
            continue


# Simulators handed back by closed environments, newest last, for the next
# make_env of the same task in this process: (task, game packages, adapter).
# Only adapters whose next reset restores the whole start state (a saved start
# snapshot, or one played start still to be checked) are kept: whatever the last
# episode left behind is then overwritten.
_IDLE: deque[tuple[TaskSpec, tuple[str, ...], Adapter]] = deque()
IDLE_SIMULATORS = 8  # at most this many idle simulators per process, oldest closed first


def _take_idle(task: TaskSpec) -> Adapter | None:
    packages = tuple(game_packages())
    for entry in reversed(_IDLE):
        if entry[0] == task and entry[1] == packages:
            _IDLE.remove(entry)
            return entry[2]
    return None


def _hand_on_idle(task: TaskSpec) -> None:
    """Close the oldest idle simulator of another task of the same environment when its
    adapter hands its simulator on (:attr:`Adapter.hands_on_simulator`): the adapter
    about to be built takes it over instead of building its own. That task's saved
    start goes with it; a process rarely returns to a task it has moved on from."""
    for entry in _IDLE:
        other = entry[0]
        if other.env.env == task.env.env and other != task and entry[2].hands_on_simulator:
            _IDLE.remove(entry)
            entry[2].close()
            return


def _release(task: TaskSpec, packages: tuple[str, ...], adapter: Adapter) -> None:
    if not start_snapshots_enabled() or not reusable(adapter):
        adapter.close()
        return
    _IDLE.append((task, packages, adapter))
    while len(_IDLE) > IDLE_SIMULATORS:
        _IDLE.popleft()[2].close()


@atexit.register
def close_idle() -> None:
    """Close every idle simulator kept for reuse (also run at interpreter exit)."""
    while _IDLE:
        _IDLE.popleft()[2].close()


def make_env(task: TaskSpec | str, starts: str = "checked") -> VicalEnv:
    """Build the environment of a task (a TaskSpec or an id such as ``taxi/state1``).

    Closing the environment hands its simulator back to this process: the next
    ``make_env`` of an equal task reuses it instead of building a new simulator:
    from the simulator's second reset on, its start state is restored from a
    checked snapshot rather than replayed (see :mod:`vical.envs.environment`).
    ``starts``: ``checked`` (that default), ``trusted`` (saved unchecked at the
    first reset, for callers that re-check surprises on replayed starts) or
    ``replayed`` (a new simulator that replays every start).
    """
    if isinstance(task, str):
        task = get_task(task)
    packages = tuple(game_packages())
    reuse = start_snapshots_enabled() and starts != "replayed"
    adapter = _take_idle(task) if reuse else None
    if adapter is None:
        _hand_on_idle(task)
        adapter = make_adapter(task)
    spec = task
    return VicalEnv(task, adapter, release=lambda a: _release(spec, packages, a), starts=starts)


__all__ = [
    "Adapter",
    "InvalidActionError",
    "Step",
    "VicalEnv",
    "close_idle",
    "env_module",
    "frame_sha256",
    "game_module",
    "make_env",
]
