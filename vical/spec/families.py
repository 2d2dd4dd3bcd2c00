"""The environment families, defined once: one record per family with its properties.

A family is a simulator package and the shared code that drives its games
(``vical/envs/<module>.py``). Everything the package knows about a family is a field
of its :class:`Family` record; the task files' ``family`` field, the simulator
checks, the adapter lookup, the doctor, the world-model track, the baseline server,
the Inspect tasks and the run records read :data:`FAMILIES` and nothing else. A new
family is one record here plus its module under :mod:`vical.envs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SimIds = Literal["gymnasium", "ale", "procgen", "module", "registers", "dotted"]
NativeActions = Literal["discrete", "ale", "indices", "names"]


@dataclass(frozen=True)
class Family:
    """One environment family and what the package needs to know of it.

    ``sim_ids`` says how a task file's ``sim_id`` is checked (:func:`vical.spec.checks.registry`):
    ``gymnasium`` against Gymnasium's registry, ``ale`` against ale-py's ``ALE/`` ids (and
    ``env_kwargs.game`` with it), ``procgen`` against procgen2's game names, ``module``
    against the ``SIM_IDS`` of its module, ``registers`` against Gymnasium's registry once
    its module (which registers the simulator's ids) is imported, ``dotted`` as a dotted
    path to a class. ``native_actions`` says how its native action space is known without
    building a game (:func:`vical.spec.checks.native_space`): ``discrete`` from the
    simulator's Discrete space, ``ale`` ALE's full action set, ``indices`` the values of its
    module's ``NATIVE``, ``names`` the keys of its module's ``NATIVE_NAMES``; None: read
    from the game once it is built.
    """

    name: str  # the task files' ``family`` value
    title: str  # how messages name it
    dist: str  # the distribution of its simulator (what ``package`` must name)
    top_module: str  # the top-level module that distribution installs
    # the module under vical.envs holding what its games share, with make_adapter(task)
    module: str
    sim_ids: SimIds
    native_actions: NativeActions | None = None
    ids_at_load: bool = False  # its sim_id registry is cheap: read when a task file loads
    float_physics: bool = False  # its simulator integrates float physics (vical doctor)
    exact_renderer: bool = False  # its frames show its state exactly (world-model readback)
    searchable: bool = False  # the baseline server plans its tasks by breadth-first search

    @property
    def actions_at_load(self) -> bool:
        """Its native action space is known without building a game."""
        return self.native_actions is not None


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "toytext",
            "Toy Text",
            "gymnasium",
            "gymnasium",
            "toytext",
            "gymnasium",
            "discrete",
            ids_at_load=True,
            exact_renderer=True,
            searchable=True,
        ),
        Family(
            "classic",
            "Classic Control",
            "gymnasium",
            "gymnasium",
            "classic",
            "gymnasium",
            "discrete",
            ids_at_load=True,
            float_physics=True,
        ),
        Family("ale", "ALE", "ale-py", "ale_py", "ale", "ale", "ale", ids_at_load=True),
        Family(
            "minigrid",
            "MiniGrid",
            "minigrid",
            "minigrid",
            "minigrid",
            "module",
            exact_renderer=True,
            searchable=True,
        ),
        Family(
            "breakout",
            "CustomBreakout",
            "vical",
            "vical",
            "breakout",
            "dotted",
            "names",
            ids_at_load=True,
            float_physics=True,
            exact_renderer=True,
        ),
        Family("procgen", "Procgen", "procgen2", "procgen", "procgen", "procgen", "indices"),
        Family(
            "highway",
            "highway-env",
            "highway-env",
            "highway_env",
            "highway",
            "registers",
            float_physics=True,
        ),
        Family(
            "tetris",
            "Tetris",
            "tetris-gymnasium",
            "tetris_gymnasium",
            "tetris",
            "registers",
            exact_renderer=True,
        ),
        Family(
            "flappy",
            "Flappy Bird",
            "flappy-bird-gymnasium",
            "flappy_bird_gymnasium",
            "flappy",
            "registers",
            float_physics=True,
        ),
    )
}


def family(name: str) -> Family:
    """The record of a family; KeyError naming the families when there is none."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; families: {', '.join(FAMILIES)}") from None
