"""Assault demo clips: three attackers destroyed (63 points) end the episode with Victory.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
from a shifted start and two warmed-up starts; it finishes as soon as the third
attacker falls, so the clips are as short as the play allows. The failure clip
holds NOOP (no dodging, no firing) until a dropped shot destroys the cannon.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.envs.games.assault import WALK_ACTIONS

RECIPE = beam_recipe(
    WALK_ACTIONS,
    # (extra skipped frames, warm-up decisions, clip decisions); the clip ends at the third hit
    wins=((7, 0, 40), (7, 10, 40), (15, 22, 40)),
    fail_action="NOOP",
    fail_start=(11, 4),
    fail_len=16,
    fail_note=(
        "scripted failure: NOOP held (the cannon neither moves nor fires) until an attacker's "
        "shot destroys it and the life is lost"
    ),
)
