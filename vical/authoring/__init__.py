"""Tools that MAKE task data: human-init sequences, expert play, demo clip plans.

Nothing at run time imports this package (``vical.run``, ``vical.report``,
``vical.submit`` and ``vical.agent`` stay independent of it). It works on top of
the runtime's :class:`~vical.envs.environment.VicalEnv`:

- :mod:`vical.authoring.sim` — :class:`DecisionSim`, a task's start with
  canonical decisions and snapshots, for look-ahead and back-off;
- :mod:`vical.authoring.search` — the search strategies (rewinding deathless
  play, chunked random shooting, beam search, look-ahead play, dense-start and
  decision-point searches for human-init sequences);
- :mod:`vical.authoring.experts` — the demo experts only authoring uses (rollout
  search, failure search, scripted and replayed play, the MiniGrid planner route)
  on top of the runtime's :mod:`vical.demos.experts`;
- :mod:`vical.authoring.plan` — clip plans, pools and their assignment;
- :mod:`vical.authoring.make` — ``make_demos``: run a recipe's plans, assign, pack;
- :mod:`vical.authoring.yamlio` — writing demo lists into a task file;
- :mod:`vical.authoring.sheet` — start-state contact sheets for review;
- :mod:`vical.authoring.recipes` — one module per environment (its recipe and,
  where it has one, its human-init generator, which its task file's ``init_source``
  names), found by :func:`author_module`; an environment added from a folder keeps
  its own in the ``recipes`` subpackage of its game package.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from vical.envs import GAME_PACKAGE, env_module, game_packages
from vical.spec import EnvSpec

if TYPE_CHECKING:
    from vical.authoring.plan import ClipPlan, Pool

# a recipe: the clip plans, and either pools or fixed clip id lists, one per task
Recipe = Callable[[EnvSpec], "tuple[list[ClipPlan], list[Pool] | list[list[str]]]"]

# the package of per-environment authoring modules (see its docstring for their API)
RECIPES_PACKAGE = "vical.authoring.recipes"


def recipe_packages() -> list[str]:
    """Packages searched for an environment's authoring module, in order: the
    ``recipes`` subpackage of each package named in ``$VICAL_GAME_PACKAGES`` (an added
    environment's ``<package>.recipes.<env>``), then :data:`RECIPES_PACKAGE`."""
    added = [p for p in game_packages() if p != GAME_PACKAGE]
    return [*(f"{p}.recipes" for p in added), RECIPES_PACKAGE]


def author_module(spec: EnvSpec) -> ModuleType | None:
    """The environment's authoring module (``vical.authoring.recipes.<env>``, or an added
    environment's ``<package>.recipes.<env>``), if any."""
    return env_module(recipe_packages(), spec)


def recipe_for(spec: EnvSpec) -> Recipe | None:
    """The environment's demo recipe ``recipe(spec) -> (plans, pools or id lists)``: its
    authoring module's ``recipe`` function, else its ``RECIPE`` (a family's recipe data,
    called the same way); None where it has neither (the generic plan applies)."""
    mod = author_module(spec)
    if mod is None:
        return None
    # looked up by name on the module: typed by the recipe API the package documents
    fn: Recipe | None = getattr(mod, "recipe", None) or getattr(mod, "RECIPE", None)
    return fn


def init_generator(spec: EnvSpec) -> Callable[[EnvSpec], dict[str, list[str]]] | None:
    """The environment's human-init generator: its authoring module's
    ``generate_init_actions``, or None where it has none (its sequences are data)."""
    fn: Callable[[EnvSpec], dict[str, list[str]]] | None = getattr(
        author_module(spec), "generate_init_actions", None
    )
    return fn
