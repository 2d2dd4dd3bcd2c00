"""Berzerk: leave the room through an exit (early success) or keep the life with enough points.

The room's own objective is to get out: the maze has open gaps in its outer
wall, and walking through one scrolls the game to the next room. The Atari
game keeps a room counter in RAM (byte 92); it also advances when the player
dies (the next life starts in a new room), but then the life counter drops on
the same primitive step. A change of the counter with no life lost is a room
exit: the episode ends at once as a Victory.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick

# RAM byte of the room counter: it advances when the player walks out of the
# room (and when a life is lost, on the same step as the life counter).
ROOM_BYTE = 92


class Adapter(ALEAdapter):
    """Pass by leaving the room alive (ends as Victory), or by being alive at the budget
    with the calibrated pass threshold of points.

    Robots destroy themselves on walls, so even doing nothing earns points
    before the player is shot; requiring survival separates real play.
    """

    def start(self) -> None:
        self.start_lives: int | None = self.ale.lives()
        self.start_room = int(self.ram()[ROOM_BYTE])
        self.died = False
        self.exited = False

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        if self.died or self.exited:
            return
        start = self.start_lives
        if tick.terminated or (start is not None and self.ale.lives() < start):
            self.died = True
        elif int(self.ram()[ROOM_BYTE]) != self.start_room:
            self.exited = True

    def score(self) -> float:
        # Leaving the room completes the room's objective: full marks, whatever the
        # points so far (a walk-out that shoots no robot would otherwise score 0).
        return 100.0 if self.exited else super().score()

    def passed(self) -> bool:
        if self.died:
            return False
        return self.exited or self.total >= self.task.target("pass_reward")

    def ending(self, native_terminated: bool) -> str | None:
        if self.exited:
            return "Victory"
        return super().ending(native_terminated)

    def progress(self) -> dict[str, Any]:
        return {"reward": self.total, "died": self.died, "exited": self.exited}


# demo packing (vical.demos.packages): only success clips whose id carries this marker
# show the game's objective, walking out of the room (its early success in Table 28)
OBJECTIVE_CLIP = "-exit"
