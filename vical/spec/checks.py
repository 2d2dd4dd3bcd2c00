"""Checks of a task file against the simulators that are installed.

The pydantic models in :mod:`vical.spec` check a task file's shape; these
checks ask the installed simulator packages whether the file's ``package``,
``sim_id`` and native actions exist, so that a typo fails when the tasks are
loaded, with the file and field named, rather than inside every episode.

Cost matters: :func:`vical.spec.all_tasks` runs in nearly every command. The
checks therefore come in two tiers, each cached per ``(package, sim_id)``:

* at load (:func:`check_env`): the ``package`` field against the family's
  simulator distribution; ``sim_id`` against the registries that are cheap to
  read (Gymnasium's own ids for Toy Text and Classic Control, ale-py's ids for
  Atari, the dotted class path of CustomBreakout); native actions against the
  action spaces known without building a game (ALE's 18 joystick actions,
  Procgen's 15 combos, CustomBreakout's 4 commands, and the Discrete space of
  the small Gymnasium built-ins, which build in milliseconds);
* when a simulator is made (:func:`check_simulator` and
  :func:`check_adapter_actions`, called by :func:`vical.envs.make_adapter`):
  ``sim_id`` against the registries whose import is slow (MiniGrid, Procgen,
  highway-env, Tetris, Flappy Bird), and native actions against the action
  space of the game just built.

This module sits in the task-data layer and imports only :mod:`vical.spec.models`,
:mod:`vical.spec.families` (how each family's ids and actions are checked, and in which
tier) and :mod:`vical.errors`; the registries of the families that vical defines itself
(MiniGrid's sim ids, the highway, Tetris and Flappy Bird registrations) are imported by
name when a check first needs them, like any simulator package.

A family whose simulator distribution is not installed (the ``sims`` extra is
optional) is only checked for the ``package`` name at load; making one of its
games then fails with a message saying what to install.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.metadata
import importlib.util
import io
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from vical.errors import TaskSpecError
from vical.spec.families import FAMILIES, Family
from vical.spec.models import EnvSpec, TaskSpec

SIMS_HINT = "install the simulators with: pip install 'vical[sims]'"


def _canonical(dist: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``ale_py`` == ``ale-py``."""
    return re.sub(r"[-_.]+", "-", dist).lower()


@cache
def installed(dist: str) -> bool:
    """True when the distribution is installed and its top-level module can be found."""
    if _canonical(dist) == "vical":
        return True  # the running package, installed or not (a source checkout)
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    for fam in FAMILIES.values():
        if _canonical(fam.dist) == _canonical(dist):
            return importlib.util.find_spec(fam.top_module) is not None
    return True


def _prefix(where: str | Path) -> str:
    return f"{where}: field"


def _or_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def suggest(value: str, known: Iterable[str]) -> str:
    """`` (did you mean ...?)`` with other versions of the same id or close spellings, or ''."""
    known = sorted(known)
    base = re.sub(r"-v\d+$", "", value)
    same = [k for k in known if k != value and re.sub(r"-v\d+$", "", k) == base]
    close = same or difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    return f" (did you mean {_or_list(close)}?)" if close else ""


# -- the package field -----------------------------------------------------------


def package_problem(family: str, package: str) -> str | None:
    """Why ``package`` cannot be the simulator distribution of ``family``, or None."""
    expected = FAMILIES[family].dist
    if _canonical(package) == _canonical(expected):
        return None
    if not installed(package):
        return (
            f"{package!r} is not an installed distribution; family {family!r} runs on {expected!r}"
        )
    return f"family {family!r} runs on {expected!r}, not on {package!r}"


# -- sim_id registries -----------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    """The ids a family's simulator knows, and how a message names them."""

    ids: frozenset[str]
    what: str


def _quiet_import(module: str) -> Any:
    """Import a module, dropping what it prints on stderr (procgen's gym notice)."""
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(module)


def _gym_ids(fam: Family) -> Registry:
    gym = _quiet_import("gymnasium")
    return Registry(frozenset(gym.registry), "a registered gymnasium environment")


