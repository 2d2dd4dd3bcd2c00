"""Leaper demo clips: search-expert crossings of roads and rivers on unused levels, and a
frog lost to a car or the water."""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, random_held

RECIPE = ProcgenRecipe(
    wins=3,
    win_len=(10, 40),
    horizon=50,
    width=12,
    midway_len=(8, 30),
    fail_policy=random_held(hold=3, among=("Up", "Up", "NOOP", "Left", "Right")),
    fail_len=10,
    fails=2,
    fail_note=(
        "failure clip: seeded random hopping, mostly Up (held 1-3 decisions), without looking "
        "at the lanes until a car hits the frog or it lands in the water; the clip is the last "
        "10 decisions before that"
    ),
)
