"""TRON Deadly Discs: survive the warriors' discs and knock them out with your own.

Table 7 rules: RAM-selected variants and variant-specific targets. The
variant's ``level`` parameter (0, 1, 2, 4 or 7) is written to RAM byte 74 right
after reset. That byte is the game's wave counter: it selects the warriors'
colour, aggression and the points each knock-out is worth, so each level has
its own calibrated reward target (task-level ``targets``). A hit on Tron
(RAM byte 72 counts hits; ale-py reports 5 - hits as lives) ends the episode
(Table 7: "life-loss termination"). Pass: the level's points threshold with Tron
unhit when the episode ends; Table 28 reports no early success among Trondead's 59%
early deaths, so knock-outs before a hit count for the score but the hit fails the task.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import JOYSTICK, ALEAdapter
from vical.spec import EnvSpec

GENERATOR_SEED = 2026
LEVEL = 74  # wave counter: warriors' type and point value
LEVELS = (0, 1, 2, 4, 7)
INIT_MOVES = [*JOYSTICK, "Shoot", "Left+Shoot", "Right+Shoot"]


class Adapter(ALEAdapter):
    """Writes the variant's level to RAM after reset; default capped-ratio scoring; a
    pass needs Tron unhit to the end."""

    pass_needs_life = True

    def prepare(self) -> None:
        level = int(self.task.params.get("level", 0))
        if level not in LEVELS:
            raise ValueError(f"{self.task.id}: level must be one of {LEVELS}, got {level}")
        self.ale.setRAM(LEVEL, level)

    def progress(self) -> dict[str, Any]:
        level = int(self.task.params.get("level", 0))
        return {"reward": self.total, "level": level, "died": self.died}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Trondead.

    Strategy: after reset and the RAM level write, draw seeded random
    sequences of 3-8 runs and throws (the first move starts the wave); keep
    the first that leaves Tron unhit, gives a start frame no sibling task has,
    and ends where idling for six decisions gets Tron hit while some short
    plan dodges.
    """
    from vical.authoring.search import decision_point_inits

    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(3, 8), danger_within=6, plan_depth=8
    )
