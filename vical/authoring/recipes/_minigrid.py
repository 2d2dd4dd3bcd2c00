"""MiniGrid demo recipe: the exact-model planner's routes.

Per settings group: a full shortest route, a route joined midway, and the
game's own mistake as the failure; each game's recipe module says where the
midway clip joins and what the mistake is (:class:`MiniGridRecipe`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vical.authoring.experts import planner_route, replay_actions
from vical.authoring.plan import ClipPlan, Pool, group_tag, replayed, settings_groups, variant_task
from vical.demos.experts import ExpertResult
from vical.spec import EnvSpec, TaskSpec

PLANNER = (
    "scripted expert: shortest route found by breadth-first search over the exact grid "
    "model (vical.envs.minigrid.plan)"
)


def _planner_expert(t: TaskSpec) -> ExpertResult:
    return replay_actions(t, planner_route(t))


def _route_seeds(
    spec: EnvSpec, on: str, n: int, min_len: int, max_len: int, exclude: set[int]
) -> list[tuple[int, list[str]]]:
    """``n`` layouts (seed, shortest route) of a group's settings that no task uses,
    with routes of ``min_len`` to ``max_len`` decisions; seeds tried in a fixed order."""
    base = variant_task(spec, on)
    out = []
    for j in range(400):
        seed = 100 + 37 * j
        if seed in exclude:
            continue
        v = base.variant.model_copy(update={"seed": seed, "demos": []})
        try:
            route = planner_route(TaskSpec(env=spec, variant=v))
        except RuntimeError:
            continue
        if min_len <= len(route) <= max_len:
            out.append((seed, route))
        if len(out) == n:
            break
    return out


@dataclass(frozen=True)
class Failure:
    """A failure clip made from a planner route: the decisions replayed before the clip
    starts, the clip's own decisions, its source note and its id's suffix."""

    init: list[str]
    actions: list[str]
    note: str
    suffix: str


@dataclass(frozen=True)
class MiniGridRecipe:
    """A MiniGrid game's planner recipe; per settings group: a full shortest route, a route
    joined midway (``join(route)``: the decisions played before that clip starts), and the
    game's own mistake as the failure (``failure(route)``). ``route_lengths``: the
    shortest and longest routes of the layouts the clips are taken from."""

    route_lengths: tuple[int, int]
    join: Callable[[list[str]], int]
    failure: Callable[[list[str]], Failure]

    def __call__(self, spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
        return minigrid_recipe(spec, self)


def minigrid_recipe(spec: EnvSpec, game: MiniGridRecipe) -> tuple[list[ClipPlan], list[Pool]]:
    """Per settings group: a full shortest route, a route joined midway, and a failure."""
    exclude = {t.seed for t in spec.tasks}
    min_len, max_len = game.route_lengths
    max_len = min(spec.max_steps - 4, max_len)
    plans: list[ClipPlan] = []
    pools: list[Pool] = []
    for group in settings_groups(spec):
        on, tag = group[0], group_tag(spec, group[0])
        seeds = _route_seeds(spec, on, 3, min_len, max_len, exclude)
        pool = Pool(variants=group)
        pools.append(pool)
        if not seeds:
            continue
        seed, route = seeds[0]
        plans.append(
            ClipPlan(f"{spec.env}-{tag}-seed{seed}-route", _planner_expert, PLANNER, seed, on=on)
        )
        pool.wins.append(plans[-1].id)
        if len(seeds) > 1:
            seed, route = seeds[1]
            k = game.join(route)
            plans.append(
                ClipPlan(
                    f"{spec.env}-{tag}-seed{seed}-from-step{k}",
                    _planner_expert,
                    PLANNER + f"; the clip starts after the route's first {k} decisions",
                    seed,
                    init_actions=route[:k],
                    on=on,
                )
            )
            pool.wins.append(plans[-1].id)
        if len(seeds) > 2:
            seed, route = seeds[2]
            fail = game.failure(route)
            cid = f"{spec.env}-{tag}-seed{seed}-{fail.suffix}"
            plans.append(
                ClipPlan(
                    cid,
                    replayed(fail.actions),
                    fail.note,
                    seed,
                    init_actions=fail.init,
                    horizon=len(fail.actions),
                    on=on,
                )
            )
            pool.fails.append(cid)
    return plans, pools
