"""Gymnasium Toy Text: CliffWalking-v1 and Taxi-v3.

Each game's adapter, state and scoring live in its game module,
:mod:`vical.envs.games.taxi` and :mod:`vical.envs.games.cliffwalking` (found by
:func:`vical.envs.game_module`); the two games share no code beyond
:class:`~vical.envs.gymbase.GymAdapter`.
"""

from __future__ import annotations

from vical.envs.core import Adapter, no_adapter
from vical.spec import TaskSpec


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a Toy Text environment without a game module ``Adapter``."""
    raise no_adapter(task, "Toy Text")
