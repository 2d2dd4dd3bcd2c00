"""MiniGrid demo recipe (MultiRoom, UnlockPickup): the exact-model planner's routes.

Per settings group: a full shortest route, a route joined midway, and the
family's own mistake as the failure.
"""

from __future__ import annotations

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


def minigrid_recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    """Per settings group: a full shortest route, a route joined midway, and a failure.

    The failure is the family's own mistake: MultiRoom closes a door it has
    just opened and walks into it; UnlockPickup opens the box with Toggle,
    which destroys it and ends the episode.
    """
    exclude = {t.seed for t in spec.tasks}
    unlock = spec.env == "unlockpickup"
    # UnlockPickup layouts with longer routes, so that one or two clips make a package
    min_len, max_len = (20, 34) if unlock else (12, 44)
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
            # joined midway: after the key is picked up / after the second door
            seed, route = seeds[1]
            if unlock:
                k = route.index("Pickup") + 1
            else:
                toggles = [i for i, a in enumerate(route) if a == "Toggle"]
                k = toggles[1] if len(toggles) > 1 else len(route) // 3
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
            if unlock:
                # start facing the locked door with the key (the adapter needs the door
                # still locked at the start); unlock, walk to the box, Toggle it
                d = route.index("Toggle")
                init, acts = route[:d], [*route[d:-1], "Toggle"]
                note = (
                    "scripted failure: from the locked door with the key, the planner route to "
                    "the box, then Toggle instead of Pickup opens the box and destroys it"
                )
                cid = f"{spec.env}-{tag}-seed{seed}-box-toggled"
            else:
                j = route.index("Toggle")
                s0 = max(0, j - 6)
                init, acts = route[:s0], [*route[s0 : j + 1], "Toggle", "Forward", "Forward"]
                note = (
                    "scripted failure: planner route to the first door, Toggle opens it, a "
                    "second Toggle closes it again and Forward is blocked"
                )
                cid = f"{spec.env}-{tag}-seed{seed}-door-reclosed"
            plans.append(
                ClipPlan(
                    cid, replayed(acts), note, seed, init_actions=init, horizon=len(acts), on=on
                )
            )
            pool.fails.append(cid)
    return plans, pools
