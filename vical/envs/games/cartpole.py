"""CartPole (Gymnasium Classic Control, ``CartPole-v1``): keep the pole up."""

from __future__ import annotations

from typing import Any

from vical.envs.classic import ClassicAdapter, state_vector
from vical.envs.core import Tick
from vical.envs.environment import VicalEnv
from vical.envs.scoring import horizon_ratio

# the names of the simulator's state vector, in its order
STATE_NAMES = ("cart position", "cart velocity", "pole angle", "pole angular velocity")


class CartPoleAdapter(ClassicAdapter):
    """Survival: score = share of the decision horizon survived; pass = the whole horizon."""

    state_names = STATE_NAMES

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


def controller(env: VicalEnv) -> str:
    """The scripted expert (:func:`vical.demos.experts.controller_for`): push toward the
    side the pole leans to (angle plus a share of its angular velocity)."""
    _x, _v, theta, omega = state_vector(env)
    return "Push Right" if theta + 0.5 * omega > 0 else "Push Left"


# the environment's adapter (vical.envs.make_adapter)
Adapter = CartPoleAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("classic-control", 1)
