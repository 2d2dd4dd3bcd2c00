"""Pong: RAM-based ball/paddle tracking; balls returned are the scored events.

RAM layout used (read from the running game): byte 49 ball x (grows toward
the player's paddle on the right, about 186 at the paddle), byte 54 ball y,
byte 51 player paddle y (top edge; smaller is higher). The ball's horizontal
direction only reverses at a paddle, so a reversal from rightward to leftward
on the player's half of the court (pauses at the paddle are skipped), with no
point scored in that step, is a return by the player.

Score: capped count of returns against the calibrated target. Pass: at least
``pass_returns`` returns. No life loss exists; the episode always runs to the
horizon.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import EventCounter

BALL_X, BALL_Y, PADDLE_Y = 49, 54, 51
PLAYER_HALF_X = 140  # reversals right of this x happen at the player's paddle


class Adapter(ALEAdapter):
    def ball(self) -> tuple[int, int]:
        r = self.ram()
        return int(r[BALL_X]), int(r[BALL_Y])

    def start(self) -> None:
        self.returns = EventCounter(self.task.target("returns"))
        self.points_won = 0
        self.points_lost = 0
        self._x = self.ball()[0]
        self._dir = 0  # sign of the last nonzero horizontal move

    def on_tick(self, tick: Tick) -> None:
        x, _ = self.ball()
        dx = x - self._x
        if tick.reward > 0:
            self.points_won += 1
        elif tick.reward < 0:
            self.points_lost += 1
        elif self._dir > 0 and -16 <= dx < 0 and self._x >= PLAYER_HALF_X:
            self.returns.add(1)
        if tick.reward != 0 or abs(dx) > 16:
            self._dir = 0  # a new serve: no direction to reverse yet
        elif dx != 0:
            self._dir = 1 if dx > 0 else -1
        self._x = x

    def score(self) -> float:
        return self.returns.score()

    def passed(self) -> bool:
        return self.returns.count >= int(self.task.params["pass_returns"])

    def ending(self, native_terminated: bool) -> str | None:
        if not self.tracking:  # initial skip or human-init replay
            return super().ending(native_terminated)
        if native_terminated:
            return "Victory" if self.passed() else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "returns": self.returns.count,
            "points_won": self.points_won,
            "points_lost": self.points_lost,
        }
