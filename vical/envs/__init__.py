"""Simulator adapters, one module per family, behind :mod:`vical.envs.core`.

``make_env(task)`` imports the task's family module lazily (so a family's
simulator package is only needed when one of its tasks is used) and asks it
for an :class:`~vical.envs.core.Adapter`.
"""

from __future__ import annotations

import importlib
import os

# Simulators draw off-screen: without these SDL (pygame, used by the Toy Text,
# MiniGrid, highway and Flappy Bird renderers) probes for a display and prints
# "XDG_RUNTIME_DIR is invalid or not set" into the user's terminal.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

from vical.envs.checks import check_adapter_actions, check_simulator
from vical.envs.core import Adapter, InvalidActionError, Step, VicalEnv, frame_sha256
from vical.spec import TaskSpec, TaskSpecError, get_task

# family key (EnvSpec.family) -> module under vical.envs exposing make_adapter(task)
FAMILIES: dict[str, str] = {
    "toytext": "toytext",
    "classic": "classic",
    "ale": "ale",
    "minigrid": "minigrid",
    "breakout": "breakout",
    "procgen": "procgen",
    "highway": "highway",
    "tetris": "tetris",
    "flappy": "flappy",
}


def make_adapter(task: TaskSpec) -> Adapter:
    """The family's adapter for a task, after the checks that wait until a game is made.

    Loading a task file checks what is cheap to check (:mod:`vical.envs.checks`);
    here the slow registries (MiniGrid, Procgen, highway-env, Tetris, Flappy Bird)
    are read before the game is built, and the vocabulary is checked against the
    action space of the game built. Both raise :class:`~vical.spec.TaskSpecError`.
    """
    check_simulator(task.env)
    module = importlib.import_module(f"vical.envs.{FAMILIES[task.env.family]}")
    adapter = module.make_adapter(task)
    try:
        check_adapter_actions(task.env, adapter)
    except TaskSpecError:
        adapter.close()
        raise
    return adapter


def make_env(task: TaskSpec | str) -> VicalEnv:
    """Build the environment of a task (a TaskSpec or an id such as ``taxi/state1``)."""
    if isinstance(task, str):
        task = get_task(task)
    return VicalEnv(task, make_adapter(task))


__all__ = ["Adapter", "InvalidActionError", "Step", "VicalEnv", "frame_sha256", "make_env"]
