"""Seaquest demo clips: look-ahead expert dives (shooting sharks and subs, picking
up divers) from three later points of the opening, and a sub left idle (NOOP held)
until an enemy runs into it.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random dives.
"""

from __future__ import annotations

from typing import cast

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import decision_point_inits
from vical.envs.games.seaquest import Adapter
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from
GENERATOR_SEED = 2026
INIT_MOVES = ["Down", "Down+Left", "Down+Right", "Down+Shoot", "Left", "Right", "Shoot", "NOOP"]

RECIPE = GameDemos(
    moves=("NOOP", "Shoot", "Up", "Down", "Left+Shoot", "Right+Shoot"),
    depth=6,
    tails=2,
    wins=((-290, 4, 34), (-180, 6, 30), (-60, 3, 26)),
    fail_action="NOOP",
    fail_start=(-250, 5),
    fail_len=14,
    fail_note=(
        "scripted failure: a short expert dive, then NOOP held, the sub neither dodges "
        "nor fires until an enemy runs into it"
    ),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Seaquest.

    Strategy: after each task's warm-up skip, draw seeded random dives of 3-7
    moves (mostly downward, some sideways moves and shots); keep the first that
    stays alive, ends with the sub under water, gives a start frame no sibling
    has, and ends where idling for six decisions loses the sub to an enemy
    while some short plan survives.
    """
    return decision_point_inits(
        env_spec,
        INIT_MOVES,
        GENERATOR_SEED,
        length=(3, 7),
        danger_within=6,
        plan_depth=6,
        accept=lambda e: cast(Adapter, e.adapter).depth() > 0,
    )
