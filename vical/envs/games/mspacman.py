"""MsPacman: points since the start state against a calibrated target.

Scoring is the family default (capped ratio of reward to ``reward``; pass at
``pass_reward``); a lost life ends the episode (Table 7: "life-loss termination").
The pass needs the life kept to the end: Table 28 reports no early success among
MsPacman's 55% early deaths, so points eaten before a ghost catches her count for
the score only.
This module holds the scripted expert and the human-init generator.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from vical.envs.ale import ALEAdapter
from vical.spec import EnvSpec

if TYPE_CHECKING:
    from vical.authoring.sim import DecisionSim


class Adapter(ALEAdapter):
    """The default reward scoring, with a pass that needs the life kept to the end."""

    pass_needs_life = True


# human-init preload length (decisions) per variant: prefixes of one deathless play
LENGTHS: dict[str, int] = {"maze-a": 12, "maze-b": 24, "maze-c": 36, "maze-d": 48}

_DIRS = ["Up", "Right", "Left", "Down"]


def policy(sim: DecisionSim, rng: random.Random) -> str:
    """Seeded wanderer: picks a direction and mostly keeps it for a while."""
    last = getattr(rng, "_last", None)
    if last is None or rng.random() < 0.25:
        last = rng.choice(_DIRS)
        rng._last = last  # type: ignore[attr-defined]
    return last


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic preloads: prefixes of one deathless seeded walk through the maze."""
    from vical.authoring.search import prefix_streams

    return prefix_streams(env_spec, Adapter, LENGTHS, policy, seed=5)


INIT_STRATEGY = (
    "prefix of a deathless seeded walk through the maze (direction kept with probability "
    "0.75 per decision; clone/restore rewinds whenever a life would be lost)"
)