def _ale_ids(fam: Family) -> Registry:
    gym = _quiet_import("gymnasium")
    _quiet_import(fam.top_module)  # importing ale_py registers its ALE/<Game>-v5 ids
    return Registry(frozenset(k for k in gym.registry if k.startswith("ALE/")), "an ale-py game id")


def _procgen_ids(fam: Family) -> Registry:
    names = _quiet_import(f"{fam.top_module}.env").ENV_NAMES
    return Registry(frozenset(names), f"a {fam.dist} game name")


def _module_ids(fam: Family) -> Registry:
    module = f"vical.envs.{fam.module}"
    sim_ids = _quiet_import(module).SIM_IDS
    return Registry(frozenset(sim_ids), f"a vical {fam.title} environment ({module})")


def _registered_ids(fam: Family) -> Registry:
    _quiet_import(f"vical.envs.{fam.module}")  # imports and so registers the simulator's ids
    gym = _quiet_import("gymnasium")
    return Registry(frozenset(gym.registry), f"a registered gymnasium environment of {fam.dist}")


# Family.sim_ids -> how that kind of registry is read ("dotted" has none: _dotted_problem)
_REGISTRIES: dict[str, Callable[[Family], Registry]] = {
    "gymnasium": _gym_ids,
    "ale": _ale_ids,
    "procgen": _procgen_ids,
    "module": _module_ids,
    "registers": _registered_ids,
}


@cache
def registry(family: str) -> Registry:
    """The sim_id registry of an installed family (imports its simulator package)."""
    fam = FAMILIES[family]
    return _REGISTRIES[fam.sim_ids](fam)


def _dotted_problem(sim_id: str) -> str | None:
    """CustomBreakout names its game class by dotted path (``vical.envs.breakout.BreakoutGame``)."""
    module, _, attr = sim_id.rpartition(".")
    if not module:
        return f"{sim_id!r} is not a dotted path module.Class"
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return f"{sim_id!r}: module {module!r} cannot be imported"
    if not hasattr(importlib.import_module(module), attr):
        return f"{sim_id!r}: module {module!r} has no {attr!r}"
    return None


@cache
def sim_id_problem(family: str, package: str, sim_id: str) -> str | None:
    """Why the installed simulator of ``family`` does not know ``sim_id``, or None."""
    if FAMILIES[family].sim_ids == "dotted":
        return _dotted_problem(sim_id)
    reg = registry(family)
    if sim_id in reg.ids:
        return None
    return f"{sim_id!r} is not {reg.what}{suggest(sim_id, reg.ids)}"


def _ale_game_problems(spec: EnvSpec, where: str | Path) -> list[str]:
    """The ALE adapter opens ``ALE/<env_kwargs.game>-v5``: game and sim_id must agree."""
    game = spec.env_kwargs.get("game")
    if not isinstance(game, str) or not game:
        return [f"{_prefix(where)} 'env_kwargs.game': the ALE game name is required (e.g. Pong)"]
    opened = f"ALE/{game}-v5"
    reg = registry(spec.family)
    if opened not in reg.ids:
        names = [k[4:-3] for k in reg.ids if k.endswith("-v5")]
        return [
            f"{_prefix(where)} 'env_kwargs.game': {game!r} is not an ale-py game"
            + suggest(game, names)
        ]
    if spec.sim_id != opened:
        return [
            f"{_prefix(where)} 'sim_id': {spec.sim_id!r} does not match env_kwargs.game "
            f"{game!r}; the ALE adapter opens {opened!r}"
        ]
    return []


# -- native actions --------------------------------------------------------------


@dataclass(frozen=True)
class NativeSpace:
    """The native actions a simulator accepts: integer indices and/or names."""

    what: str
    indices: range | frozenset[int] = range(0)
    names: frozenset[str] = frozenset()

    def accepts(self, native: Any) -> bool:
        if isinstance(native, bool):
            return False
        if isinstance(native, int):
            return native in self.indices
        if isinstance(native, str):
            return native in self.names
        return False


