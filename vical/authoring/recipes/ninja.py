"""Ninja demo clips: search-expert runs to the mushroom on unused levels, and a ninja
killed by a bomb or a fall."""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, random_held

RECIPE = ProcgenRecipe(
    wins=3,
    win_len=(14, 45),
    horizon=60,
    width=12,
    midway_len=(10, 36),
    fail_policy=random_held(hold=6, among=("Right", "Jump Right", "Jump", "NOOP")),
    fail_len=14,
    fails=2,
    fail_note=(
        "failure clip: seeded random running and jumping (held 1-6 decisions) until the "
        "ninja dies; the clip is the last 14 decisions before that"
    ),
)
