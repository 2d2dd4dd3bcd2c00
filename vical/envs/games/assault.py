"""Assault: a 63-point target with a bonus for reaching it early."""

from __future__ import annotations

from typing import Any

from vical.envs.ale import FirstEventAdapter
from vical.envs.core import Tick


class Adapter(FirstEventAdapter):
    """Capped ratio worth ``progress_weight``, plus a completion-time bonus.

    The bonus is ``time_bonus_weight * (1 - d / max_steps)`` where ``d`` is
    the decision during which the target was reached (``event_at``).
    """

    def event(self, tick: Tick) -> bool:
        return self.total >= self.task.target("reward")

    def score(self) -> float:
        p = self.task.params
        w = float(p.get("progress_weight", 80))
        bonus = float(p.get("time_bonus_weight", 20))
        s = w * min(max(self.total, 0.0) / self.task.target("reward"), 1.0)
        if self.event_at is not None:
            s += bonus * max(0.0, 1.0 - (self.event_at - 1) / self.task.max_steps)
        return s

    def passed(self) -> bool:
        return self.total >= self.task.target("pass_reward")

    def won(self) -> bool:
        return self.passed()

    def progress(self) -> dict[str, Any]:
        return {"reward": self.total, "target_reached_at": self.event_at}


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-shooters", 1)