def _describe_indices(indices: range | frozenset[int]) -> str:
    values = sorted(indices)
    if values and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}..{values[-1]}"
    return ", ".join(str(i) for i in sorted(indices))


def discrete_space(space: Any, what: str) -> NativeSpace | None:
    """A Gymnasium ``Discrete`` space as a NativeSpace; None for any other space."""
    n, start = getattr(space, "n", None), getattr(space, "start", 0)
    if type(space).__name__ != "Discrete" or n is None:
        return None
    indices = range(int(start), int(start) + int(n))
    return NativeSpace(f"{what} (Discrete({int(n)}): {_describe_indices(indices)})", indices)


def _discrete_actions(fam: Family, sim_id: str) -> NativeSpace | None:
    gym = _quiet_import("gymnasium")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gym.make(sim_id)
    except Exception:  # e.g. a registered id whose extra (Box2D, MuJoCo) is missing:
        return None  # left to the adapter, which reports it when the game is made
    try:
        return discrete_space(env.action_space, f"the action space of {sim_id}")
    finally:
        env.close()


def _ale_actions(fam: Family, sim_id: str) -> NativeSpace:
    names = frozenset(a.name for a in _quiet_import(fam.top_module).Action)
    return NativeSpace(
        f"ALE's full action set ({len(names)} actions: NOOP, FIRE, UP, ..., or 0..{len(names) - 1})",
        range(len(names)),
        names,
    )


def _index_actions(fam: Family, sim_id: str) -> NativeSpace:
    indices = frozenset(importlib.import_module(f"vical.envs.{fam.module}").NATIVE.values())
    return NativeSpace(
        f"{fam.title}'s {len(indices)} native combos ({_describe_indices(indices)})", indices
    )


def _named_actions(fam: Family, sim_id: str) -> NativeSpace:
    names = importlib.import_module(f"vical.envs.{fam.module}").NATIVE_NAMES
    desc = ", ".join(f"{i} {n}" for i, n in sorted(names.items()))
    return NativeSpace(f"{fam.title}'s native actions ({desc})", frozenset(names))


# Family.native_actions -> how that kind of action space is read
_ACTION_SPACES: dict[str, Callable[[Family, str], NativeSpace | None]] = {
    "discrete": _discrete_actions,
    "ale": _ale_actions,
    "indices": _index_actions,
    "names": _named_actions,
}


@cache
def native_space(family: str, sim_id: str) -> NativeSpace | None:
    """The native action space known without building the game, or None."""
    fam = FAMILIES[family]
    if fam.native_actions is None:
        return None
    return _ACTION_SPACES[fam.native_actions](fam, sim_id)


def action_problems(spec: EnvSpec, space: NativeSpace, where: str | Path) -> list[str]:
    """Every native action (vocabulary and noop) outside ``space``."""
    problems = [
        f"{_prefix(where)} 'actions.{name}': native action {native!r} is not in {space.what}"
        for name, native in spec.actions.items()
        if not space.accepts(native)
    ]
    if spec.noop is not None and not space.accepts(spec.noop):
        problems.append(
            f"{_prefix(where)} 'noop': native action {spec.noop!r} is not in {space.what}"
        )
    return problems


# -- the NOOP action --------------------------------------------------------------

NOOP_FIX = "add 'noop: <native action>' to the file, or start without an initial skip"


