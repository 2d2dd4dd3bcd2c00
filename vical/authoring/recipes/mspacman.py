"""Ms. Pac-Man demo clips: random-shooting chunks over the seeded wanderer policy; the failure
holds Up until a ghost catches Ms. Pac-Man.

The human-init generator (:func:`generate_init_actions`) keeps prefixes of one
deathless walk of the same wanderer through the maze.
Screened: a prefix from whose end a constant action or an action cycle of the
reflex screen passes the task is replaced by that variant's prefix of the next
seed's play (:func:`vical.authoring.search.screen_viable`).
"""

from __future__ import annotations

import random

from vical.authoring.recipes._ale import chunk_recipe, hold, screened_prefixes
from vical.authoring.search import Viable
from vical.authoring.sim import DecisionSim
from vical.envs.games.mspacman import Adapter
from vical.spec import EnvSpec

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


RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (7, 30, 28), (7, 60, 24)),
    fail_policy=hold("Up"),
    fail_start=(7, 6),
    fail_len=16,
    fail_note="scripted failure: Up held without regard for the ghosts until one catches Ms. Pac-Man",
)


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Deterministic preloads: prefixes of one deathless seeded walk through the maze,
    screened (:func:`~vical.authoring.recipes._ale.screened_prefixes`)."""
    return screened_prefixes(env_spec, Adapter, LENGTHS, policy, seed=5, viable=viable)


INIT_STRATEGY = (
    "prefix of a deathless seeded walk through the maze (direction kept with probability "
    "0.75 per decision; clone/restore rewinds whenever a life would be lost)"
)
