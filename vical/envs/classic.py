"""Gymnasium Classic Control: CartPole-v1, Acrobot-v1, MountainCar-v0."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv

from vical.envs import fpmath, portable
from vical.envs.core import Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import capped_ratio, horizon_ratio
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


# the names of each simulator's state vector, in its order
STATE_NAMES: dict[str, tuple[str, ...]] = {
    "cartpole": ("cart position", "cart velocity", "pole angle", "pole angular velocity"),
    "mountaincar": ("car position", "car velocity"),
    "acrobot": ("joint 1 angle", "joint 2 angle", "joint 1 velocity", "joint 2 velocity"),
}


class ClassicAdapter(GymAdapter):
    """What the three share: their physical state vector, named."""

    def doctor_state(self) -> dict[str, list[float]]:
        """The simulator's own state vector, for ``vical doctor``."""
        return {"state": [float(v) for v in cast(Any, self.env.unwrapped).state]}

    def state_facts(self) -> Facts:
        """The state vector by name (:data:`STATE_NAMES`, to 3 decimals), then the
        default facts (:meth:`vical.envs.core.Adapter.state_facts`)."""
        facts: Facts = {}
        names = STATE_NAMES.get(self.task.env.env, ())
        state = np.asarray(cast(Any, self.env).state).ravel()
        for name, value in zip(names, state, strict=False):
            facts[name] = fact_value(value)
        return {**facts, **super().state_facts()}


class CartPoleAdapter(ClassicAdapter):
    """Survival: score = share of the decision horizon survived; pass = the whole horizon."""

    def start(self) -> None:
        self.decisions = 0
        self.fallen = False
        self.ticks = 0

    def on_tick(self, tick: Tick) -> None:
        self.ticks += 1
        self.fallen = self.fallen or tick.terminated
        if not self.fallen and self.ticks % self.task.env.frame_skip == 0:
            self.decisions += 1

    def score(self) -> float:
        return horizon_ratio(self.decisions, self.task.max_steps)

    def passed(self) -> bool:
        return not self.fallen and self.decisions >= self.task.max_steps

    def ending(self, native_terminated: bool) -> str | None:
        return "Terminated" if native_terminated else None

    def progress(self) -> dict[str, Any]:
        return {"decisions_survived": self.decisions, "fallen": self.fallen}


class AcrobotAdapter(ClassicAdapter):
    """Dense score from the rise of the highest endpoint height since the start.

    Endpoint height above the pivot is ``-cos(t1) - cos(t1 + t2)`` (link
    lengths 1), in [-2, 2]. Score = capped ratio of (best height - start
    height) to (goal height - start height); the native goal line is at 1.
    Pass: the endpoint rises above the pivot (height > 0).
    """

    def height(self) -> float:
        env = cast(AcrobotEnv, self.env.unwrapped)
        assert env.state is not None  # set by reset
        t1, t2 = env.state[0], env.state[1]
        return float(-fpmath.cos_(float(t1)) - fpmath.cos_(float(t1 + t2)))

    def start(self) -> None:
        self.h0 = self.height()
        self.best = self.h0

    def on_tick(self, tick: Tick) -> None:
        self.best = max(self.best, self.height())

    def score(self) -> float:
        goal = self.task.target("goal_height")
        if goal <= self.h0:
            return 100.0
        return capped_ratio(self.best - self.h0, goal - self.h0)

    def passed(self) -> bool:
        return self.best > float(self.task.params.get("pass_height", 0.0))

    def progress(self) -> dict[str, Any]:
        return {"start_height": round(self.h0, 6), "best_height": round(self.best, 6)}


class MountainCarAdapter(ClassicAdapter):
    """Dense normalized position progress toward the flag.

    Score = capped ratio of (rightmost position - start position) to (goal
    position - start position). Pass: the car has covered half the remaining
    distance to the goal from where it started.
    """

    def position(self) -> float:
        return float(cast(MountainCarEnv, self.env.unwrapped).state[0])

    def start(self) -> None:
        self.x0 = self.position()
        self.best = self.x0
        self.goal = float(cast(MountainCarEnv, self.env.unwrapped).goal_position)

    def on_tick(self, tick: Tick) -> None:
        self.best = max(self.best, self.position())

    def score(self) -> float:
        return capped_ratio(self.best - self.x0, self.goal - self.x0)

    def passed(self) -> bool:
        frac = float(self.task.params.get("pass_fraction", 0.5))
        return self.best >= self.x0 + frac * (self.goal - self.x0)

    def progress(self) -> dict[str, Any]:
        return {"start_position": round(self.x0, 6), "best_position": round(self.best, 6)}


def make_adapter(task: TaskSpec) -> GymAdapter:
    adapters: dict[str, type[GymAdapter]] = {
        "cartpole": CartPoleAdapter,
        "acrobot": AcrobotAdapter,
        "mountaincar": MountainCarAdapter,
    }
    return adapters[task.env.env](task)
