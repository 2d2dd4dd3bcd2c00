"""Ms. Pac-Man demo clips: random-shooting chunks over the game's seeded policy; the failure holds Up until a ghost catches Ms. Pac-Man."""

from __future__ import annotations

from vical.authoring.recipes._ale import chunk_recipe, hold
from vical.envs.games.mspacman import policy

RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (7, 30, 28), (7, 60, 24)),
    fail_policy=hold("Up"),
    fail_start=(7, 6),
    fail_len=16,
    fail_note="scripted failure: Up held without regard for the ghosts until one catches Ms. Pac-Man",
)
