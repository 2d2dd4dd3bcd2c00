"""Flappy Bird on ``flappy-bird-gymnasium`` (``FlappyBird-v0``).

Two actions: Idle (let the bird fall) and Flap. One decision is one frame of
the game (pipes move 4 pixels a frame). The simulator's shaped reward (a
survival bonus every frame, penalties near obstacles) is ignored: progress is
the number of pipes passed, which the simulator counts in ``info["score"]``.
The score is the capped ratio of pipes passed to ``pipes_target`` (3); the
task passes after one pipe, ends as a Victory after three, and a crash into
a pipe or the ground ends it as Terminated.

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
from typing import TYPE_CHECKING, Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "hide")

import flappy_bird_gymnasium  # noqa: F401  (registers FlappyBird-v0)
import numpy as np
import pygame

from vical.envs import portable
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import EventCounter
from vical.spec import TaskSpec

# the simulator's float math (distances to the pipes) goes through
# vical.envs.fpmath, the same bits on every CPU
PORTABLE_MODULES = ["flappy_bird_gymnasium.envs.flappy_bird_env"]
portable.install(PORTABLE_MODULES)

if TYPE_CHECKING:
    from flappy_bird_gymnasium import FlappyBirdEnv


class FlappyAdapter(GymAdapter):
    """Pipes-passed score; no survival reward."""

    env: FlappyBirdEnv

    # the upstream simulator keeps state across reset() (module docstring); a fresh
    # one for every reset but the first costs 7 ms
    rebuild_on_reset = True

    def start(self) -> None:
        self.pipes = EventCounter(target=self.task.target("pipes_target"))
        self.seen = int(self.info.get("score", 0))
        self.crashed = False

    def on_tick(self, tick: Tick) -> None:
        total = int(tick.info.get("score", self.seen))
        self.pipes.add(total - self.seen)
        self.seen = max(self.seen, total)
        self.crashed = self.crashed or tick.terminated

    def score(self) -> float:
        return self.pipes.score()

    def passed(self) -> bool:
        return self.pipes.count >= int(self.task.params.get("pass_pipes", 1))

    def ending(self, native_terminated: bool) -> str | None:
        if native_terminated:
            return "Terminated"
        if self.pipes.count >= self.task.target("pipes_target"):
            return "Victory"
        return None

    def doctor_state(self) -> dict[str, float]:
        """The bird's height, vertical speed and tilt, for ``vical doctor``."""
        env = self.env
        return {
            "bird_y": float(env._player_y),
            "bird_vel_y": float(env._player_vel_y),
            "bird_rot": float(env._player_rot),
        }

    def progress(self) -> dict[str, Any]:
        env = self.env
        return {
            "pipes": int(self.pipes.count),
            "crashed": self.crashed,
            "bird_y": int(env._player_y),
        }

    def frame(self) -> Frame:
        """The frame ``render()`` returns, read row by row from the drawn surface.

        ``FlappyBirdEnv.render`` draws the same surface and returns pygame's
        column-major array transposed, which every consumer (hash, PNG) then has
        to copy into row order; ``pygame.image.tobytes`` gives the row-major
        pixels directly. tests/test_flappy.py checks both agree on every frame of
        played episodes.
        """
        if self._frame is None:
            game = self.env.unwrapped
            game._draw_surface(show_score=False, show_rays=False)
            surface = game._surface
            width, height = surface.get_size()
            pixels = bytearray(pygame.image.tobytes(surface, "RGB"))
            self._frame = np.frombuffer(pixels, dtype=np.uint8).reshape(height, width, 3)
        return self._frame

    def close(self) -> None:
        # FlappyBirdEnv.close() calls pygame.quit(), which would tear down the
        # pygame state of every other live environment in the process
        # (highway-env and classic-control viewers share the one pygame module).
        pass


def make_adapter(task: TaskSpec) -> FlappyAdapter:
    return FlappyAdapter(task)
