"""Acrobot (Gymnasium Classic Control, ``Acrobot-v1``): swing the endpoint up."""

from __future__ import annotations

from typing import Any, cast

from gymnasium.envs.classic_control.acrobot import AcrobotEnv

from vical.envs import fpmath
from vical.envs.classic import ClassicAdapter, state_vector
from vical.envs.core import Tick
from vical.envs.environment import VicalEnv
from vical.envs.scoring import capped_ratio

# the names of the simulator's state vector, in its order
STATE_NAMES = ("joint 1 angle", "joint 2 angle", "joint 1 velocity", "joint 2 velocity")


class AcrobotAdapter(ClassicAdapter):
    """Dense score from the rise of the highest endpoint height since the start.

    Endpoint height above the pivot is ``-cos(t1) - cos(t1 + t2)`` (link
    lengths 1), in [-2, 2]. Score = capped ratio of (best height - start
    height) to (goal height - start height); the native goal line is at 1.
    Pass: the endpoint rises above the pivot (height > 0).
    """

    state_names = STATE_NAMES

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


def controller(env: VicalEnv) -> str:
    """The scripted expert (:func:`vical.demos.experts.controller_for`): torque against
    the first joint's angular velocity.

    The elbow then bends against the swing, which pumps energy into it; this
    reached the goal line in about 40 decisions from the seeds we tried, where
    torque along the first joint's velocity stalls below it.
    """
    _t1, _t2, dt1, _dt2 = state_vector(env)
    return "Torque -1" if dt1 >= 0 else "Torque +1"


# the environment's adapter (vical.envs.make_adapter)
Adapter = AcrobotAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("classic-control", 3)
