"""Frostbite: ice floes reached as events, a calibrated death penalty, early Victory.

Each jump onto a row of white ice floes turns the row blue, adds a block to
the igloo and pays 10 points (level 1); these small rewards are counted as
"floes reached". The score is the capped share of the ``floes`` target; when a
life is lost (which ends the episode, Table 7) the calibrated ``death_penalty``
is subtracted from the score. Reaching the target ends the episode with the
label Victory, and that is also the pass rule.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import EventCounter, clamp

LANDING_MAX = 90  # floe rewards are 10 x level; larger rewards are igloo or catch bonuses


class Adapter(ALEAdapter):
    def start(self) -> None:
        self.floes = EventCounter(self.task.target("floes"))
        self.lives0 = int(self.ale.lives())
        self.died = False

    def on_tick(self, tick: Tick) -> None:
        if 0 < tick.reward <= LANDING_MAX:
            self.floes.add(1)
        if int(self.ale.lives()) < self.lives0 or tick.terminated:
            self.died = True

    def score(self) -> float:
        s = self.floes.score()
        if self.died:
            s -= self.task.target("death_penalty")
        return clamp(s)

    def passed(self) -> bool:
        return self.floes.count >= self.floes.target

    def won(self) -> bool:
        return self.passed()

    def progress(self) -> dict[str, Any]:
        return {"floes": self.floes.count, "died": self.died}
