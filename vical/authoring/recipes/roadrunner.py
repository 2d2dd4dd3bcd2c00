"""Road Runner demo clips: look-ahead expert chases (leftward runs and lane changes)
from three warmed-up chases (the opening waits for the first move, so skipped
frames alone do not shift it), and a bird that stands still (NOOP held) until
the coyote catches it."""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos

RECIPE = GameDemos(
    moves=("Left", "Up+Left", "Down+Left", "Up", "Down"),
    depth=10,
    tails=3,
    wins=((0, 3, 34), (0, 8, 30), (0, 16, 26)),
    fail_action="NOOP",
    fail_start=(0, 4),
    fail_len=12,
    fail_note=(
        "scripted failure: after a few expert moves, NOOP held, the bird stops running "
        "until the coyote catches it"
    ),
)
