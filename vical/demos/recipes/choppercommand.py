"""Chopper Command demo clips: enemy aircraft shot down, points against the target.

The expert is the group's life-safe beam search (see :mod:`vical.demos.recipes.alien`)
from a shifted start and two warmed-up starts. The failure clip holds Right,
flying straight into the oncoming enemy formation until a collision costs
the life.
"""

from __future__ import annotations

from vical.demos.make import AleRecipe
from vical.demos.recipes.alien import BEAM_NOTE, beam_win, deathless_walk, hold, life_lost
from vical.envs.ale_games.choppercommand import WALK_ACTIONS

RECIPE = AleRecipe(
    win=beam_win(width=8),
    warm=deathless_walk(WALK_ACTIONS),
    # (extra skipped frames, warm-up decisions, clip decisions); the screen stands still
    # from frame 32 until the first decision, so every start needs a warm-up
    wins=((7, 3, 34), (7, 10, 30), (20, 20, 26)),
    fail_policy=hold("Right"),
    fail_event=life_lost,
    fail_start=(9, 0),
    fail_len=14,
    win_note=BEAM_NOTE.format(width=8),
    fail_note=(
        "scripted failure: Right held, flying into the enemy formation without dodging or "
        "firing, until a collision costs the life"
    ),
)
