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

Ending and pass: highway-env's own episode end is kept. Its ``duration``
config (simulated seconds; highway-env's default is 40) truncates the drive
once that much time has passed; with ``policy_frequency`` 2 and two primitive
steps per decision, one decision is one simulated second, so the drive ends
after ``duration`` decisions. The task sets it from the pass rule's
``episode_seconds`` (39: Table 28's longest highway episode is 39 decisions,
and every highway budget of Table 7, 52-120, is longer, so a surviving run ends
there, before its budget, as an early success). Pass: the car is intact when
the drive ends, at highway-env's natural end or at the decision budget if that
comes first; the episode then ends with ``Victory``. A crash ends it at once
with ``Terminated``. The score's horizon is the shorter of the two ends.

Determinism: every random draw of highway-env (ego lane, traffic placement,
driver behaviour) comes from the env's ``np_random``, seeded by ``reset``;
rendering is off-screen pygame with fixed size and scaling.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import highway_env  # noqa: F401  (registers highway-v0)
from highway_env.envs.common.graphics import EnvViewer
from highway_env.envs.highway_env import HighwayEnv

from vical.envs.core import Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import capped_ratio
from vical.spec import TaskSpec

# Settings the adapter always imposes, whatever the task file says: the agent
# sees pixels, never the kinematics observation; frames are drawn off-screen.
# highway-env's native time limit (``duration``) is set per task from the pass
# rule's ``episode_seconds`` (see :func:`highway_config`).
FIXED_CONFIG: dict[str, Any] = {
    "offscreen_rendering": True,
    "real_time_rendering": False,
    "manual_control": False,
    "show_trajectories": False,
}


def episode_seconds(task: TaskSpec) -> float:
    """highway-env's ``duration`` for the task: the pass rule's ``episode_seconds``."""
    return float(task.params["episode_seconds"])


def highway_config(task: TaskSpec) -> dict[str, Any]:
    """The highway-env config of a task: its ``env_kwargs`` (all config keys), the fixed
    ones, and the native episode end (``duration``) from the pass rule."""
    return {**task.env_kwargs, **FIXED_CONFIG, "duration": episode_seconds(task)}


class HighwayAdapter(GymAdapter):
    """highway-v0 with a normalized high-speed score and crash termination."""

    env: HighwayEnv

    def make_env(self) -> HighwayEnv:
        return cast(
            HighwayEnv,
            gym.make(
                self.task.env.sim_id, render_mode="rgb_array", config=highway_config(self.task)
            ).unwrapped,
        )

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
        self.natural_end = False
        self.start_time = float(self.env.time)
        self.start_x = float(self.ego.position[0])

    def on_tick(self, tick: Tick) -> None:
        if self.crashed:
            return
        self.ticks += 1
        if tick.terminated or self.ego.crashed:
            self.crashed = True
            return
        self.credit += self.speed_share()
        if self.env._is_truncated():  # highway-env's own time limit (``duration``)
            self.natural_end = True

    @property
    def horizon_ticks(self) -> int:
        """Primitive steps to the earlier of the decision budget and highway-env's natural end
        (counted from the start state)."""
        budget = self.task.max_steps * self.task.env.frame_skip
        cfg = self.env.config
        natural = round((episode_seconds(self.task) - self.start_time) * cfg["policy_frequency"])
        return max(1, min(budget, natural))

    def score(self) -> float:
        share = self.task.target("speed_share")
        return capped_ratio(self.credit, share * self.horizon_ticks)

    def passed(self) -> bool:
        return not self.crashed and (self.natural_end or self.ticks >= self.horizon_ticks)

    def ending(self, native_terminated: bool) -> str | None:
        if self.crashed:
            return "Terminated"
        if self.passed():
            return "Victory"
        if native_terminated:
            return "Terminated"
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
