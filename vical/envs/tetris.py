"""Tetris on ``tetris-gymnasium`` (``tetris_gymnasium/Tetris``).

Five of the simulator's eight actions are offered: Move Left, Move Right,
Rotate (clockwise), Soft Drop (one row down) and Hard Drop. Gravity is on:
every action except Hard Drop is followed by the piece falling one row, and a
piece that cannot fall further locks in place.

The simulator's reward (one point per locked piece plus a line bonus) is
ignored. Progress is counted in cleared rows only (the ``lines_cleared`` the
simulator reports after each step): the score is the capped ratio of rows
cleared since the start state to ``rows_target`` (2), the task passes after
one cleared row and ends as a Victory after two. Topping out (a new piece
cannot spawn) ends the episode as Terminated.

Determinism: the piece order comes from the 7-bag randomizer, whose own
PCG64 generator is seeded by ``reset(seed)``; nothing else is random. The
simulator leaks state across resets: tetris-gymnasium 0.3.0's
``BagRandomizer.reset`` reseeds its generator and then shuffles the bag *in
place*, so the piece order after a second ``reset(seed)`` of the same object
depends on the bag the previous episode left (a different opening). Every
reset after the simulator's first therefore builds a fresh simulator, so each
reset of one environment returns the task's start state exactly.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import tetris_gymnasium.envs  # noqa: F401  (registers tetris_gymnasium/Tetris)

from vical.envs.core import Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import EventCounter
from vical.spec import TaskSpec

if TYPE_CHECKING:
    from tetris_gymnasium.envs.tetris import Tetris


class TetrisAdapter(GymAdapter):
    """Row-clearing score; the piece-drop reward of the simulator is never read."""

    env: Tetris

    # the upstream simulator keeps state across reset() (module docstring); a fresh
    # one for every reset but the first costs 0.2 ms
    rebuild_on_reset = True

    def frame(self) -> np.ndarray:
        # tetris-gymnasium 0.3.0 casts with ``astype(np.integer)`` while drawing,
        # which numpy 1.26 flags as deprecated on every frame; the result is exact.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return super().frame()

    def start(self) -> None:
        self.rows = EventCounter(target=self.task.target("rows_target"))
        self.topped_out = False

    def on_tick(self, tick: Tick) -> None:
        self.rows.add(int(tick.info.get("lines_cleared", 0)))
        self.topped_out = self.topped_out or tick.terminated

    def score(self) -> float:
        return self.rows.score()

    def passed(self) -> bool:
        return self.rows.count >= int(self.task.params.get("pass_rows", 1))

    def ending(self, native_terminated: bool) -> str | None:
        if self.rows.count >= self.task.target("rows_target"):
            return "Victory"
        if native_terminated:
            return "Terminated"
        return None

    def progress(self) -> dict:
        return {"rows_cleared": int(self.rows.count), "topped_out": self.topped_out}


def make_adapter(task: TaskSpec) -> TetrisAdapter:
    return TetrisAdapter(task)
