"""Freeway: RAM-based forward progress of the chicken, halfway pass, crossing = Victory.

RAM byte 14 holds the left (player) chicken's height: 6 on the starting curb,
growing by about 4 per native 4-frame step while Up is held, up to about 176 on
the last lane; reaching the far curb pays +1 and puts the chicken back at 6.
At difficulty 1 a car hit sends the chicken back to the starting curb.

Score: 100 x (best height reached - start height) / (far curb - start height);
a crossing scores 100 and ends the episode with the label Victory. Pass: the
chicken has covered half the distance from its start height to the far curb.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import capped_ratio

CHICKEN_Y = 14  # RAM address of the player's chicken height
CURB_Y = 6  # height on the starting curb


class Adapter(ALEAdapter):
    def chicken_y(self) -> int:
        return int(self.ram()[CHICKEN_Y])

    def start(self) -> None:
        self.y0 = self.chicken_y()
        self.best = self.y0
        self.crossed = False
        self.hits = 0
        self._last = self.y0

    def on_tick(self, tick: Tick) -> None:
        y = self.chicken_y()
        if tick.reward > 0:
            self.crossed = True
        elif y < self._last - 8:
            self.hits += 1  # knocked back to the curb by a car
        if not self.crossed:
            self.best = max(self.best, y)
        self._last = y

    def goal_y(self) -> float:
        return self.task.target("goal_height")

    def score(self) -> float:
        if self.crossed:
            return 100.0
        return capped_ratio(self.best - self.y0, self.goal_y() - self.y0)

    def passed(self) -> bool:
        halfway = self.y0 + (self.goal_y() - self.y0) * float(self.task.params["pass_fraction"])
        return self.crossed or self.best >= halfway

    def ending(self, native_terminated: bool) -> str | None:
        if not self.tracking:  # initial skip or human-init replay
            return super().ending(native_terminated)
        if self.crossed:
            return "Victory"
        if native_terminated:
            return "Victory" if self.passed() else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "start_height": self.y0,
            "best_height": self.best,
            "crossed": self.crossed,
            "hits": self.hits,
        }


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-dodging", 1)
