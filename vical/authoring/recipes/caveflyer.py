"""Caveflyer demo clips: search-expert flights to the exit ship on unused levels, and a
crash into the cave wall."""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, random_held

RECIPE = ProcgenRecipe(
    wins=3,
    win_len=(12, 40),
    horizon=50,
    width=12,
    midway_len=(8, 30),
    fail_policy=random_held(hold=4, among=("Thrust", "Turn Left", "Turn Right")),
    fail_len=14,
    fails=2,
    fail_note=(
        "failure clip: seeded random flying (Thrust and turns held 1-4 decisions) until the "
        "ship hits the cave wall; the clip is the last 14 decisions before that"
    ),
)
