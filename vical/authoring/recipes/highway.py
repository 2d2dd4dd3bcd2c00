"""Demo clips of highway-v0: a gap-keeping driver that survives, and a rear-end crash.

The tasks differ by lane count and traffic density (``lanes_count``,
``vehicles_density``), which change the road and the traffic a seed produces,
so a clip only replays on tasks with its own settings: every settings group
(4 or 5 lanes, density 1.5 or 1.9) gets its own pool, shared by the group's
three tasks. The clips start from seeds no task uses (the traffic, and so the
start frame, differs from every task opening):

- two drives of the gap-keeping driver without a collision: one of 30
  decisions (the pass rule over the clip's own horizon: Victory), and one of
  39, which reaches highway-env's own end of the drive (the task's
  ``episode_seconds``) and so shows the early successful end (Victory);
- a failure: Faster held without looking, until the car runs into the one
  ahead (Terminated).

Seeds are tried in a fixed order and the first whose drive survives (or, for
the failure, whose crash comes after a few decisions of closing in) is kept.
highway-env costs tens of milliseconds per decision here, so the seed
lists are short and the whole recipe runs in a few minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from vical.authoring.plan import ClipPlan, Pool, gathered, group_pools, variant_task
from vical.envs import make_env
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec, TaskSpec

if TYPE_CHECKING:
    from vical.envs.games.highway import HighwayAdapter

DRIVER = (
    "scripted expert: gap-keeping driver (keeps a time headway to the car ahead, brakes when it "
    "drops below 1-1.5 s, changes lanes only into a lane with a much longer gap and room behind; "
    "reads the simulator's road), {n} decisions without a collision"
)
CRASH = (
    "scripted failure: Faster held without regard for the traffic until the car runs into "
    "another vehicle"
)
# seeds no task uses, tried in this order (per settings group)
SEEDS = (3, 5, 9, 11, 14, 17, 21, 25, 30, 33, 36, 39)
# 39: highway-env's own end of the drive (pass rule episode_seconds), shown by the longer clip
WIN_HORIZONS = (30, 39)
# a crash clip shows some driving before the collision, and stays short
CRASH_STEPS = (6, 20)


def gap_driver(env: VicalEnv) -> str:
    """Keep a time gap to the car ahead; change lanes only into a clearly freer lane."""
    ad = cast("HighwayAdapter", env.adapter)
    road, ego = ad.env.road, ad.ego
    start, end, lane = ego.lane_index
    n_lanes = len(road.network.graph[start][end])
    v: float = ego.speed

    def gaps(i: int) -> tuple[float, float, float, float]:
        """Gap ahead, gap behind, and their cars' speeds, in lane ``i``."""
        front, rear = road.neighbour_vehicles(ego, (start, end, i))
        ahead = front.position[0] - ego.position[0] - ego.LENGTH if front else 1e9
        behind = ego.position[0] - rear.position[0] - ego.LENGTH if rear else 1e9
        return ahead, behind, (front.speed if front else 40.0), (rear.speed if rear else 0.0)

    def headway(gap: float, front_speed: float) -> float:
        """Seconds to the car ahead: at our speed, or at the closing speed if shorter."""
        return min(gap / max(v, 1.0), gap / max(v - front_speed, 0.1))

    target = ego.target_lane_index[2]
    ahead, _, v_ahead, _ = gaps(target)
    if target != lane:  # changing lanes: mind the car ahead in both lanes
        ahead2, _, v2, _ = gaps(lane)
        return "Slower" if headway(min(ahead, ahead2), min(v_ahead, v2)) < 1.2 else "Idle"
    h = headway(ahead, v_ahead)
    if h < 1.0 and v > 20.5:
        return "Slower"
    best = None
    if h < 3.0:
        for d, name in ((1, "Lane Right"), (-1, "Lane Left")):
            if not 0 <= lane + d < n_lanes:
                continue
            ahead2, behind2, v2, v_behind2 = gaps(lane + d)
            h2 = headway(ahead2, v2)
            room_behind = behind2 > 8 and behind2 > 3 * max(v_behind2 - v, 0)
            if h2 > h + 1.0 and ahead2 > 15 and room_behind and (best is None or h2 > best[0]):
                best = (h2, name)
    if best:
        return best[1]
    if h < 1.5:
        return "Slower"
    if h > 2.5 and ahead > 25:
        return "Faster"
    return "Idle"


def _drive(
    spec: EnvSpec, on: str, seed: int, n: int, policy: Callable[[VicalEnv], str]
) -> tuple[list[str], str | None]:
    """Up to ``n`` decisions of ``policy`` from a fresh seed under the group's settings."""
    base = variant_task(spec, on)
    v = base.variant.model_copy(update={"seed": seed, "max_steps": n, "demos": []})
    env = make_env(TaskSpec(env=spec, variant=v))
    try:
        env.reset()
        acts: list[str] = []
        while not env.done:
            acts.append(policy(env))
            env.step(acts[-1])
        return acts, env.outcome
    finally:
        env.close()


def _tag(spec: EnvSpec, on: str) -> str:
    kw = variant_task(spec, on).env_kwargs
    return f"l{kw['lanes_count']}-d{str(kw['vehicles_density']).replace('.', '')}"


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    # a crash ends the drive and freezes the score
    pools = group_pools(spec, fail_every=True)
    for clips in pools:
        on = clips.on
        prefix = f"highway-{_tag(spec, on)}"
        seeds = iter(SEEDS)
        for n in WIN_HORIZONS:
            for seed in seeds:
                acts, outcome = _drive(spec, on, seed, n, gap_driver)
                cid, note = f"{prefix}-seed{seed}-drive{n}", DRIVER.format(n=n)
                if outcome == "Victory" and clips.add(cid, seed, [], acts, note, horizon=n):
                    break
        lo, hi = CRASH_STEPS
        for seed in seeds:
            acts, outcome = _drive(spec, on, seed, hi, lambda env: "Faster")
            crashed = outcome == "Terminated" and len(acts) >= lo
            if crashed and clips.add(f"{prefix}-seed{seed}-rear-end", seed, [], acts, CRASH, True):
                break
    return gathered(pools)


# benchmarks/policy_audit.py: this game's expert, and its players in the order tried
AUDIT_EXPERT = "scripted gap-keeping driver"
AUDIT_POLICIES: list[tuple[str, Callable[[VicalEnv], str]]] = [("driver", gap_driver)]
