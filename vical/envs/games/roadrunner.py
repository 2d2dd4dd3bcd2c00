"""Road Runner: outrun the coyote along the road and eat birdseed.

Table 7 rules: native frame skip 16 (set in the YAML), 1000-point bursts do not
count (they come from the coyote's own mishaps, not from the agent eating
seed), the score is the capped ratio of the remaining points to the 1100-point
target, reaching the target ends the episode as a Victory, and a life loss
ends the episode.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter

BURST = 1000.0


class Adapter(ALEAdapter):
    """Seed points only; Victory once they reach the target."""

    def reward_filter(self, reward: float) -> float:
        # A 1000-point burst may land in the same 16-frame step as seed points;
        # keep the seed part only.
        return reward % BURST if reward >= BURST else reward

    def won(self) -> bool:
        return self.total >= self.task.target("reward")


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-dodging", 3)
