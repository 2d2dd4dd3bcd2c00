"""Every vical task as a Gymnasium environment, for research and training.

    import gymnasium as gym
    import vical.gym  # registers the ids
    env = gym.make("vical/taxi-state1-v0")

Ids are ``vical/<env>-<variant>-v0`` (Gymnasium's ``namespace/name-vN`` form:
the namespace ``vical``, the task as the name, version 0 of the task data).
Observations are the RGB frames the agent sees; actions are indices into the
task's canonical vocabulary (``env.unwrapped.action_names``); the reward is the
change in the benchmark score, so an episode's rewards sum to its final score.
The info dict carries ``score``, ``passed`` and ``frame_sha256`` (and, after a
step, ``outcome`` and ``action``).

Every ``reset`` returns the task's own start state (seed, skips and human-init
replay), the very frame the benchmark tests from; the ``seed`` argument only
seeds ``np_random``, since a task's start is fixed. Repeated resets of one
environment are exact because the adapters of simulators that leak state across
their own ``reset`` (tetris-gymnasium's bag randomizer, flappy-bird-gymnasium's
animation and ground scroll) build a fresh simulator on every reset after the
first (:mod:`vical.envs.tetris`, :mod:`vical.envs.flappy`). So the tasks are
deterministic (``spec.nondeterministic`` is False), and ``gym.make`` keeps
Gymnasium's passive environment checker on. ``spec.max_episode_steps`` is the
task's decision budget (``max_steps``), so ``gym.make`` adds its ``TimeLimit``,
which truncates at the very step where the task itself does.

Render modes: ``rgb_array`` (the default; ``render()`` returns the current
frame) and ``human``, which ``gym.make(id, render_mode="human")`` provides with
Gymnasium's own :class:`~gymnasium.wrappers.HumanRendering` over the
``rgb_array`` environment (a pygame window; set ``SDL_VIDEODRIVER=dummy`` to run
headless). ``metadata["render_fps"]`` is the simulator's frame rate divided by
the frames one decision spans.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces
from gymnasium.wrappers import HumanRendering

from vical.envs import make_env
from vical.envs.core import frame_sha256
from vical.envs.environment import VicalEnv
from vical.spec import TaskSpec, all_tasks, get_task

VERSION = 0
# decisions per second for simulators that declare no frame rate of their own
DEFAULT_FPS = 15
# task id -> frame shape: a task's frames keep one shape, learnt from its first reset
_FRAME_SHAPES: dict[str, tuple[int, ...]] = {}


def gym_id(task: TaskSpec) -> str:
    """The Gymnasium id of a task: ``vical/<env>-<variant>-v0``."""
    return f"vical/{task.env.env}-{task.variant.variant}-v{VERSION}"


class VicalGymEnv(gym.Env):
    """One task; ``render_mode`` is ``"rgb_array"`` or None (``"human"``: see :func:`create`)."""

    metadata = {  # noqa: RUF012 - Gymnasium convention
        "render_modes": ["rgb_array", "human"],
        "render_fps": DEFAULT_FPS,
    }

    def __init__(self, task_id: str, render_mode: str | None = "rgb_array"):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(
                f"render_mode={render_mode!r}: VicalGymEnv draws rgb_array frames; "
                f'gymnasium.make(id, render_mode="human") adds the HumanRendering window'
            )
        self.task = get_task(task_id)
        self.env = make_env(self.task)
        self.action_names = self.task.action_names
        self.action_space = spaces.Discrete(len(self.action_names))
        shape = _FRAME_SHAPES.get(self.task.id)
        if shape is None:
            # the one reset outside the user's: repeated resets are exact, so the
            # user's first reset still returns the task's start frame
            shape = _FRAME_SHAPES.setdefault(self.task.id, self.env.reset().shape)
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "render_fps": _decision_fps(self.env)}
        self._last_score = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
        super().reset(seed=seed)
        frame = self.env.reset()
        self._last_score = self.env.score()
        info = {
            "score": self._last_score,
            "passed": self.env.passed(),
            "frame_sha256": frame_sha256(frame),
        }
        return frame.copy(), info

    def step(self, action: int) -> tuple[npt.NDArray[np.uint8], float, bool, bool, dict[str, Any]]:
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
        return s.frame.copy(), reward, s.terminated, s.truncated, info

    def render(self) -> npt.NDArray[np.uint8] | None:
        if self.render_mode == "rgb_array":
            return self.env.frame.copy()
        return None

    def close(self) -> None:
        self.env.close()


def _decision_fps(env: VicalEnv) -> float:
    """The simulator's declared frame rate over the frames a decision spans (at least 1)."""
    native = getattr(getattr(env.adapter, "env", None), "metadata", None) or {}
    fps: float = native.get("render_fps") or DEFAULT_FPS
    return max(1, round(fps / max(1, env.frame_skip)))


def create(task_id: str, render_mode: str | None = "rgb_array") -> gym.Env:
    """The registered entry point: a :class:`VicalGymEnv`, in Gymnasium's
    :class:`~gymnasium.wrappers.HumanRendering` when ``render_mode="human"``."""
    if render_mode == "human":
        return HumanRendering(VicalGymEnv(task_id, render_mode="rgb_array"))
    return VicalGymEnv(task_id, render_mode=render_mode)


def register_all() -> list[str]:
    """Register ``vical/<env>-<variant>-v0`` for every task; returns the ids."""
    ids = []
    for t in all_tasks():
        gid = gym_id(t)
        if gid not in gym.registry:
            gym.register(
                id=gid,
                entry_point="vical.gym:create",
                kwargs={"task_id": t.id},
                nondeterministic=False,
                # the task's decision budget, for tools that read the spec (gym.make's
                # TimeLimit truncates at the same step as the task itself)
                max_episode_steps=t.max_steps,
            )
        ids.append(gid)
    return ids


register_all()
