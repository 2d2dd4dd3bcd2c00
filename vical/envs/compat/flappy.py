"""flappy-bird-gymnasium's private names (``FlappyBirdEnv``, locked at 0.4.0).

The simulator keeps the bird and the pipes only in underscore attributes set by
``reset`` and draws its frame with a private method. If a release renames them,
``vical doctor``'s Flappy Bird state, the frames of every Flappy Bird task (the
drawing), the scripted pilot of the demo recipe and the tests' pilot break.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from vical.envs.compat import Private

if TYPE_CHECKING:
    import pygame
    from flappy_bird_gymnasium import FlappyBirdEnv

DISTRIBUTION = "flappy-bird-gymnasium"
LOCKED_VERSION = "0.4.0"
_OWNER = "flappy_bird_gymnasium.envs.flappy_bird_env:FlappyBirdEnv"
RELIED_ON = (
    Private(_OWNER, "_player_x", "instance", "the pilot's distance to the next pipe"),
    Private(_OWNER, "_player_y", "instance", "the doctor state, progress and the pilot"),
    Private(_OWNER, "_player_vel_y", "instance", "the doctor state and the pilot"),
    Private(_OWNER, "_player_rot", "instance", "the doctor state"),
    Private(_OWNER, "_upper_pipes", "instance", "the pilot's next pipe"),
    Private(_OWNER, "_lower_pipes", "instance", "the pilot's next pipe"),
    Private(_OWNER, "_surface", "instance", "every Flappy Bird frame"),
    Private(_OWNER, "_draw_surface", "class", "every Flappy Bird frame"),
)


class Bird(NamedTuple):
    """The bird: left and top edge in pixels from the screen's top left, vertical speed
    in pixels per frame (down positive) and tilt in degrees."""

    x: float
    y: float
    vel_y: float
    rot: float


def bird(env: FlappyBirdEnv) -> Bird:
    """The bird now (``_player_x``, ``_player_y``, ``_player_vel_y``, ``_player_rot``)."""
    return Bird(env._player_x, env._player_y, env._player_vel_y, env._player_rot)


def pipes(env: FlappyBirdEnv) -> list[tuple[dict[str, float], dict[str, float]]]:
    """The pipe pairs on screen, (upper, lower), each a dict with ``x`` and ``y``
    (``_upper_pipes`` and ``_lower_pipes``)."""
    return list(zip(env._upper_pipes, env._lower_pipes, strict=True))


def draw_surface(env: FlappyBirdEnv) -> pygame.Surface:
    """Draw the frame ``render()`` shows (no score, no lidar rays) and return the surface
    it was drawn on (``_draw_surface`` then ``_surface``)."""
    env._draw_surface(show_score=False, show_rays=False)
    surface: pygame.Surface = env._surface
    return surface


def sample() -> Any:
    """A freshly made and reset simulator, for the check of instance attributes."""
    import os

    import gymnasium as gym

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # headless pygame
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    import flappy_bird_gymnasium  # noqa: F401  (registers FlappyBird-v0)

    env = gym.make("FlappyBird-v0", render_mode="rgb_array").unwrapped
    env.reset(seed=0)
    return env
