"""Alien: eggs for points, one-shot 500-point bonuses ignored, 75 to pass, 150 to win."""

from __future__ import annotations

from vical.envs.ale import JOYSTICK, ALEAdapter
from vical.spec import EnvSpec

# Human-init walk length (decisions) per variant; longer walks reach later,
# more crowded corridor states.
WALK_LENGTHS = {"walk-a": 8, "walk-b": 14, "walk-c": 20, "walk-d": 26}
WALK_ACTIONS = list(JOYSTICK)
PROBES = ["NOOP", "Up", "Down", "Left", "Right"]


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


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded walks ending where the next moves matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
