"""Tennis demo clips: look-ahead expert footwork (the racket swings by itself) from
the served rally after a few warm-up moves, until the agent wins the point, and a
player running away (Left held) while the opponent wins it without a return.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.decision_point_inits` over seeded random footwork.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.authoring.search import decision_point_inits
from vical.envs.ale import JOYSTICK
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec

# human-init search: its seed and the moves it draws from
GENERATOR_SEED = 2026
INIT_MOVES = [*JOYSTICK, "NOOP"]


def rally_value(env: VicalEnv) -> float:
    """Returns made, plus a large bonus once the point is won (the tests' value)."""
    returns: int = getattr(env.adapter, "returns", 0)
    return returns + (10 if env.passed() else 0)


RECIPE = GameDemos(
    moves=("NOOP", "Up", "Down", "Left", "Right", "Down+Left", "Up+Right"),
    depth=8,
    tails=2,
    value=rally_value,
    wins=((0, 3, 30), (0, 7, 30), (2, 1, 30)),
    # standing still (NOOP) lets the automatic swing return a ball that comes straight
    # at the player, which passes; running away never returns it
    fail_action="Left",
    fail_start=(0, 1),
    fail_len=14,
    fail_note=(
        "scripted failure: Left held, the player runs away from the ball and the "
        "opponent wins the point without a return"
    ),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Tennis.

    Strategy: after the automatic serve and the one skipped step, draw seeded
    random footwork of 2-8 moves; keep the first that leaves the point
    undecided, gives a start frame no sibling task has, and ends where
    standing still for eight decisions loses the point while some short
    footwork plan keeps the rally alive (the ball is on its way to the agent).
    """
    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(2, 8), danger_within=8, plan_depth=8
    )
