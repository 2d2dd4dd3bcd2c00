"""Turmoil demo clips: look-ahead expert runs from a shifted opening and two
warmed-up lanes, and a ship left in its lane (Up held) until an enemy rams it."""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos

RECIPE = GameDemos(
    moves=("NOOP", "Up", "Down", "Left+Shoot", "Right+Shoot", "Shoot"),
    depth=14,
    tails=2,
    wins=((9, 0, 34), (3, 10, 30), (5, 22, 26)),
    fail_action="Up",
    fail_start=(12, 0),
    fail_len=14,
    fail_note=(
        "scripted failure: Up held, the ship neither turns nor fires, until an enemy "
        "reaches the shaft in its lane and destroys it"
    ),
)
