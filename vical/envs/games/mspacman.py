"""MsPacman: points since the start state against a calibrated target.

Scoring is the family default (capped ratio of reward to ``reward``; pass at
``pass_reward``); a lost life ends the episode (Table 7: "life-loss termination").
The pass needs the life kept to the end: Table 28 reports no early success among
MsPacman's 55% early deaths, so points eaten before a ghost catches her count for
the score only.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """The default reward scoring, with a pass that needs the life kept to the end."""

    pass_needs_life = True
