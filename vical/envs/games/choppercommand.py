"""Chopper Command: the default capped ratio of points, with a pass that needs the life.

Table 7 (ALE/ChopperCommand-v5): "Full semantic action set and life-loss termination".
Pass: the points threshold with the helicopter still flying when the episode ends;
Table 28 reports no early success among Chopper Command's 65% early deaths, so a
crash fails the task whatever was scored before it.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """Chopper Command uses the generic ALE scoring: points against a calibrated target;
    a pass needs the helicopter kept to the end."""

    pass_needs_life = True
