"""highway-env: ``highway-v0`` driving with discrete meta-actions.

The ego car drives on a straight multi-lane highway among IDM-controlled
traffic. The agent picks one of five meta-actions (Lane Left, Idle, Lane
Right, Faster, Slower); highway-env's own low-level controllers turn them into
steering and throttle. Each decision is one primitive step with the action
followed by one primitive step of Idle (frame skip 2, action steps 1).

Score (normalized high-speed score): at every primitive step the ego's
forward speed is mapped linearly from highway-env's ``reward_speed_range``
onto [0, 1] (the same term as the simulator's ``high_speed_reward``, clipped);
these shares add up while the car is intact. The score is the capped ratio of
that sum to ``speed_share`` times the number of primitive steps in the task's
horizon, so it only grows, reaches 100 for driving near top speed through the
whole horizon, and stops growing at a crash.

Pass: the car survives the whole horizon without crashing. The episode then
ends with ``Victory``; a crash ends it at once with ``Terminated``.

Determinism: every random draw of highway-env (ego lane, traffic placement,
driver behaviour) comes from the env's ``np_random``, seeded by ``reset``;
rendering is off-screen pygame with fixed size and scaling.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import highway_env  # noqa: F401  (registers highway-v0)
from highway_env.envs.common.graphics import EnvViewer

from vical.envs.core import Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import capped_ratio
from vical.spec import TaskSpec

# Settings the adapter always imposes, whatever the task file says: the agent
# sees pixels, never the kinematics observation; frames are drawn off-screen;
# the native time limit is disabled because the decision budget is vical's.
FIXED_CONFIG: dict[str, Any] = {
    "offscreen_rendering": True,
    "real_time_rendering": False,
    "manual_control": False,
    "show_trajectories": False,
    "duration": 10**6,
}


def highway_config(task: TaskSpec) -> dict[str, Any]:
    """The highway-env config of a task: its ``env_kwargs`` (all config keys) plus the fixed ones."""
    return {**task.env_kwargs, **FIXED_CONFIG}


class HighwayAdapter(GymAdapter):
    """highway-v0 with a normalized high-speed score and crash termination."""

    def make_env(self) -> gym.Env:
        return gym.make(
            self.task.env.sim_id, render_mode="rgb_array", config=highway_config(self.task)
        ).unwrapped

    def reset(self, seed: int) -> None:
        super().reset(seed)
        self.viewer: EnvViewer | None = None

    def frame(self) -> np.ndarray:
        """Draw the road off-screen with the adapter's own viewer.

        highway-env's viewer disables drawing whenever ``SDL_VIDEODRIVER`` is
        ``dummy`` (it then returns black frames), and ``env.render()`` turns on
        re-drawing of every intermediate simulation frame. Holding a private,
        explicitly enabled off-screen viewer avoids both.
        """
        if self._frame is None:
            if self.viewer is None:
                self.viewer = EnvViewer(self.env)
                self.viewer.enabled = True
            self.viewer.display()
            self._frame = np.ascontiguousarray(self.viewer.get_image(), dtype=np.uint8)
        return self._frame

    @property
    def ego(self):
        return self.env.vehicle

    def speed_share(self) -> float:
        """Forward speed mapped from ``reward_speed_range`` onto [0, 1]."""
        lo, hi = self.env.config["reward_speed_range"]
        forward = float(self.ego.speed * np.cos(self.ego.heading))
        return float(np.clip((forward - lo) / (hi - lo), 0.0, 1.0))

    def start(self) -> None:
        self.ticks = 0
        self.crashed = False
        self.credit = 0.0
        self.start_x = float(self.ego.position[0])

    def on_tick(self, tick: Tick) -> None:
        if self.crashed:
            return
        self.ticks += 1
        if tick.terminated or self.ego.crashed:
            self.crashed = True
            return
        self.credit += self.speed_share()

    @property
    def horizon_ticks(self) -> int:
        return self.task.max_steps * self.task.env.frame_skip

    def score(self) -> float:
        share = self.task.target("speed_share")
        return capped_ratio(self.credit, share * self.horizon_ticks)

    def passed(self) -> bool:
        return not self.crashed and self.ticks >= self.horizon_ticks

    def ending(self, native_terminated: bool) -> str | None:
        if native_terminated or self.crashed:
            return "Terminated"
        if self.passed():
            return "Victory"
        return None

    def progress(self) -> dict:
        return {
            "ticks": self.ticks,
            "crashed": self.crashed,
            "speed_credit": round(self.credit, 6),
            "speed": round(float(self.ego.speed), 6),
            "lane": int(self.ego.lane_index[2]),
            "distance": round(float(self.ego.position[0]) - self.start_x, 3),
        }


def make_adapter(task: TaskSpec) -> HighwayAdapter:
    return HighwayAdapter(task)
