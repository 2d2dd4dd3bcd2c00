"""Tetris on ``tetris-gymnasium`` (``tetris_gymnasium/Tetris``).

Five of the simulator's eight actions are offered: Move Left, Move Right,
Rotate (clockwise), Soft Drop (one row down) and Hard Drop. Gravity is on:
every action except Hard Drop is followed by the piece falling one row, and a
piece that cannot fall further locks in place.

The scoring and the adapter live in the game module, :mod:`vical.envs.games.tetris`
(found by :func:`vical.envs.game_module`); this module registers the simulator.

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

import tetris_gymnasium.envs  # noqa: F401  (registers tetris_gymnasium/Tetris)

from vical.envs.core import Adapter, no_adapter
from vical.spec import TaskSpec


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a Tetris environment without a game module ``Adapter``."""
    raise no_adapter(task, "Tetris")
