"""Simulator state as flat, JSON-able facts: what a case's specification is written from.

:func:`sim_state` reads one environment's state into a mapping of named facts
(``"taxi row": 3``, ``"cell 4,2": "door-yellow-locked"``, ``"row 07": "..22.."``)
through the adapter's public state API (:meth:`vical.envs.core.Adapter.state_facts`;
each game's reader lives with its adapter in :mod:`vical.envs`).
A case's required change is the facts that differ between the context state and
the state after the intervention; its protected state is the facts that do not.

For the families whose renderer is known exactly (:data:`EXACT_FAMILIES`: Toy
Text, MiniGrid, Tetris and the custom Breakout) the facts are exactly what the
frame shows, so :mod:`vical.wm.readback` can read the same facts back from a
frame and the specification can be checked on a predicted frame. For the other
families the facts come from the scoring state (``progress``), the lives counter
and, for classic control, the physical state vector; they describe the case,
and its checks are made on pixels (:mod:`vical.wm.score`).
"""

from __future__ import annotations

from vical.envs import VicalEnv
from vical.envs.states import Facts
from vical.spec.families import FAMILIES

EXACT_FAMILIES = frozenset(f.name for f in FAMILIES.values() if f.exact_renderer)


def sim_state(env: VicalEnv) -> Facts:
    """The environment's current state as named facts (see the module docstring)."""
    return env.adapter.state_facts()
