"""Bigfish demo clips: search-expert meals on unused levels, and a fish eaten by a bigger one."""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, random_held

MOVES = ("Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left", "Down+Right")

RECIPE = ProcgenRecipe(
    wins=3,
    win_len=(14, 40),
    horizon=40,
    width=8,
    midway_len=(8, 30),
    fail_policy=random_held(hold=4, among=MOVES),
    fail_len=16,
    fails=2,
    fail_note=(
        "failure clip: seeded random swimming (moves held 1-4 decisions) until a fish bigger "
        "than the player's touches it; the clip is the last 16 decisions before that"
    ),
)
