"""Shared base for adapters over a Gymnasium environment rendered as RGB arrays."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from vical.envs.core import Adapter, Frame, Tick
from vical.spec import TaskSpec


class GymAdapter(Adapter):
    """Wraps ``gymnasium.make(sim_id, render_mode="rgb_array")``.

    The Gymnasium ``TimeLimit`` wrapper is removed: the decision budget is
    vical's own max-steps cap, and a native limit counted in primitive steps
    would cut episodes short under frame skip (MountainCar: 70 decisions x 3
    slots exceed its 200-step limit).

    A subclass whose upstream package keeps state across ``reset()`` sets
    ``rebuild_on_reset``: every reset after the simulator's first then builds a
    fresh simulator, so each reset of one environment is a first reset. The old
    simulator is dropped, not closed (a pygame-based close would quit pygame for
    every environment in the process).
    """

    rebuild_on_reset: ClassVar[bool] = False

    def __init__(self, task: TaskSpec):
        super().__init__(task)
        self.env = self.make_env()
        self._fresh = True  # the simulator has not been reset yet
        self.obs: Any = None
        self.info: dict[str, Any] = {}
        self._frame: Frame | None = None
        self.tracking = False

    def make_env(self) -> gym.Env:
        return gym.make(
            self.task.env.sim_id, render_mode="rgb_array", **self.task.env_kwargs
        ).unwrapped

    def reset(self, seed: int) -> None:
        if self.rebuild_on_reset and not self._fresh:
            self.env = self.make_env()
        self._fresh = False
        self.obs, self.info = self.env.reset(seed=seed)
        self._frame = None
        self.tracking = False

    def begin(self) -> None:
        self.start()
        self.tracking = True

    def start(self) -> None:
        """Snapshot the start state that progress is measured from."""

    def act(self, native: Any) -> Tick:
        obs, reward, terminated, _truncated, info = self.env.step(native)
        self.obs, self.info = obs, info
        self._frame = None
        tick = Tick(reward=float(reward), terminated=bool(terminated), info=info)
        if self.tracking:
            self.on_tick(tick)
        return tick

    def on_tick(self, tick: Tick) -> None:
        """Update progress after each primitive step of the agent's decisions."""

    def frame(self) -> Frame:
        if self._frame is None:
            self._frame = np.ascontiguousarray(self.env.render(), dtype=np.uint8)
        return self._frame

    def close(self) -> None:
        self.env.close()
