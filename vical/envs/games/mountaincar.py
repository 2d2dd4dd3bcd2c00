"""MountainCar (Gymnasium Classic Control, ``MountainCar-v0``): drive up to the flag."""

from __future__ import annotations

from typing import Any, cast

from gymnasium.envs.classic_control.mountain_car import MountainCarEnv

from vical.envs.classic import ClassicAdapter, state_vector
from vical.envs.core import Tick
from vical.envs.environment import VicalEnv
from vical.envs.scoring import capped_ratio

# the names of the simulator's state vector, in its order
STATE_NAMES = ("car position", "car velocity")


class MountainCarAdapter(ClassicAdapter):
    """Dense normalized position progress toward the flag.

    Score = capped ratio of (rightmost position - start position) to (goal
    position - start position). Pass: the car has covered half the remaining
    distance to the goal from where it started.
    """

    state_names = STATE_NAMES

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


def controller(env: VicalEnv) -> str:
    """The scripted expert (:func:`vical.demos.experts.controller_for`): accelerate in
    the direction of motion (pumps energy into the swing)."""
    _pos, vel = state_vector(env)
    return "Accelerate Right" if vel >= 0 else "Accelerate Left"


# the environment's adapter (vical.envs.make_adapter)
Adapter = MountainCarAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("classic-control", 2)
