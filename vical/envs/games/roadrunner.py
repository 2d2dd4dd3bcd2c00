"""Road Runner: outrun the coyote along the road and eat birdseed.

Table 7 rules: native frame skip 16 (set in the YAML), 1000-point bursts do not
count (they come from the coyote's own mishaps, not from the agent eating
seed), the score is the capped ratio of the remaining points to the 1100-point
target, reaching the target ends the episode as a Victory, and a life loss
ends the episode.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter
from vical.spec import EnvSpec

GENERATOR_SEED = 2026
BURST = 1000.0
# Human-init moves: the chase always heads left, with lane changes.
INIT_MOVES = ["Left", "Up+Left", "Down+Left", "Up", "Down", "NOOP"]


class Adapter(ALEAdapter):
    """Seed points only; Victory once they reach the target."""

    def reward_filter(self, reward: float) -> float:
        # A 1000-point burst may land in the same 16-frame step as seed points;
        # keep the seed part only.
        return reward % BURST if reward >= BURST else reward

    def won(self) -> bool:
        return self.total >= self.task.target("reward")


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences for Road Runner.

    Strategy: from reset (seed 41), draw seeded random chases of 4-12 moves
    made of leftward runs and lane changes; keep the first that stays alive,
    gives a start frame no sibling task has, and ends with the coyote close
    enough that idling for six decisions loses a life while some short plan
    escapes.
    """
    from vical.authoring.search import decision_point_inits

    return decision_point_inits(
        env_spec, INIT_MOVES, GENERATOR_SEED, length=(4, 12), danger_within=8, plan_depth=16
    )
