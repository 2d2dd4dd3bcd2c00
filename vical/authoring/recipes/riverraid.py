"""River Raid demo clips, per RAM setting (section and fuel written after reset).

Every group of tasks with one setting gets look-ahead expert flights from
warmed-up starts and a failure: Up held (full speed, no steering or shooting)
until the jet hits the bank or an enemy. Tasks of one river section share the
clips of the first setting of that section whenever those replay on their own
fuel level to the same labels (a fuller or emptier tank only changes the gauge
over a short flight); low tanks that run dry or force a depot detour get their
own.
"""

from __future__ import annotations

from vical.authoring.recipes._lookahead import GameDemos

RECIPE = GameDemos(
    moves=("NOOP", "Shoot", "Up", "Left", "Right", "Up+Shoot"),
    depth=6,
    tails=1,
    wins=((0, 4, 34), (0, 12, 30), (0, 20, 26)),
    later_wins=1,
    seeds=(0, 1),
    fail_action="Up",
    fail_start=(0, 2),
    fail_len=12,
    fail_note=(
        "scripted failure: after a couple of expert moves, Up held (full speed, no "
        "steering, no shooting) until the jet crashes"
    ),
    share=lambda v: v.params.get("section", 1),
)
