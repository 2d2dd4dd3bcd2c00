"""Pong demo clips: the game module's RAM ball tracker; the failure holds NOOP until the opponent scores."""

from __future__ import annotations

from vical.authoring.recipes._ale import AleRecipe, hold, scripted
from vical.envs.games.pong import track

RECIPE = AleRecipe(
    win=scripted(track),
    warm=scripted(track),
    wins=((7, 0, 30), (7, 20, 26)),
    fail_policy=hold("NOOP"),
    fail_event=lambda sim, o, before: o.reward < 0,
    fail_start=(7, 8),
    fail_len=14,
    fail_after=2,
    win_note=(
        "scripted expert: RAM ball tracker that moves the paddle's middle toward the ball's "
        "height (vical.envs.games.pong.track)"
    ),
    fail_note="scripted failure: NOOP held, the paddle stays put and the opponent scores",
)
