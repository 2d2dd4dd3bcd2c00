"""BattleZone demo clips: the first enemy destroyed, with the life kept to the clip's end.

A task passes with a hit and the life kept to its budget (the paper's "first-hit
timing with survival"); a clip's budget is its own length, so a clip that hits and
survives to its last decision replays to Victory.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
with a wider beam (16): the reward is sparse, one hit, and a width-8 beam often
drifts without finding it. Clips run from a shifted start and three warmed-up
starts per mode and end at the hit, so they are short and packages take
several. The failure clip holds NOOP until an enemy tank's shell hits.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded drives.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.authoring.search import dense_starts
from vical.spec import EnvSpec

# Human-init drive length (decisions) per variant: "a" short, "b" longer.
WALK_LENGTHS = {
    "m1-s36-a": 4,
    "m1-s45-a": 3,
    "m1-s110-a": 4,
    "m1-s110-b": 9,
    "m2-s36-a": 4,
    "m2-s45-a": 3,
    "m2-s45-b": 8,
    "m2-s110-a": 4,
    "m2-s110-b": 9,
    "m3-s36-a": 4,
    "m3-s36-b": 8,
    "m3-s45-a": 3,
    "m3-s110-a": 4,
    "m3-s110-b": 9,
}
# No Shoot in the walks: a shell still in flight at the start state would
# hand the agent a free first hit.
WALK_ACTIONS = ["Left", "Right", "Up", "Down", "Up+Left", "Up+Right", "Down+Left", "NOOP"]
PROBES = ["Shoot", "Left+Shoot", "Right+Shoot", "Up+Shoot", "Down", "NOOP"]

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


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded drives ending where the next moves matter."""
    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES, quiet_horizon=15)
