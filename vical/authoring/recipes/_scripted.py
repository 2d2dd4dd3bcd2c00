"""Scripted demo plans with fixed per-task assignments (Taxi, CliffWalking, Classic Control).

These environments' recipes return clip plans and, per task in file order,
the clip ids it gets (no pools). The Classic Control games share one shape,
:class:`ControlRecipe`: the game's scripted controller from two seeds and one
action held from a third.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vical.authoring.experts import run_policy
from vical.authoring.plan import ClipPlan
from vical.demos.experts import ExpertResult, bfs_expert, controller_for
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec, TaskSpec

# stored in the task files as the clips' ``source``: keeps the name the clips were made
# under (the controllers are now each game module's ``controller``; changing the text
# would change the data)
CTL = "scripted controller vical.demos.experts.{}_policy"


def controller(spec: EnvSpec) -> Callable[[TaskSpec], ExpertResult]:
    ctl = controller_for(spec)
    if ctl is None:
        raise ValueError(f"{spec.env}: its game module defines no controller(env)")
    return lambda t: run_policy(t, ctl)


def held_sequence(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    it = list(actions)
    return lambda t: run_policy(t, _Seq(it))


class _Seq:
    def __init__(self, actions: list[str]):
        self.actions, self.i = actions, 0

    def __call__(self, env: VicalEnv) -> str:
        a = self.actions[min(self.i, len(self.actions) - 1)]
        self.i += 1
        return a


@dataclass(frozen=True)
class ControlRecipe:
    """A Classic Control game's clips: its scripted controller (its game module's)
    from each of ``seeds``, clip ``<env>-s<seed>-<win>``, and ``held`` held from
    ``fail_seed`` (clip ``<env>-s<fail_seed>-<fail>``, ``fail_horizon`` decisions or the
    task's budget). ``packages``: per task in file order, the seeds of the clips it gets.
    """

    win: str
    held: str
    fail: str
    fail_note: str
    packages: tuple[tuple[int, ...], ...]
    fail_horizon: int | None = None
    seeds: tuple[int, ...] = (3, 5)
    fail_seed: int = 7

    def clip_id(self, env: str, seed: int) -> str:
        return f"{env}-s{seed}-{self.fail if seed == self.fail_seed else self.win}"

    def __call__(self, spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
        """The clip plans and, per task in file order, the clip ids it gets."""
        env = spec.env
        plans = [
            ClipPlan(self.clip_id(env, s), controller(spec), CTL.format(env), s) for s in self.seeds
        ]
        plans.append(
            ClipPlan(
                self.clip_id(env, self.fail_seed),
                held_sequence([self.held]),
                self.fail_note,
                seed=self.fail_seed,
                horizon=self.fail_horizon,
            )
        )
        return plans, [[self.clip_id(env, s) for s in seeds] for seeds in self.packages]


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
