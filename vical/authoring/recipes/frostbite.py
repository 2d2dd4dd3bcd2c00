"""Frostbite demo clips: random-shooting chunks over the game's seeded hopper; the failure is the hopper without look-ahead until a life is lost."""

from __future__ import annotations

from vical.authoring.recipes._ale import chunk_recipe
from vical.envs.games.frostbite import policy

RECIPE = chunk_recipe(
    policy,
    wins=((30, 0, 30), (70, 3, 30), (20, 6, 30)),
    fail_policy=policy,
    fail_every=True,  # a lost life costs the death penalty
    fail_start=(40, 0),
    fail_len=14,
    fail_note="failure clip: the game's seeded random hopper, without look-ahead, until a life is lost",
)
