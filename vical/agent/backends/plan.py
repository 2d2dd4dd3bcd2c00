"""The expert reference: actions planned offline, replayed from a plan file.

The plans come from a file (:mod:`vical.agent.plans`) made by search tools and
scripted experts that run offline; this backend imports none of them. At each
decision it plays the plan's action for that step (``Observation.step`` counts
the actions played so far, from 0) and, once the plan has run out, the fill
action (:func:`vical.agent.plans.fill_action`: the task's NOOP, else its first
action).

A task without a plan is played with the fill action at every decision, and
every decision record says so (``"source": "no plan"``), so such an episode is
never mistaken for the expert's; ``vical baseline expert`` refuses up front to
run tasks without plans.
"""

from __future__ import annotations

from typing import Any

from vical.agent.base import Agent, Decision, EpisodeContext, Observation, register_agent
from vical.agent.plans import fill_action, load_plans


@register_agent("plan")
class PlanAgent(Agent):
    """Replays the plan file's actions for each task; deterministic (the seed is
    recorded, not used)."""

    uses_demos = False

    def __init__(self, plans: str, seed: int = 0):
        self.plans = load_plans(plans)
        self.base_seed = seed
        self.actions: tuple[str, ...] = ()
        self.expert: str | None = None
        self.fill = ""

    def start(self, ctx: EpisodeContext) -> None:
        plan = self.plans.tasks.get(ctx.task.id)
        self.actions = plan.actions if plan else ()
        self.expert = plan.expert if plan else None
        self.fill = fill_action(ctx.task)

    def act(self, obs: Observation) -> Decision:
        if self.expert is None:
            a, source = self.fill, "no plan"
        elif 0 <= obs.step < len(self.actions):
            a, source = self.actions[obs.step], "plan"
        else:
            a, source = self.fill, "fill"
        rec: dict[str, Any] = {"type": "decision", "step": obs.step, "action": a, "source": source}
        if obs.step == 0:
            rec["expert"] = self.expert
        return Decision(action=a, records=[rec])

    def settings(self) -> dict[str, Any]:
        return {"plans": self.plans.name, "plans_sha256": self.plans.sha256, "seed": self.base_seed}
