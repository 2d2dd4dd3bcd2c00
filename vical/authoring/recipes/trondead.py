"""TRON Deadly Discs demo clips, per RAM level (the wave counter written after reset,
with its own point targets).

Each level's tasks share two look-ahead expert fights (runs, throws and dodges)
from warmed-up starts and a failure: Left held, Tron runs to the left wall and
stays there, never dodging or throwing, until a warrior's disc hits him (NOOP
alone would not do: on level 0 the wave only starts with a move).
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos

RECIPE = GameDemos(
    moves=("NOOP", "Up", "Down", "Left", "Right", "Shoot", "Left+Shoot", "Right+Shoot"),
    depth=8,
    tails=1,
    wins=((0, 4, 34), (0, 12, 28)),
    fail_action="Left",
    fail_start=(0, 3),
    fail_len=14,
    fail_note=(
        "scripted failure: after a few expert moves, Left held, Tron runs to the wall and "
        "stays there, neither dodging nor throwing, until a warrior's disc hits him"
    ),
)
