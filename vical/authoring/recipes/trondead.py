"""TRON Deadly Discs demo clips, per RAM level (the wave counter written after reset,
with its own point targets).

Each level's tasks share two look-ahead expert fights (runs, throws and dodges)
from warmed-up starts and a failure: Left held, Tron runs to the left wall and
stays there, never dodging or throwing, until a warrior's disc hits him (NOOP
alone would not do: on level 0 the wave only starts with a move).

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random runs and throws.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import Viable, decision_point_inits, screen_viable
from vical.envs.ale import JOYSTICK
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from
GENERATOR_SEED = 2026
INIT_MOVES = [*JOYSTICK, "Shoot", "Left+Shoot", "Right+Shoot"]

RECIPE = GameDemos(
    moves=("NOOP", "Up", "Down", "Left", "Right", "Shoot", "Left+Shoot", "Right+Shoot"),
    depth=8,
    tails=1,
    wins=((0, 4, 34), (0, 12, 28)),
    fail_action="Left",
    fail_start=(0, 3),
    fail_len=14,
    fail_note=(
        "scripted failure: after a few expert moves, Left held, Tron runs to the wall and "
        "stays there, neither dodging nor throwing, until a warrior's disc hits him"
    ),
)


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Human-init sequences for Trondead.

    Strategy: after reset and the RAM level write, draw seeded random
    sequences of 3-8 runs and throws (the first move starts the wave); keep
    the first that leaves Tron unhit, gives a start frame no sibling task has,
    and ends where idling for six decisions gets Tron hit while some short
    plan dodges.

    Screened: a sequence from whose end a constant action or an action cycle of the
    reflex screen passes the task is skipped for the search's next candidate
    (``viable``: the check, default :func:`~vical.authoring.search.screen_viable`).
    """
    check = viable or screen_viable(env_spec)
    return decision_point_inits(
        env_spec,
        INIT_MOVES,
        GENERATOR_SEED,
        start_viable=check,
        length=(3, 8),
        danger_within=6,
        plan_depth=8,
    )
