"""Flappy Bird (``FlappyBird-v0``, simulator notes in :mod:`vical.envs.flappy`).

The simulator's shaped reward (a survival bonus every frame, penalties near
obstacles) is ignored: progress is the number of pipes passed, which the
simulator counts in ``info["score"]``. The score is the capped ratio of pipes
passed to ``pipes_target`` (3); the task passes after one pipe, ends as a
Victory after three, and a crash into a pipe or the ground ends it as
Terminated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vical.envs.compat import flappy as compat
from vical.envs.core import Frame, Tick
from vical.envs.flappy import draw_frame
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import EventCounter

if TYPE_CHECKING:
    from flappy_bird_gymnasium import FlappyBirdEnv


class FlappyAdapter(GymAdapter):
    """Pipes-passed score; no survival reward."""

    env: FlappyBirdEnv

    # the upstream simulator keeps state across reset() (vical.envs.flappy); a fresh
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
        bird = compat.bird(self.env)
        return {
            "bird_y": float(bird.y),
            "bird_vel_y": float(bird.vel_y),
            "bird_rot": float(bird.rot),
        }

    def progress(self) -> dict[str, Any]:
        return {
            "pipes": int(self.pipes.count),
            "crashed": self.crashed,
            "bird_y": int(compat.bird(self.env).y),
        }

    def frame(self) -> Frame:
        """The frame ``render()`` returns (:func:`vical.envs.flappy.draw_frame`)."""
        if self._frame is None:
            self._frame = draw_frame(self.env.unwrapped)
        return self._frame

    def close(self) -> None:
        # FlappyBirdEnv.close() calls pygame.quit(), which would tear down the
        # pygame state of every other live environment in the process
        # (highway-env and classic-control viewers share the one pygame module).
        pass


# the environment's adapter (vical.envs.make_adapter)
Adapter = FlappyAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("arcade", 2)
