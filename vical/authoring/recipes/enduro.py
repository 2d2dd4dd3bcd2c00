"""Enduro demo clips: random-shooting chunks over the game's seeded policy; the failure holds NOOP (no gas) until cars overtake the player."""

from __future__ import annotations

from vical.authoring.recipes._ale import chunk_recipe, hold
from vical.envs.games.enduro import policy

RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (1400, 6, 28), (7, 36, 24)),
    fail_policy=hold("NOOP"),
    fail_event=lambda sim, o, before: o.reward < 0,
    fail_start=(7, 30),
    fail_len=14,
    fail_after=3,
    fail_note="scripted failure: NOOP held (no gas) until cars overtake the player and take passed cars back",
)
