"""River Raid demo clips, per RAM setting (section and fuel written after reset).

Every group of tasks with one setting gets look-ahead expert flights from
warmed-up starts and a failure: Up held (full speed, no steering or shooting)
until the jet hits the bank or an enemy. Tasks of one river section share the
clips of the first setting of that section whenever those replay on their own
fuel level to the same labels (a fuller or emptier tank only changes the gauge
over a short flight); low tanks that run dry or force a depot detour get their
own.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random flights.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import decision_point_inits
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from
GENERATOR_SEED = 2026
INIT_MOVES = ["Up", "Left", "Right", "Up+Left", "Up+Right", "Shoot", "Up+Shoot", "Down", "NOOP"]

RECIPE = GameDemos(
    moves=("NOOP", "Shoot", "Up", "Left", "Right", "Up+Shoot"),
    depth=6,
    tails=1,
    wins=((0, 4, 34), (0, 12, 30), (0, 20, 26)),
    later_wins=1,
    seeds=(0, 1),
    fail_action="Up",
    fail_start=(0, 2),
    fail_len=12,
    fail_note=(
        "scripted failure: after a couple of expert moves, Up held (full speed, no "
        "steering, no shooting) until the jet crashes"
    ),
    share=lambda v: v.params.get("section", 1),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for River Raid.

    Strategy: after the 20 skipped frames, draw seeded random flights of 4-12
    moves (climbing, banking and shooting); keep the first that keeps the jet
    alive, gives a start frame no sibling task has, and ends where flying on
    without steering for six decisions crashes the jet while some short plan
    survives (a bank, an enemy or a bridge is just ahead).
    """
    return decision_point_inits(
        env_spec,
        INIT_MOVES,
        GENERATOR_SEED,
        length=(4, 12),
        danger_within=6,
        plan_depth=8,
        plans=4,
        tries=6,
    )
