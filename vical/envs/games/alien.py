"""Alien: eggs for points, one-shot 500-point bonuses ignored, 75 to pass, 150 to win."""

from __future__ import annotations

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """Counted points exclude the one-shot bonuses (multiples of ``bonus_chunk``)."""

    def reward_filter(self, reward: float) -> float:
        chunk = float(self.task.params.get("bonus_chunk", 500))
        if reward >= chunk:
            # keep whatever egg points landed in the same step as the bonus
            return reward % chunk
        return reward

    def passed(self) -> bool:
        return self.total >= self.task.target("pass_reward")

    def won(self) -> bool:
        return self.total >= self.task.target("end_reward")
