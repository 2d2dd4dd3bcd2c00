"""Seaquest demo clips: look-ahead expert dives (shooting sharks and subs, picking
up divers) from three later points of the opening, and a sub left idle (NOOP held)
until an enemy runs into it."""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos

RECIPE = GameDemos(
    moves=("NOOP", "Shoot", "Up", "Down", "Left+Shoot", "Right+Shoot"),
    depth=6,
    tails=2,
    wins=((-290, 4, 34), (-180, 6, 30), (-60, 3, 26)),
    fail_action="NOOP",
    fail_start=(-250, 5),
    fail_len=14,
    fail_note=(
        "scripted failure: a short expert dive, then NOOP held, the sub neither dodges "
        "nor fires until an enemy runs into it"
    ),
)
