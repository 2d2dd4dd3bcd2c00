"""Asterix: collected points minus a calibrated death penalty; a pass needs the life kept.

Table 7 (ALE/Asterix-v5): "life-loss termination, and calibrated death penalty".
Touching a harp ends the episode; the score then loses the death penalty, and the
pass is lost with the life (Table 28 reports no early success for Asterix among its
55% early deaths, so a run that collects the threshold and then dies is a failure).
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.scoring import capped_ratio


class Adapter(ALEAdapter):
    """Capped ratio of (points - death penalty if the life was lost) to ``reward``; pass
    at ``pass_reward`` points with the life kept (``died`` is tracked by the base class)."""

    pass_needs_life = True

    def net(self) -> float:
        return self.total - (self.task.target("death_penalty") if self.died else 0.0)

    def score(self) -> float:
        return capped_ratio(self.net(), self.task.target("reward"))

    def progress(self) -> dict[str, Any]:
        return {"reward": self.total, "died": self.died}


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-dodging", 2)
