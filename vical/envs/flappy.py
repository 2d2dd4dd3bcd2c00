"""Flappy Bird on ``flappy-bird-gymnasium`` (``FlappyBird-v0``).

Two actions: Idle (let the bird fall) and Flap. One decision is one frame of
the game (pipes move 4 pixels a frame). The adapter and its scoring (pipes
passed) live in the game module, :mod:`vical.envs.games.flappybird` (found by
:func:`vical.envs.game_module`).

Tasks differ by seed (the heights of the pipe gaps come from the env's
``np_random``) and by the bird, pipe and background colours, which the
simulator draws from its own sprite sets. The pipes enter from the right edge
only after a few frames, so the colours are what tells the start frames of
different tasks apart.

The simulator leaks state across resets: flappy-bird-gymnasium 0.4.0's
``reset`` leaves the wing-animation cycle (``_player_idx_gen``) and the ground
scroll (``_ground["x"]``) where the previous episode left them, so a second
``reset(seed)`` of the same object draws a different start frame and steps
differently. Every reset after the simulator's first therefore
builds a fresh simulator, so each reset of one environment returns the task's
start state exactly.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "hide")

import flappy_bird_gymnasium  # noqa: F401  (registers FlappyBird-v0)
import numpy as np
import pygame

from vical.envs import portable
from vical.envs.compat import flappy as compat
from vical.envs.core import Adapter, Frame, no_adapter
from vical.spec import TaskSpec

# the simulator's float math (distances to the pipes) goes through
# vical.envs.fpmath, the same bits on every CPU
PORTABLE_MODULES = ["flappy_bird_gymnasium.envs.flappy_bird_env"]
portable.install(PORTABLE_MODULES)


def draw_frame(game: Any) -> Frame:
    """The frame ``render()`` returns, read row by row from the drawn surface of ``game``
    (the unwrapped ``FlappyBirdEnv``).

    ``FlappyBirdEnv.render`` draws the same surface and returns pygame's
    column-major array transposed, which every consumer (hash, PNG) then has
    to copy into row order; ``pygame.image.tobytes`` gives the row-major
    pixels directly. tests/test_flappy.py checks both agree on every frame of
    played episodes.
    """
    surface = compat.draw_surface(game)
    width, height = surface.get_size()
    pixels = bytearray(pygame.image.tobytes(surface, "RGB"))
    return np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 3)


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a Flappy Bird environment without a game module ``Adapter``."""
    raise no_adapter(task, "Flappy Bird")
