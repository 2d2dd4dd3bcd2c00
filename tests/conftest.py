"""Shared test setup: headless rendering and task parametrisation helpers."""

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import pytest

from vical.spec import all_tasks

ALL_TASKS = all_tasks()


def task_params(env_keys=None):
    """pytest params over every task (optionally only some environments), ids = task ids."""
    return [
        pytest.param(t, id=t.id) for t in ALL_TASKS if env_keys is None or t.env.env in env_keys
    ]
