"""highway-v0's adapter: the normalized high-speed score, crash termination and the pass
rule (the simulator, its fixed config and fast paths: :mod:`vical.envs.highway`).

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
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
from highway_env.envs.common.graphics import EnvViewer
from highway_env.envs.highway_env import HighwayEnv

from vical.envs import fpmath
from vical.envs.compat import highway as compat
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.highway import episode_seconds, highway_config, install_fast_paths
from vical.envs.scoring import capped_ratio


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
        install_fast_paths(self.env)
        self.viewer: EnvViewer | None = None

    def frame(self) -> Frame:
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
    def ego(self) -> Any:
        """The ego vehicle (highway-env's ``ControlledVehicle``)."""
        return self.env.vehicle

    def doctor_state(self) -> dict[str, list[float]]:
        """Every car's x, y, heading and speed (ego first), for ``vical doctor``."""
        out: dict[str, list[float]] = {}
        for i, v in enumerate(self.env.road.vehicles):
            name = "ego" if v is self.ego else f"car{i}"
            out[name] = [
                float(v.position[0]),
                float(v.position[1]),
                float(v.heading),
                float(v.speed),
            ]
        return out

    def speed_share(self) -> float:
        """Forward speed mapped from ``reward_speed_range`` onto [0, 1]."""
        lo, hi = self.env.config["reward_speed_range"]
        forward = float(self.ego.speed * fpmath.cos(self.ego.heading))
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
        if compat.is_truncated(self.env):  # highway-env's own time limit (``duration``)
            self.natural_end = True

    @property
    def horizon_ticks(self) -> int:
        """Primitive steps to the earlier of the decision budget and highway-env's natural end
        (counted from the start state)."""
        budget = self.task.max_steps * self.task.env.frame_skip
        cfg = self.env.config
        natural: int = round(
            (episode_seconds(self.task) - self.start_time) * cfg["policy_frequency"]
        )
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

    def progress(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "crashed": self.crashed,
            "speed_credit": round(self.credit, 6),
            "speed": round(float(self.ego.speed), 6),
            "lane": int(self.ego.lane_index[2]),
            "distance": round(float(self.ego.position[0]) - self.start_x, 3),
        }


# the environment's adapter (vical.envs.make_adapter)
Adapter = HighwayAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("driving", 1)
