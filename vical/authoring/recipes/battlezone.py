"""BattleZone demo clips: the first enemy destroyed, with the life kept to the clip's end.

A task passes with a hit and the life kept to its budget (the paper's "first-hit
timing with survival"); a clip's budget is its own length, so a clip that hits and
survives to its last decision replays to Victory.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
with a wider beam (16): the reward is sparse, one hit, and a width-8 beam often
drifts without finding it. Clips run from a shifted start and three warmed-up
starts per mode and end at the hit, so they are short and packages take
several. The failure clip holds NOOP until an enemy tank's shell hits.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.envs.games.battlezone import WALK_ACTIONS

RECIPE = beam_recipe(
    WALK_ACTIONS,
    # (extra skipped frames, warm-up decisions, clip decisions); the clip stops soon after the hit
    wins=((7, 0, 30), (7, 6, 30), (30, 12, 30), (60, 4, 30)),
    fail_action="NOOP",
    fail_start=(9, 0),
    fail_len=20,
    fail_note=(
        "scripted failure: NOOP held (the tank neither turns nor fires) until an enemy "
        "shell hits it and the life is lost"
    ),
    width=16,
)
