"""Demon Attack demo clips: random-shooting chunks over the game's seeded policy; the failure holds NOOP until a demon's shot costs a life."""

from __future__ import annotations

from vical.authoring.recipes._ale import chunk_recipe, hold
from vical.envs.games.demonattack import policy

RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (7, 45, 30), (7, 100, 26)),
    fail_policy=hold("NOOP"),
    fail_start=(7, 20),
    fail_len=16,
    fail_note="scripted failure: NOOP held (no dodging, no shooting) until a demon's shot costs a life",
)
