"""Turmoil demo clips: look-ahead expert runs from a shifted opening and two
warmed-up lanes, and a ship left in its lane (Up held) until an enemy rams it.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random lane changes, turns and shots.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import decision_point_inits
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from (change lane, turn, shoot)
GENERATOR_SEED = 2026
INIT_MOVES = ["Up", "Down", "Left", "Right", "Shoot", "Right+Shoot", "Left+Shoot", "NOOP"]

RECIPE = GameDemos(
    moves=("NOOP", "Up", "Down", "Left+Shoot", "Right+Shoot", "Shoot"),
    depth=14,
    tails=2,
    wins=((9, 0, 34), (3, 10, 30), (5, 22, 26)),
    fail_action="Up",
    fail_start=(12, 0),
    fail_len=14,
    fail_note=(
        "scripted failure: Up held, the ship neither turns nor fires, until an enemy "
        "reaches the shaft in its lane and destroys it"
    ),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Turmoil.

    Strategy: from the task's seed and 65 skipped frames, draw seeded random
    sequences of 6-14 lane changes, turns and shots; keep the first one that
    stays alive, reaches a start frame no sibling task has, and ends where
    idling for eight decisions loses the ship while some short plan survives
    (an enemy is bearing down on the ship's lane).
    """
    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(6, 14), danger_within=8, plan_depth=8
    )
