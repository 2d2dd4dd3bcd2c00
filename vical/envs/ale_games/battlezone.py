"""BattleZone: first-hit timing combined with survival (paper Appendix 2.2)."""

from __future__ import annotations

from vical.envs.ale import FirstEventAdapter
from vical.envs.core import Tick
from vical.envs.scoring import clamp
from vical.spec import EnvSpec

# Human-init drive length (decisions) per variant: "a" short, "b" longer.
WALK_LENGTHS = {
    "m1-s36-a": 4,
    "m1-s45-a": 3,
    "m1-s110-a": 4,
    "m1-s110-b": 9,
    "m2-s36-a": 4,
    "m2-s45-a": 3,
    "m2-s45-b": 8,
    "m2-s110-a": 4,
    "m2-s110-b": 9,
    "m3-s36-a": 4,
    "m3-s36-b": 8,
    "m3-s45-a": 3,
    "m3-s110-a": 4,
    "m3-s110-b": 9,
}
# No Shoot in the walks: a shell still in flight at the start state would
# hand the agent a free first hit.
WALK_ACTIONS = ["Left", "Right", "Up", "Down", "Up+Left", "Up+Right", "Down+Left", "NOOP"]
PROBES = ["Shoot", "Left+Shoot", "Right+Shoot", "Up+Shoot", "Down", "NOOP"]


class Adapter(FirstEventAdapter):
    """Score from the decision of the first enemy destroyed, else from survival.

    ``hit_weight + timing_weight * (1 - (d - 1) / max_steps)`` once the first
    enemy is destroyed during decision ``d`` (``event_at``; the episode then ends
    with Victory); before that, ``survival_weight * survived / max_steps`` where
    ``survived`` counts completed decisions.
    """

    def event(self, tick: Tick) -> bool:
        return tick.reward > 0

    def score(self) -> float:
        p = self.task.params
        horizon = self.task.max_steps
        if self.event_at is not None:
            late = (self.event_at - 1) / horizon
            return clamp(p["hit_weight"] + p["timing_weight"] * (1.0 - late))
        survived = min(self.slots // self.task.env.frame_skip, horizon)
        return clamp(p["survival_weight"] * survived / horizon)

    def passed(self) -> bool:
        return self.event_at is not None

    def won(self) -> bool:
        return self.passed()

    def progress(self) -> dict:
        return {"reward": self.total, "first_hit": self.event_at, "slots": self.slots}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded drives ending where the next moves matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES, quiet_horizon=15)
