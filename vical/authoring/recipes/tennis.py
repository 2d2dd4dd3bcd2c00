"""Tennis demo clips: look-ahead expert footwork (the racket swings by itself) from
the served rally after a few warm-up moves, until the agent wins the point, and a
player standing still (NOOP held) while the opponent wins it."""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos
from vical.envs.core import VicalEnv


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
    fail_action="NOOP",
    fail_start=(0, 1),
    fail_len=14,
    fail_note=(
        "scripted failure: NOOP held, the player does not move to the ball and the "
        "opponent wins the point"
    ),
)
