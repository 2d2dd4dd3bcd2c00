"""Seaquest: shoot sharks and subs, rescue divers, surface for air.

Table 7 rules: outer frame skip 5 with the action held for 2 slots (NOOP fill,
in the YAML), a life loss ends the episode, and RAM-based bonuses reward the
two mechanics the raw reward under-represents: every diver picked up
(RAM byte 62, divers carried) adds ``diver_bonus`` points, and every
successful surfacing (the carried count drops while the sub survives) adds
``surface_bonus`` points. Kill points and the game's own surfacing points are
counted as they come.

"Auto-respawn support": the game never needs a button press to put a sub in
play after reset (the first sub starts at the surface by itself), and any
respawn after a lost sub is outside the task because the loss ends it, so no
extra wrapper step is needed.

Pass: the calibrated points threshold with the sub still in play when the episode
ends. Table 7 lists "life-loss termination" and Table 28 reports no early success
among Seaquest's 85% early deaths, so points counted before a lost sub stay in the
score but the loss fails the task.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick

DIVERS = 62  # divers carried (0-6)
PLAYER_Y = 97  # 13 at the surface, larger is deeper
SURFACE_Y = 13


class Adapter(ALEAdapter):
    """Points plus RAM-based diver and surfacing bonuses; a pass needs the sub kept."""

    pass_needs_life = True

    def start(self) -> None:
        ram = self.ram()
        self.divers = int(ram[DIVERS])
        self.rescued = 0
        self.surfacings = 0

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        now = int(self.ram()[DIVERS])
        if now > self.divers:
            self.rescued += now - self.divers
            self.total += float(self.task.params["diver_bonus"]) * (now - self.divers)
        elif now < self.divers and not tick.terminated and self.lives_left_unchanged():
            self.surfacings += 1
            self.total += float(self.task.params["surface_bonus"])
        self.divers = now

    def begin(self) -> None:
        self.start_lives = self.lives()
        super().begin()

    def lives_left_unchanged(self) -> bool:
        return self.lives() == self.start_lives

    def depth(self) -> int:
        return max(0, int(self.ram()[PLAYER_Y]) - SURFACE_Y)

    def progress(self) -> dict[str, Any]:
        return {
            "points": self.total,
            "divers_rescued": self.rescued,
            "surfacings": self.surfacings,
            "died": self.died,
        }


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-shooters", 3)
