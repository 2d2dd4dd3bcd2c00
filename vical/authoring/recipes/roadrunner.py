"""Road Runner demo clips: look-ahead expert chases (leftward runs and lane changes)
from three warmed-up chases (the opening waits for the first move, so skipped
frames alone do not shift it), and a bird that stands still (NOOP held) until
the coyote catches it.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random chases.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import decision_point_inits
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from (the chase always heads left,
# with lane changes)
GENERATOR_SEED = 2026
INIT_MOVES = ["Left", "Up+Left", "Down+Left", "Up", "Down", "NOOP"]

RECIPE = GameDemos(
    moves=("Left", "Up+Left", "Down+Left", "Up", "Down"),
    depth=10,
    tails=3,
    wins=((0, 3, 34), (0, 8, 30), (0, 16, 26)),
    fail_action="NOOP",
    fail_start=(0, 4),
    fail_len=12,
    fail_note=(
        "scripted failure: after a few expert moves, NOOP held, the bird stops running "
        "until the coyote catches it"
    ),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Road Runner.

    Strategy: from reset (seed 41), draw seeded random chases of 4-12 moves
    made of leftward runs and lane changes; keep the first that stays alive,
    gives a start frame no sibling task has, and ends with the coyote close
    enough that idling for six decisions loses a life while some short plan
    escapes.
    """
    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(4, 12), danger_within=8, plan_depth=16
    )