def noop_problems(spec: EnvSpec, where: str | Path) -> list[str]:
    """Starts that skip frames (a task's or a demo clip's ``initial_skip``) play the
    NOOP action: the file must name one. (NOOP fill, ``action_steps < frame_skip``,
    is refused by :class:`vical.spec.EnvSpec` itself.)"""
    if spec.noop is not None:
        return []
    problems = []
    for t in spec.tasks:
        if t.initial_skip:
            problems.append(
                f"{where}: task {spec.env}/{t.variant}: field 'initial_skip': {t.initial_skip} "
                f"frames are skipped with the NOOP action, but 'noop' is not set; {NOOP_FIX}"
            )
        for clip in t.demos:
            if clip.initial_skip:
                problems.append(
                    f"{where}: task {spec.env}/{t.variant}: demo {clip.id}: field "
                    f"'initial_skip': {clip.initial_skip} frames are skipped with the NOOP "
                    f"action, but 'noop' is not set; {NOOP_FIX}"
                )
    return list(dict.fromkeys(problems))  # a clip shared by several tasks is named once each


def start_problem(task: TaskSpec) -> str | None:
    """Why the task's start cannot be played (an initial skip and no NOOP), or None.

    Task files are checked when they load; this also covers a start made in code
    (a demo clip's start, an authoring tool's probe) before the simulator sees a
    missing action."""
    skip = task.variant.initial_skip
    if skip and task.env.noop is None:
        return (
            f"{task.id}: a start with initial_skip {skip} skips frames with the NOOP action, "
            f"but {task.env.env}.yaml sets no 'noop'; add 'noop: <native action>' to it, or "
            "start without an initial skip"
        )
    return None


# -- entry points ----------------------------------------------------------------


def _problems(spec: EnvSpec, where: str | Path, lazy: bool) -> list[str]:
    noop = noop_problems(spec, where)
    if noop:
        return noop
    family = spec.family
    bad_package = package_problem(family, spec.package)
    if bad_package:
        return [f"{_prefix(where)} 'package': {bad_package}"]
    if not installed(FAMILIES[family].dist):
        if lazy:
            return [f"{_prefix(where)} 'package': {spec.package!r} is not installed; {SIMS_HINT}"]
        return []  # the sims extra is optional: listing tasks must not need it
    problems = []
    if lazy or FAMILIES[family].ids_at_load:
        bad_id = sim_id_problem(family, spec.package, spec.sim_id)
        if bad_id:
            return [f"{_prefix(where)} 'sim_id': {bad_id}"]
        if FAMILIES[family].sim_ids == "ale":
            problems += _ale_game_problems(spec, where)
    if FAMILIES[family].actions_at_load and not problems:
        space = native_space(family, spec.sim_id)
        if space is not None:
            problems += action_problems(spec, space, where)
    return problems


def env_problems(spec: EnvSpec, where: str | Path, deep: bool = True) -> list[str]:
    """Every problem :func:`check_env` would raise for, one line each (``deep``: the
    registries that are slow to import too)."""
    return _problems(spec, where, lazy=deep)


def check_env(spec: EnvSpec, where: str | Path, deep: bool = False) -> None:
    """Raise :class:`TaskSpecError` naming ``where`` and the field if ``spec`` does not fit
    the installed simulators. ``deep`` also reads the registries that are slow to import
    (which otherwise wait until a game is made)."""
    problems = _problems(spec, where, lazy=deep)
    if problems:
        raise TaskSpecError("\n".join(problems))


def check_simulator(spec: EnvSpec) -> None:
    """The checks run before a game is made, including the slow registries (cached)."""
    check_env(spec, f"{spec.env}.yaml", deep=True)


def check_adapter_actions(spec: EnvSpec, adapter: Any) -> None:
    """Check the actions a game just made will be given: the NOOP its task's start
    needs (:func:`start_problem`), and, for the families whose native space is not
    known at load, the vocabulary against the game's action space (a Gymnasium
    ``Discrete`` space)."""
    task = getattr(adapter, "task", None)
    if isinstance(task, TaskSpec):
        problem = start_problem(task)
        if problem:
            raise TaskSpecError(problem)
    if FAMILIES[spec.family].actions_at_load:
        return
    env = getattr(adapter, "env", None)
    space = discrete_space(getattr(env, "action_space", None), f"the action space of {spec.sim_id}")
    if space is None:
        return
    problems = action_problems(spec, space, f"{spec.env}.yaml")
    if problems:
        raise TaskSpecError("\n".join(problems))
