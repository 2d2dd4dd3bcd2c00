"""Chopper Command demo clips: enemy aircraft shot down, points against the target.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
from a shifted start and two warmed-up starts. The failure clip holds Right,
flying straight into the oncoming enemy formation until a collision costs
the life.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.envs.games.choppercommand import WALK_ACTIONS

RECIPE = beam_recipe(
    WALK_ACTIONS,
    # (extra skipped frames, warm-up decisions, clip decisions); the screen stands still
    # from frame 32 until the first decision, so every start needs a warm-up
    wins=((7, 3, 34), (7, 10, 30), (20, 20, 26)),
    fail_action="Right",
    fail_start=(9, 0),
    fail_len=14,
    fail_note=(
        "scripted failure: Right held, flying into the enemy formation without dodging or "
        "firing, until a collision costs the life"
    ),
)
