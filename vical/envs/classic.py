"""Gymnasium Classic Control: CartPole-v1, Acrobot-v1, MountainCar-v0."""

from __future__ import annotations

from typing import Any, cast

from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv

from vical.envs import fpmath, portable
from vical.envs.core import Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import capped_ratio, horizon_ratio
from vical.spec import TaskSpec

# gymnasium's three classic-control simulators: their float math goes through
# vical.envs.fpmath, the same bits on every CPU.
PORTABLE_MODULES = [
    "gymnasium.envs.classic_control.cartpole",
    "gymnasium.envs.classic_control.acrobot",
    "gymnasium.envs.classic_control.mountain_car",
]
portable.install(PORTABLE_MODULES)


class ClassicStateMixin:
    """``doctor_state``: the simulator's own state vector, for ``vical doctor``."""

    env: Any

    def doctor_state(self) -> dict[str, list[float]]:
        return {"state": [float(v) for v in self.env.unwrapped.state]}


class CartPoleAdapter(ClassicStateMixin, GymAdapter):
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

    def progress(self) -> dict:
        return {"decisions_survived": self.decisions, "fallen": self.fallen}


class AcrobotAdapter(ClassicStateMixin, GymAdapter):
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

    def progress(self) -> dict:
        return {"start_height": round(self.h0, 6), "best_height": round(self.best, 6)}


class MountainCarAdapter(ClassicStateMixin, GymAdapter):
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

    def progress(self) -> dict:
        return {"start_position": round(self.x0, 6), "best_position": round(self.best, 6)}


def make_adapter(task: TaskSpec) -> GymAdapter:
    adapters: dict[str, type[GymAdapter]] = {
        "cartpole": CartPoleAdapter,
        "acrobot": AcrobotAdapter,
        "mountaincar": MountainCarAdapter,
    }
    return adapters[task.env.env](task)
