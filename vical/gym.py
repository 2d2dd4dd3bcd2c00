"""Every vical task as a Gymnasium environment, for research and training.

    import gymnasium as gym
    import vical.gym  # registers the ids
    env = gym.make("vical/taxi-state1")

Observations are the RGB frames the agent sees; actions are indices into the
task's canonical vocabulary (``env.unwrapped.action_names``); the reward is the
change in the benchmark score, so an episode's rewards sum to its final score.
The info dict carries ``score``, ``passed``, ``outcome`` and ``frame_sha256``.
The start state is the task's own (seed, skips and human-init replay); the
``seed`` argument of ``reset`` is ignored because a task's start is fixed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from vical.envs import make_env
from vical.spec import TaskSpec, all_tasks, get_task


def gym_id(task: TaskSpec) -> str:
    return f"vical/{task.env.env}-{task.variant.variant}"


class VicalGymEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 - Gymnasium convention

    def __init__(self, task_id: str, render_mode: str | None = "rgb_array"):
        self.task = get_task(task_id)
        self.env = make_env(self.task)
        self.action_names = self.task.action_names
        self.action_space = spaces.Discrete(len(self.action_names))
        frame = self.env.reset()
        self.observation_space = spaces.Box(0, 255, shape=frame.shape, dtype=np.uint8)
        self.render_mode = render_mode
        self._last_score = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        frame = self.env.reset()
        self._last_score = self.env.score()
        return frame, {"score": self._last_score, "passed": self.env.passed()}

    def step(self, action: int):
        s = self.env.step(self.action_names[int(action)])
        reward = s.score - self._last_score
        self._last_score = s.score
        info = {
            "score": s.score,
            "passed": s.passed,
            "outcome": s.outcome,
            "frame_sha256": s.frame_sha256,
            "action": s.action,
        }
        return s.frame, reward, s.terminated, s.truncated, info

    def render(self):
        return self.env.frame

    def close(self):
        self.env.close()


def register_all() -> list[str]:
    """Register ``vical/<env>-<variant>`` for every task; returns the ids."""
    ids = []
    for t in all_tasks():
        gid = gym_id(t)
        if gid not in gym.registry:
            gym.register(
                id=gid,
                entry_point="vical.gym:VicalGymEnv",
                kwargs={"task_id": t.id},
                disable_env_checker=True,
            )
        ids.append(gid)
    return ids


register_all()
