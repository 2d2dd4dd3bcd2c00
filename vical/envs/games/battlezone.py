"""BattleZone: first-hit timing combined with survival (paper Appendix 2.2).

The paper's words: "BattleZone combines first-hit timing with survival" (Appendix
2.2, score families) and "ALE modes 1–3, preloaded state sequences, and life-loss
termination" (Table 7). Table 28 reports no early success for BattleZone (median
length 50, the budget; 36.7% early deaths), so the first enemy destroyed does not end
the episode: play goes on to the decision budget or the first life lost. The score
adds a first-hit part, larger the earlier the hit, to a survival part; the pass needs
both a hit and the life kept to the end of the episode.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import FirstEventAdapter
from vical.envs.core import Tick
from vical.envs.scoring import clamp


class Adapter(FirstEventAdapter):
    """Score from the decision of the first enemy destroyed plus the share survived.

    Once the first enemy is destroyed during decision ``d`` (``event_at``) the score
    holds ``hit_weight + timing_weight * (1 - (d - 1) / max_steps)``; to it is added
    ``survival_weight * survived / max_steps``, where ``survived`` counts the
    decisions completed with the life kept (all of them for a player alive at the
    budget). Pass: an enemy destroyed and the life kept when the episode ends; the
    hit does not end the episode, a life lost does (Terminated, no pass).
    """

    pass_needs_life = True

    def event(self, tick: Tick) -> bool:
        return tick.reward > 0

    def survived(self) -> int:
        """Decisions completed with the life kept (the slot that cost it is not one)."""
        slots = self.slots - 1 if self.died else self.slots
        return min(max(slots, 0) // self.task.env.frame_skip, self.task.max_steps)

    def score(self) -> float:
        p = self.task.params
        horizon = self.task.max_steps
        total = p["survival_weight"] * self.survived() / horizon
        if self.event_at is not None:
            late = (self.event_at - 1) / horizon
            total += p["hit_weight"] + p["timing_weight"] * (1.0 - late)
        return clamp(total)

    def passed(self) -> bool:
        return self.event_at is not None and not self.died

    def non_pass_ceiling(self) -> float:
        # A player who keeps the life but fails has destroyed nothing: at most the
        # survival part of the whole horizon.
        return float(self.task.params["survival_weight"])

    def progress(self) -> dict[str, Any]:
        return {
            "reward": self.total,
            "first_hit": self.event_at,
            "slots": self.slots,
            "died": self.died,
        }
