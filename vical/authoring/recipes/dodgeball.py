"""Dodgeball demo clips: search-expert hits on opponents on unused levels, and a player
knocked out (hit by a ball or touching a wall).

The tasks' targets differ (two hits for most, three for seed202), so the expert
clips are planned per label group."""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, random_held

RECIPE = ProcgenRecipe(
    wins=2,
    win_len=(14, 45),
    horizon=70,
    width=12,
    midway_len=(10, 36),
    fail_policy=random_held(hold=4, among=("NOOP", "Left", "Right", "Up", "Down")),
    fail_len=14,
    fails=2,
    fail_note=(
        "failure clip: seeded random running without throwing (moves held 1-4 decisions) "
        "until the player is knocked out; the clip is the last 14 decisions before that"
    ),
)
