"""The random reference: uniform over the task's legal actions, explicitly seeded."""

from __future__ import annotations

import random
from typing import Any

from vical.agent.base import Agent, Decision, EpisodeContext, Observation, register_agent


@register_agent("random")
class RandomAgent(Agent):
    """Uniform random actions. The episode seed comes from the runner, so a
    run is reproducible from its manifest."""

    uses_demos = False

    def __init__(self, seed: int = 0):
        self.base_seed = seed
        self.rng = random.Random(seed)
        self.actions: list[str] = []

    def start(self, ctx: EpisodeContext) -> None:
        self.rng = random.Random(ctx.seed)
        self.actions = list(ctx.action_names)

    def act(self, obs: Observation) -> Decision:
        a = self.rng.choice(self.actions)
        return Decision(action=a, records=[{"type": "decision", "step": obs.step, "action": a}])

    def settings(self) -> dict[str, Any]:
        return {"seed": self.base_seed}
