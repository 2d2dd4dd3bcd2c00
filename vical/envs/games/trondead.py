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

from vical.envs.ale import ALEAdapter

LEVEL = 74  # wave counter: warriors' type and point value
LEVELS = (0, 1, 2, 4, 7)


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
