"""Turmoil: shoot the enemies crossing seven lanes from a ship in the central shaft.

Scoring is the default capped ratio of points earned since the start state;
a life loss ends the episode (Table 7: "life-loss termination"). Pass: the points
threshold with the ship still in play when the episode ends; Table 28 reports no
early success among Turmoil's 30% early deaths, so a lost ship fails the task
whatever it scored before.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """Default ALE scoring (points since the start state against a calibrated target);
    a pass needs the ship kept to the end."""

    pass_needs_life = True
