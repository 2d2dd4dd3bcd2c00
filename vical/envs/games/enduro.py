"""Enduro: cars passed (net) against a calibrated target, four progress bands.

Scoring is the family default (capped ratio of the native reward, +1 per car
passed and -1 per car that passes back, to ``reward``; pass at
``pass_reward``). There are no lives. The human-init variants fall in four
bands of race time: the opening (no initial skip, only a driving sequence), and
initial skips of 800-1050, 1850-2150 and 2350-2550 emulator steps (the light
and weather change along the race day), each followed by a driving sequence so
the car is already moving.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """The default reward scoring (no lives to lose)."""


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("driving", 2)
