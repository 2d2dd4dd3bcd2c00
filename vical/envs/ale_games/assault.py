"""Assault: a 63-point target with a bonus for reaching it early."""

from __future__ import annotations

import math

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.spec import EnvSpec

WALK_LENGTHS = {"duel-a": 6, "duel-b": 10, "duel-c": 14, "duel-d": 18}
WALK_ACTIONS = ["NOOP", "Up", "Left", "Right", "Left", "Right", "Right+Shoot", "Left+Shoot"]
PROBES = ["NOOP", "Up", "Left", "Right", "Right+Shoot"]


class Adapter(ALEAdapter):
    """Capped ratio worth ``progress_weight``, plus a completion-time bonus.

    The bonus is ``time_bonus_weight * (1 - d / max_steps)`` where ``d`` is
    the decision during which the target was reached.
    """

    def start(self) -> None:
        self.slots = 0
        self.done_at: int | None = None

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        self.slots += 1
        if self.done_at is None and self.total >= self.task.target("reward"):
            self.done_at = math.ceil(self.slots / self.task.env.frame_skip)

    def score(self) -> float:
        p = self.task.params
        w = float(p.get("progress_weight", 80))
        bonus = float(p.get("time_bonus_weight", 20))
        s = w * min(max(self.total, 0.0) / self.task.target("reward"), 1.0)
        if self.done_at is not None:
            s += bonus * max(0.0, 1.0 - (self.done_at - 1) / self.task.max_steps)
        return s

    def passed(self) -> bool:
        return self.total >= self.task.target("pass_reward")

    def ending(self, native_terminated: bool) -> str | None:
        if self.tracking and self.passed():
            return "Victory"
        if native_terminated:
            return "Terminated"
        return None

    def progress(self) -> dict:
        return {"reward": self.total, "target_reached_at": self.done_at}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded play ending where the next moves matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
