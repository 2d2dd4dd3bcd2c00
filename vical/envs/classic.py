"""Gymnasium Classic Control: CartPole-v1, Acrobot-v1, MountainCar-v0.

What the three share lives here: their simulators' portable float math and
:class:`ClassicAdapter`. Each game's adapter (its scoring and the names of its
state vector) lives in its game module, :mod:`vical.envs.games.cartpole`,
:mod:`vical.envs.games.acrobot` and :mod:`vical.envs.games.mountaincar`
(found by :func:`vical.envs.game_module`).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import numpy as np

from vical.envs import portable
from vical.envs.core import Adapter, no_adapter
from vical.envs.environment import VicalEnv
from vical.envs.gymbase import GymAdapter
from vical.envs.states import Facts, fact_value
from vical.spec import TaskSpec

# gymnasium's three classic-control simulators: their float math goes through
# vical.envs.fpmath, the same bits on every CPU.
PORTABLE_MODULES = [
    "gymnasium.envs.classic_control.cartpole",
    "gymnasium.envs.classic_control.acrobot",
    "gymnasium.envs.classic_control.mountain_car",
]
portable.install(PORTABLE_MODULES)


class ClassicAdapter(GymAdapter):
    """What the three share: their physical state vector, named."""

    # the names of the simulator's state vector, in its order (set by each game)
    state_names: ClassVar[tuple[str, ...]] = ()

    def doctor_state(self) -> dict[str, list[float]]:
        """The simulator's own state vector, for ``vical doctor``."""
        return {"state": [float(v) for v in cast(Any, self.env.unwrapped).state]}

    def state_facts(self) -> Facts:
        """The state vector by name (:attr:`state_names`, to 3 decimals), then the
        default facts (:meth:`vical.envs.core.Adapter.state_facts`)."""
        facts: Facts = {}
        state = np.asarray(cast(Any, self.env).state).ravel()
        for name, value in zip(self.state_names, state, strict=False):
            facts[name] = fact_value(value)
        return {**facts, **super().state_facts()}


def state_vector(env: VicalEnv) -> Any:
    """The simulator's state array of a running classic-control environment (what the
    games' scripted controllers read)."""
    return cast(Any, env.adapter).env.unwrapped.state


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a Classic Control environment without a game module ``Adapter``."""
    raise no_adapter(task, "Classic Control")
