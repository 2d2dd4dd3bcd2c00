"""Turmoil: shoot the enemies crossing seven lanes from a ship in the central shaft.

Scoring is the default capped ratio of points earned since the start state;
a life loss ends the episode (Table 7: "life-loss termination"). Pass: the points
threshold with the ship still in play when the episode ends; Table 28 reports no
early success among Turmoil's 30% early deaths, so a lost ship fails the task
whatever it scored before. This module also holds the human-init generator.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter
from vical.spec import EnvSpec

GENERATOR_SEED = 2026
# Moves used for the human-init search: change lane, turn, shoot.
INIT_MOVES = ["Up", "Down", "Left", "Right", "Shoot", "Right+Shoot", "Left+Shoot", "NOOP"]


class Adapter(ALEAdapter):
    """Default ALE scoring (points since the start state against a calibrated target);
    a pass needs the ship kept to the end."""

    pass_needs_life = True


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Turmoil.

    Strategy: from the task's seed and 65 skipped frames, draw seeded random
    sequences of 6-14 lane changes, turns and shots; keep the first one that
    stays alive, reaches a start frame no sibling task has, and ends where
    idling for eight decisions loses the ship while some short plan survives
    (an enemy is bearing down on the ship's lane).
    """
    from vical.authoring.search import decision_point_inits

    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(6, 14), danger_within=8, plan_depth=8
    )
