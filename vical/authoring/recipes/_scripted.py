"""Scripted demo plans with fixed per-task assignments (Taxi, CliffWalking, Classic Control).

These environments' recipes return clip plans and, per task in file order,
the clip ids it gets (no pools).
"""

from __future__ import annotations

from collections.abc import Callable

from vical.demos.experts import CONTROLLERS, ExpertResult, bfs_expert, run_policy
from vical.spec import TaskSpec

CTL = "scripted controller vical.demos.experts.{}_policy"


def controller(env_key: str) -> Callable[[TaskSpec], ExpertResult]:
    ctl = CONTROLLERS[env_key]
    return lambda t: run_policy(t, ctl)


def held_sequence(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    it = list(actions)
    return lambda t: run_policy(t, _Seq(it))


class _Seq:
    def __init__(self, actions: list[str]):
        self.actions, self.i = actions, 0

    def __call__(self, env) -> str:
        a = self.actions[min(self.i, len(self.actions) - 1)]
        self.i += 1
        return a


def taxi_wrong_dropoff(t: TaskSpec) -> ExpertResult | None:
    """Drive to the passenger and pick up by BFS, then try Dropoff away from the destination."""
    res = bfs_expert(t)
    if res is None:
        return None
    k = res.actions.index("Pickup")
    acts = [*res.actions[: k + 1], "Dropoff", "Dropoff"]
    short = t.variant.model_copy(update={"max_steps": len(acts)})
    return run_policy(TaskSpec(env=t.env, variant=short), _Seq(acts))


BFS = "scripted expert: breadth-first search over decisions on the simulator (states keyed by frame hash), shortest path to the pass condition"
