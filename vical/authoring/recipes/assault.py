"""Assault demo clips: three attackers destroyed (63 points) end the episode with Victory.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
from a shifted start and two warmed-up starts; it finishes as soon as the third
attacker falls, so the clips are as short as the play allows. The failure clip
holds NOOP (no dodging, no firing) until a dropped shot destroys the cannon.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded play.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.authoring.search import dense_starts
from vical.spec import EnvSpec

WALK_LENGTHS = {"duel-a": 6, "duel-b": 10, "duel-c": 14, "duel-d": 18}
WALK_ACTIONS = ["NOOP", "Up", "Left", "Right", "Left", "Right", "Right+Shoot", "Left+Shoot"]
PROBES = ["NOOP", "Up", "Left", "Right", "Right+Shoot"]

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


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded play ending where the next moves matter."""
    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
