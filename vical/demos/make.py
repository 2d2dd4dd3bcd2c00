"""Make the demo clips of an environment with the expert tools, and store them in its YAML.

``make_demos(env_key)`` plans a small pool of clips for the environment (each
from its own start state, never the opening of any task of the environment),
runs the expert that each clip calls for, and assigns 1-3 clips to every task
so that a task's package holds 10-80 frames, reusing clips across tasks; the
assignment is then packed into the paper's package structure by
:mod:`vical.demos.packages` (clips per task and distinct clips per environment).
``write_demos(env_key, demos)`` writes the result into the ``demos:`` lists
of ``vical/tasks/<env>.yaml`` (clips defined once with a YAML anchor, then
referenced by alias), leaving the rest of the file as it is.

Environments with a recipe in :data:`RECIPES` use scripted experts (BFS for
the grid worlds, controllers for classic control); every other environment
gets the generic plan: search expert from two shifted starts plus a loss
found by seeded random play.
"""

from __future__ import annotations

import importlib
import os
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vical.demos.experts import (
    CONTROLLERS,
    ExpertResult,
    ale_decision_sim,
    ale_expert,
    bfs_expert,
    failure_search,
    planner_route,
    play_until,
    replay_actions,
    run_policy,
    search_expert,
)
from vical.demos.render import clip_task, replay_clip, task_start_sha256
from vical.spec import TASKS_DIR, DemoClip, EnvSpec, TaskSpec, load_env_file

MIN_FRAMES, MAX_FRAMES = 10, 80


@dataclass
class ClipPlan:
    """One clip to make: a start state, an expert, a horizon and a note for ``source``."""

    id: str
    expert: Callable[[TaskSpec], ExpertResult | None]
    source: str
    seed: int | None = None
    initial_skip: int = 0
    init_actions: list[str] = field(default_factory=list)
    horizon: int | None = None
    # the task variant whose settings (env_kwargs) the clip starts from; default: the base task
    on: str | None = None

    def task(self, base: TaskSpec) -> TaskSpec:
        probe = DemoClip(
            id=self.id,
            seed=self.seed,
            initial_skip=self.initial_skip,
            init_actions=self.init_actions,
            actions=["-"],
            label="Victory",
            source=self.source,
        )
        t = clip_task(base, probe)
        horizon = self.horizon or base.max_steps
        return TaskSpec(env=t.env, variant=t.variant.model_copy(update={"max_steps": horizon}))


def _frames(clip: DemoClip) -> int:
    """Frames a clip contributes: the start, one per action, the terminal copy."""
    return len(clip.actions) + 2


def base_task(spec: EnvSpec) -> TaskSpec:
    v = next(t for t in spec.tasks if t.kind == "base")
    return TaskSpec(env=spec, variant=v)


def variant_task(spec: EnvSpec, variant: str | None) -> TaskSpec:
    if variant is None:
        return base_task(spec)
    return TaskSpec(env=spec, variant=next(t for t in spec.tasks if t.variant == variant))


def run_plan(spec: EnvSpec, plan: ClipPlan) -> DemoClip | None:
    """Run a clip's expert from its start and return the clip (None if it found nothing)."""
    base = variant_task(spec, plan.on)
    res = plan.expert(plan.task(base))
    if res is None or not res.actions:
        return None
    clip = DemoClip(
        id=plan.id,
        seed=plan.seed,
        initial_skip=plan.initial_skip,
        init_actions=list(plan.init_actions),
        actions=res.actions,
        label="Victory",
        source=plan.source,
    )
    # the label is whatever the replay of exactly these actions ends in
    replay = replay_clip(base, clip, check_label=False)
    return clip.model_copy(update={"label": replay.outcome})


def _policy(env_key: str) -> Callable[[TaskSpec], ExpertResult]:
    ctl = CONTROLLERS[env_key]
    return lambda t: run_policy(t, ctl)


def _fixed(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    it = list(actions)
    return lambda t: run_policy(t, _Seq(it))


class _Seq:
    def __init__(self, actions: list[str]):
        self.actions, self.i = actions, 0

    def __call__(self, env) -> str:
        a = self.actions[min(self.i, len(self.actions) - 1)]
        self.i += 1
        return a


def _taxi_wrong_dropoff(t: TaskSpec) -> ExpertResult | None:
    """Drive to the passenger and pick up by BFS, then try Dropoff away from the destination."""
    res = bfs_expert(t)
    if res is None:
        return None
    k = res.actions.index("Pickup")
    acts = [*res.actions[: k + 1], "Dropoff", "Dropoff"]
    short = t.variant.model_copy(update={"max_steps": len(acts)})
    return run_policy(TaskSpec(env=t.env, variant=short), _Seq(acts))


BFS = "scripted expert: breadth-first search over decisions on the simulator (states keyed by frame hash), shortest path to the pass condition"


def _recipes() -> dict[str, tuple[list[ClipPlan], list[list[str]]]]:
    """Per environment: the clip pool and, per task in file order, the clip ids it gets."""
    ctl = "scripted controller vical.demos.experts.{}_policy"
    return {
        "taxi": (
            [
                ClipPlan("taxi-s7-route", bfs_expert, BFS, seed=7),
                ClipPlan("taxi-s9-route", bfs_expert, BFS, seed=9),
                ClipPlan(
                    "taxi-s12-wrong-dropoff",
                    _taxi_wrong_dropoff,
                    "scripted: BFS route to the passenger, then Dropoff away from the destination (it does nothing)",
                    seed=12,
                ),
            ],
            [
                ["taxi-s7-route", "taxi-s12-wrong-dropoff"],
                ["taxi-s9-route"],
                ["taxi-s7-route", "taxi-s9-route"],
                ["taxi-s9-route", "taxi-s12-wrong-dropoff"],
                ["taxi-s7-route", "taxi-s9-route", "taxi-s12-wrong-dropoff"],
            ],
        ),
        "cliffwalking": (
            [
                ClipPlan("cliff-row1-route", bfs_expert, BFS, seed=43, init_actions=["Up", "Up"]),
                ClipPlan(
                    "cliff-top-route",
                    bfs_expert,
                    BFS,
                    seed=43,
                    init_actions=["Up", "Up", "Up", "Right"],
                ),
                ClipPlan(
                    "cliff-fall",
                    _fixed(["Right", "Right", "Down"]),
                    "scripted failure: walk the ledge and step down into the cliff",
                    seed=43,
                    init_actions=["Up", "Right"],
                ),
            ],
            [
                ["cliff-row1-route", "cliff-fall"],
                ["cliff-top-route", "cliff-fall"],
                ["cliff-row1-route"],
                ["cliff-top-route", "cliff-row1-route"],
                ["cliff-row1-route", "cliff-top-route", "cliff-fall"],
            ],
        ),
        "cartpole": (
            [
                ClipPlan("cartpole-s3-balance", _policy("cartpole"), ctl.format("cartpole"), 3),
                ClipPlan("cartpole-s5-balance", _policy("cartpole"), ctl.format("cartpole"), 5),
                ClipPlan(
                    "cartpole-s7-fall",
                    _fixed(["Push Right"]),
                    "scripted failure: Push Right held until the pole falls",
                    seed=7,
                ),
            ],
            [
                ["cartpole-s3-balance", "cartpole-s7-fall"],
                ["cartpole-s5-balance"],
                ["cartpole-s5-balance", "cartpole-s7-fall"],
                ["cartpole-s3-balance"],
                ["cartpole-s7-fall", "cartpole-s3-balance"],
            ],
        ),
        "acrobot": (
            [
                ClipPlan("acrobot-s3-swingup", _policy("acrobot"), ctl.format("acrobot"), 3),
                ClipPlan("acrobot-s5-swingup", _policy("acrobot"), ctl.format("acrobot"), 5),
                ClipPlan(
                    "acrobot-s7-idle",
                    _fixed(["Torque 0"]),
                    "scripted: Torque 0 held, the arm does not rise by itself",
                    seed=7,
                    horizon=12,
                ),
            ],
            [
                ["acrobot-s3-swingup"],
                ["acrobot-s5-swingup", "acrobot-s7-idle"],
                ["acrobot-s3-swingup", "acrobot-s7-idle"],
                ["acrobot-s5-swingup"],
                ["acrobot-s3-swingup"],
            ],
        ),
        "mountaincar": (
            [
                ClipPlan(
                    "mountaincar-s3-pump", _policy("mountaincar"), ctl.format("mountaincar"), 3
                ),
                ClipPlan(
                    "mountaincar-s5-pump", _policy("mountaincar"), ctl.format("mountaincar"), 5
                ),
                ClipPlan(
                    "mountaincar-s7-push-right",
                    _fixed(["Accelerate Right"]),
                    "scripted: Accelerate Right held, the engine alone cannot climb the slope",
                    seed=7,
                    horizon=16,
                ),
            ],
            [
                ["mountaincar-s3-pump", "mountaincar-s7-push-right"],
                ["mountaincar-s5-pump"],
                ["mountaincar-s3-pump"],
                ["mountaincar-s5-pump", "mountaincar-s7-push-right"],
                ["mountaincar-s7-push-right", "mountaincar-s3-pump"],
            ],
        ),
    }


# ---------------------------------------------------------------------------
# generic plan (any environment)
# ---------------------------------------------------------------------------
def _task_start_hashes(spec: EnvSpec) -> set[str]:
    return {task_start_sha256(TaskSpec(env=spec, variant=v)) for v in spec.tasks}


def _shifted_starts(spec: EnvSpec, n: int, taken: set[str]) -> list[tuple[int, int]]:
    """Up to ``n`` (seed, initial_skip) starts whose frame differs from every task opening.

    Other seeds come first (seeded games change their layout); games whose
    seed leaves the opening unchanged get more skipped frames instead.
    """
    base = base_task(spec)
    seed0, skip0 = base.variant.seed, base.variant.initial_skip
    candidates = [(seed0 + k, skip0) for k in (101, 202, 303)]
    candidates += [(seed0, skip0 + k) for k in (23, 47, 71, 95, 130)]
    out, seen = [], set(taken)
    for seed, skip in candidates:
        probe = DemoClip(
            id="probe", seed=seed, initial_skip=skip, actions=["-"], label="Victory", source="-"
        )
        try:
            h = task_start_sha256(clip_task(base, probe))
        except RuntimeError:  # the game ended during the skip
            continue
        if h not in seen:
            seen.add(h)
            out.append((seed, skip))
        if len(out) == n:
            break
    return out


def generic_plans(spec: EnvSpec) -> list[ClipPlan]:
    taken = _task_start_hashes(spec)
    starts = _shifted_starts(spec, 3, taken)
    horizon = min(spec.max_steps, 40)
    grid = spec.family in ("minigrid", "toytext")
    plans = []
    for i, (seed, skip) in enumerate(starts[:2]):
        if grid:
            plans.append(ClipPlan(f"{spec.env}-s{seed}-k{skip}-bfs", bfs_expert, BFS, seed, skip))
        else:
            plans.append(
                ClipPlan(
                    f"{spec.env}-s{seed}-k{skip}-search",
                    lambda t, i=i: search_expert(t, seed=i),
                    "search expert: receding-horizon rollouts with the simulator's save/restore, "
                    "benchmark score as objective (vical.demos.experts.search_expert)",
                    seed,
                    skip,
                    horizon=horizon,
                )
            )
    if len(starts) > 2:
        seed, skip = starts[2]
        plans.append(
            ClipPlan(
                f"{spec.env}-s{seed}-k{skip}-loss",
                lambda t: failure_search(t, target_len=12),
                "failure clip: seeded random play that loses (vical.demos.experts.failure_search)",
                seed,
                skip,
                horizon=horizon,
            )
        )
    return plans


def _assign_generic(spec: EnvSpec, clips: list[DemoClip]) -> list[list[str]]:
    wins = [c for c in clips if not c.id.endswith("-loss")]
    losses = [c for c in clips if c.id.endswith("-loss") and c.label == "Terminated"]
    out = []
    for i, _v in enumerate(spec.tasks):
        chosen: list[DemoClip] = []
        if wins:
            chosen.append(wins[i % len(wins)])
        for extra in [*losses, *wins]:
            if extra in chosen or len(chosen) >= 3:
                continue
            total = sum(_frames(c) for c in chosen)
            if total + _frames(extra) <= MAX_FRAMES and (total < 40 or extra in losses):
                chosen.append(extra)
        out.append([c.id for c in chosen])
    return out


# ---------------------------------------------------------------------------
# pooled family recipes: clip pools per group of tasks that share simulator
# settings, assigned to tasks by frame budget
# ---------------------------------------------------------------------------
@dataclass
class Pool:
    """Clips shared by the tasks of one settings group: successes and failures."""

    variants: list[str]
    wins: list[str] = field(default_factory=list)
    fails: list[str] = field(default_factory=list)
    # every package gets a failure clip (games whose score punishes dying)
    fail_every: bool = False


# Per-task frame budgets, cycled over a group's tasks (mean 45.6, within 10-80):
# a package takes clips until it reaches its budget, so packages hold 1-4 clips.
FRAME_BUDGETS = (40, 52, 30, 60, 45, 36, 56)


def _rotate(ids: list[str], k: int) -> list[str]:
    if not ids:
        return []
    k %= len(ids)
    return ids[k:] + ids[:k]


def assign_pools(spec: EnvSpec, pools: list[Pool], clips: dict[str, DemoClip]) -> list[list[str]]:
    """Clip ids per task (file order): a success first, a failure second on every other
    task, then more clips while that brings the package nearer its frame budget (at
    most 4 clips, 10-80 frames)."""
    chosen: dict[str, list[str]] = {}
    for gi, pool in enumerate(pools):
        wins = [c for c in pool.wins if c in clips]
        fails = [c for c in pool.fails if c in clips]
        for i, v in enumerate(pool.variants):
            w, f = _rotate(wins, i), _rotate(fails, i // 2)
            fail_second = pool.fail_every or i % 2
            order = [*w[:1], *f[:1], *w[1:], *f[1:]] if fail_second else [*w, *f]
            if not order:
                chosen[v] = []
                continue
            budget = FRAME_BUDGETS[(i + 3 * gi) % len(FRAME_BUDGETS)]
            ids, total = [order[0]], _frames(clips[order[0]])
            for c in order[1:]:
                n = _frames(clips[c])
                # take a clip while under budget if it lands nearer the budget than stopping
                nearer = total < budget and total + n - budget <= budget - total
                if len(ids) < 4 and (nearer or total < MIN_FRAMES) and total + n <= MAX_FRAMES:
                    ids.append(c)
                    total += n
            chosen[v] = ids
    return [chosen.get(v.variant, []) for v in spec.tasks]


def settings_groups(spec: EnvSpec) -> list[list[str]]:
    """Task variants grouped by their simulator settings (env_kwargs), in file order."""
    groups: dict[str, list[str]] = {}
    for v in spec.tasks:
        key = repr(sorted(TaskSpec(env=spec, variant=v).env_kwargs.items()))
        groups.setdefault(key, []).append(v.variant)
    return list(groups.values())


def _group_tag(spec: EnvSpec, variant: str) -> str:
    """Short id part naming a group's own settings (variant-level env_kwargs)."""
    v = next(t for t in spec.tasks if t.variant == variant)
    return "-".join(f"{k.split('_')[0]}{x}" for k, x in sorted(v.env_kwargs.items()))


def _start_hash(spec: EnvSpec, on: str, seed: int, skip: int, init: list[str]) -> str | None:
    probe = DemoClip(
        id="probe",
        seed=seed,
        initial_skip=skip,
        init_actions=init,
        actions=["-"],
        label="Victory",
        source="-",
    )
    try:
        return task_start_sha256(clip_task(variant_task(spec, on), probe))
    except RuntimeError:  # the start cannot be reached (the game ended on the way)
        return None


def _replayed(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    acts = list(actions)
    return lambda t: replay_actions(t, acts)


# -- MiniGrid: the exact-model planner --------------------------------------
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
        on, tag = group[0], _group_tag(spec, group[0])
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
                    cid, _replayed(acts), note, seed, init_actions=init, horizon=len(acts), on=on
                )
            )
            pool.fails.append(cid)
    return plans, pools


# -- ALE: the game modules' search helpers -----------------------------------
@dataclass(frozen=True)
class AleRecipe:
    """How to make one ALE game's clips.

    ``win(sim, n, seed)`` returns expert decisions from a decision sim;
    ``warm(sim, n, seed)`` deathless play that carries a start later into the
    game. ``wins``: (extra skipped frames, warm-up decisions, clip decisions)
    per success clip. The failure clip plays ``fail_policy`` from a start
    (``fail_start``: extra skip, warm-up) until ``fail_event`` fires, plus
    ``fail_after`` NOOP decisions, and keeps the last ``fail_len`` decisions.
    """

    win: Callable[[Any, int, int], list[str]]
    warm: Callable[[Any, int, int], list[str]]
    wins: tuple[tuple[int, int, int], ...]
    fail_policy: Callable[[Any, random.Random], str]
    fail_event: Callable[[Any, Any, Any], bool]
    fail_start: tuple[int, int]
    fail_len: int
    win_note: str
    fail_note: str
    fail_after: int = 0
    fail_every: bool = False


def _module(env: str):
    return importlib.import_module(f"vical.envs.ale_games.{env}")


def _chunk(env: str) -> Callable[[Any, int, int], list[str]]:
    def win(sim, n, seed):
        from vical.envs.ale_games._search import chunk_search

        return chunk_search(sim, _module(env).policy, n, seed=seed, candidates=8)

    return win


def _deathless(env: str) -> Callable[[Any, int, int], list[str]]:
    def warm(sim, n, seed):
        from vical.envs.ale_games._search import play_without_dying

        return play_without_dying(sim, _module(env).policy, n, seed=seed) if n else []

    return warm


def _freeway_win(sim, n, seed):
    return _module("freeway").expert_actions(sim, limit=n)


def _freeway_warm(sim, n, seed):
    out = []
    for _ in range(n):
        a = _module("freeway").safe_step(sim, depth=2)
        sim.step(a)
        out.append(a)
    return out


def _pong_track(sim, n, seed):
    out = []
    for _ in range(n):
        a = _module("pong").track(sim)
        sim.step(a)
        out.append(a)
    return out


def _life_lost(sim, o, before) -> bool:
    return o.life_lost or o.ended


def _hold(name: str) -> Callable[[Any, random.Random], str]:
    return lambda sim, rng: name


def _policy_of(env: str) -> Callable[[Any, random.Random], str]:
    return lambda sim, rng: _module(env).policy(sim, rng)


CHUNK = (
    "search expert: random-shooting planner over the game's seeded policy with the emulator's "
    "cloneState/restoreState, 8 candidates per 5-decision chunk, deaths avoided "
    "(vical.envs.ale_games._search.chunk_search)"
)

ALE_RECIPES: dict[str, AleRecipe] = {
    "demonattack": AleRecipe(
        win=_chunk("demonattack"),
        warm=_deathless("demonattack"),
        wins=((7, 0, 34), (7, 45, 30), (7, 100, 26)),
        fail_policy=_hold("NOOP"),
        fail_event=_life_lost,
        fail_start=(7, 20),
        fail_len=16,
        win_note=CHUNK,
        fail_note="scripted failure: NOOP held (no dodging, no shooting) until a demon's shot costs a life",
    ),
    "enduro": AleRecipe(
        win=_chunk("enduro"),
        warm=_deathless("enduro"),
        wins=((7, 0, 34), (1400, 6, 28), (7, 36, 24)),
        fail_policy=_hold("NOOP"),
        fail_event=lambda sim, o, before: o.reward < 0,
        fail_start=(7, 30),
        fail_len=14,
        fail_after=3,
        win_note=CHUNK,
        fail_note="scripted failure: NOOP held (no gas) until cars overtake the player and take passed cars back",
    ),
    "freeway": AleRecipe(
        win=_freeway_win,
        warm=_freeway_warm,
        wins=((7, 0, 60), (7, 14, 50), (19, 4, 56)),
        fail_policy=_hold("Up"),
        fail_event=lambda sim, o, before: int(sim.ram()[14]) < int(before[14]) - 8,
        fail_start=(31, 0),
        fail_len=14,
        fail_after=3,
        win_note=(
            "search expert: exhaustive three-deep look-ahead over Up / NOOP / Down with the emulator's "
            "cloneState/restoreState until the chicken crosses (vical.envs.ale_games.freeway.expert_actions)"
        ),
        fail_note="scripted failure: Up held without looking until a car knocks the chicken back to the curb",
    ),
    "frostbite": AleRecipe(
        win=_chunk("frostbite"),
        warm=_deathless("frostbite"),
        wins=((30, 0, 30), (70, 3, 30), (20, 6, 30)),
        fail_policy=_policy_of("frostbite"),
        fail_every=True,  # a lost life costs the death penalty
        fail_event=_life_lost,
        fail_start=(40, 0),
        fail_len=14,
        win_note=CHUNK,
        fail_note="failure clip: the game's seeded random hopper, without look-ahead, until a life is lost",
    ),
    "mspacman": AleRecipe(
        win=_chunk("mspacman"),
        warm=_deathless("mspacman"),
        wins=((7, 0, 34), (7, 30, 28), (7, 60, 24)),
        fail_policy=_hold("Up"),
        fail_event=_life_lost,
        fail_start=(7, 6),
        fail_len=16,
        win_note=CHUNK,
        fail_note="scripted failure: Up held without regard for the ghosts until one catches Ms. Pac-Man",
    ),
    "pong": AleRecipe(
        win=_pong_track,
        warm=_pong_track,
        wins=((7, 0, 30), (7, 20, 26)),
        fail_policy=_hold("NOOP"),
        fail_event=lambda sim, o, before: o.reward < 0,
        fail_start=(7, 8),
        fail_len=14,
        fail_after=2,
        win_note=(
            "scripted expert: RAM ball tracker that moves the paddle's middle toward the ball's "
            "height (vical.envs.ale_games.pong.track)"
        ),
        fail_note="scripted failure: NOOP held, the paddle stays put and the opponent scores",
    ),
}


def _ale_win_expert(recipe: AleRecipe, n: int, seed: int) -> Callable[[TaskSpec], ExpertResult]:
    """The recipe's expert; the first of a few seeds whose clip passes (else the best score)."""

    def expert(t: TaskSpec) -> ExpertResult:
        best = None
        for s in (seed, seed + 100, seed + 200):
            r = ale_expert(t, lambda sim, k, s=s: recipe.win(sim, k, s), n)
            if r.passed and r.outcome != "Terminated":
                return r
            if best is None or (r.outcome != "Terminated", r.score) > (
                best.outcome != "Terminated",
                best.score,
            ):
                best = r
        return best

    return expert


def recipe_module(env_key: str):
    """The environment's own recipe module ``vical.demos.recipes.<env>``, if it has one.

    Such a module defines either ``RECIPE`` (an :class:`AleRecipe`, for ALE games) or
    ``recipe(spec) -> (plans, pools)`` (any family).
    """
    name = f"vical.demos.recipes.{env_key}"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


def ale_recipe(spec: EnvSpec, recipe: AleRecipe | None = None) -> tuple[list[ClipPlan], list[Pool]]:
    """Per settings group: expert clips from shifted and warmed-up starts, plus a failure.

    ``recipe`` defaults to the environment's recipe module's ``RECIPE``, else its
    entry in :data:`ALE_RECIPES`.
    """
    if recipe is None:
        mod = recipe_module(spec.env)
        recipe = mod.RECIPE if mod is not None and hasattr(mod, "RECIPE") else ALE_RECIPES[spec.env]
    taken = _task_start_hashes(spec)
    plans: list[ClipPlan] = []
    pools: list[Pool] = []
    for gi, group in enumerate(settings_groups(spec)):
        on = group[0]
        base = variant_task(spec, on)
        seed0, skip0 = base.variant.seed, base.variant.initial_skip
        tag = _group_tag(spec, on)
        prefix = f"{spec.env}-{tag}" if tag else spec.env
        pool = Pool(variants=group, fail_every=recipe.fail_every)
        pools.append(pool)
        for j, (shift, warm_n, n) in enumerate(recipe.wins):
            start = _ale_start(spec, recipe, on, seed0, skip0 + shift, warm_n, 10 * gi + j, taken)
            if start is None:
                continue
            skip, init = start
            cid = f"{prefix}-k{skip}-w{len(init)}-expert"
            plans.append(
                ClipPlan(
                    cid,
                    _ale_win_expert(recipe, n, seed=j + 1),
                    recipe.win_note,
                    seed0,
                    skip,
                    init_actions=init,
                    horizon=n,
                    on=on,
                )
            )
            pool.wins.append(cid)
        fail = _ale_failure(spec, recipe, on, seed0, skip0, taken, 10 * gi)
        if fail is not None:
            skip, init, acts = fail
            cid = f"{prefix}-k{skip}-w{len(init)}-loss"
            plans.append(
                ClipPlan(
                    cid,
                    _replayed(acts),
                    recipe.fail_note,
                    seed0,
                    skip,
                    init_actions=init,
                    horizon=len(acts),
                    on=on,
                )
            )
            pool.fails.append(cid)
    return plans, pools


def _ale_sim(spec: EnvSpec, on: str, seed: int, skip: int):
    base = variant_task(spec, on)
    v = base.variant.model_copy(
        update={"seed": seed, "initial_skip": skip, "init_actions": [], "init_source": None}
    )
    return ale_decision_sim(TaskSpec(env=spec, variant=v))


def _ale_start(
    spec: EnvSpec,
    recipe: AleRecipe,
    on: str,
    seed: int,
    skip: int,
    warm_n: int,
    warm_seed: int,
    taken: set[str],
) -> tuple[int, list[str]] | None:
    """(initial skip, warm-up decisions) of a start whose frame no task opens on (and no
    other clip starts from); the skip grows a frame at a time on a clash."""
    for extra in range(6):
        sim = _ale_sim(spec, on, seed, skip + extra)
        try:
            init = recipe.warm(sim, warm_n, warm_seed)
        except RuntimeError:  # no deathless warm-up from here
            continue
        finally:
            sim.adapter.close()
        h = _start_hash(spec, on, seed, skip + extra, init)
        if h is not None and h not in taken:
            taken.add(h)
            return skip + extra, init
    return None


def _ale_failure(
    spec: EnvSpec,
    recipe: AleRecipe,
    on: str,
    seed: int,
    skip0: int,
    taken: set[str],
    warm_seed: int,
) -> tuple[int, list[str], list[str]] | None:
    shift, warm_n = recipe.fail_start
    for extra in range(6):
        skip = skip0 + shift + extra
        sim = _ale_sim(spec, on, seed, skip)
        try:
            warm = recipe.warm(sim, warm_n, warm_seed)
            acts = play_until(
                sim, recipe.fail_policy, recipe.fail_event, seed=warm_seed, after=recipe.fail_after
            )
        except RuntimeError:
            continue
        finally:
            sim.adapter.close()
        if acts is None:
            continue
        cut = max(0, len(acts) - recipe.fail_len)
        init, clip = warm + acts[:cut], acts[cut:]
        h = _start_hash(spec, on, seed, skip, init)
        if h is not None and h not in taken:
            taken.add(h)
            return skip, init, clip
    return None


FAMILY_RECIPES: dict[str, Callable[[EnvSpec], tuple[list[ClipPlan], list[Pool]]]] = {
    "multiroom": minigrid_recipe,
    "unlockpickup": minigrid_recipe,
    **{env: ale_recipe for env in ALE_RECIPES},
}


# ---------------------------------------------------------------------------
# the entry points
# ---------------------------------------------------------------------------
def make_demos(
    env_key: str, tasks_dir: Path = TASKS_DIR, pack: bool = True
) -> dict[str, list[DemoClip]]:
    """Run the experts for an environment and assign clips: ``{variant: [DemoClip, ...]}``.

    With ``pack`` (the default) the assignment is then packed into the paper's
    package structure by :func:`vical.demos.packages.pack_env`.

    Checks every assignment: the clip replays to its label on that task, it
    does not start at that task's opening frame, and the task's package has
    10-80 frames.
    """
    spec = load_env_file(Path(tasks_dir) / f"{env_key}.yaml")
    recipes = _recipes()
    pools = None
    plugin = recipe_module(env_key)
    if plugin is not None and hasattr(plugin, "RECIPE"):
        plans, pools = ale_recipe(spec)
        assignment = None
    elif plugin is not None:
        plans, pools = plugin.recipe(spec)
        assignment = None
    elif env_key in recipes:
        plans, assignment = recipes[env_key]
    elif env_key in FAMILY_RECIPES:
        plans, pools = FAMILY_RECIPES[env_key](spec)
        assignment = None
    else:
        plans, assignment = generic_plans(spec), None
    clips = {}
    for plan in plans:
        clip = run_plan(spec, plan)
        if clip is not None:
            clips[clip.id] = clip
    if pools is not None:
        assignment = assign_pools(spec, pools, clips)
    elif assignment is None:
        assignment = _assign_generic(spec, list(clips.values()))
        assignment = _fit_generic(spec, clips, assignment)
    if len(assignment) != len(spec.tasks):
        raise ValueError(f"{env_key}: {len(assignment)} assignments for {len(spec.tasks)} tasks")
    out: dict[str, list[DemoClip]] = {}
    for v, ids in zip(spec.tasks, assignment, strict=True):
        out[v.variant] = [clips[i] for i in ids if i in clips]
    if pack:
        # the paper's package structure: a deterministic selection over the pool
        from vical.demos.packages import pack_env

        out = pack_env(spec, out)
    for v in spec.tasks:
        check_package(TaskSpec(env=spec, variant=v), out[v.variant])
    return out


def _fits(task: TaskSpec, clip: DemoClip) -> bool:
    try:
        return replay_clip(task, clip).start_sha256 != task_start_sha256(task)
    except RuntimeError:  # replays differently under this variant's settings
        return False


def _fit_generic(
    spec: EnvSpec, clips: dict[str, DemoClip], assignment: list[list[str]]
) -> list[list[str]]:
    """Drop clips that do not replay on a task (variant settings differ); where none is
    left, make the task its own clips from its own settings (added to ``clips``)."""
    out = []
    for v, ids in zip(spec.tasks, assignment, strict=True):
        task = TaskSpec(env=spec, variant=v)
        kept = [i for i in ids if _fits(task, clips[i])]
        if not kept:
            own = spec.model_copy(
                update={
                    "tasks": [
                        v.model_copy(update={"kind": "base"}),
                        *[
                            t.model_copy(update={"kind": "parameterized"})
                            for t in spec.tasks
                            if t is not v
                        ],
                    ]
                }
            )
            for plan in generic_plans(own):
                plan.id = f"{plan.id}-{v.variant}"
                clip = run_plan(own, plan)
                if clip is not None and _fits(task, clip):
                    clips[clip.id] = clip
                    kept.append(clip.id)
        out.append(kept)
    return out


class DemoPackageError(ValueError):
    """A task's demo clips break a package rule."""


def check_package(task: TaskSpec, clips: list[DemoClip]) -> None:
    """Package rules: 1-4 clips, 10-80 frames, labels replay, no clip starts at the task's opening."""
    if not 1 <= len(clips) <= 4:
        raise DemoPackageError(f"{task.id}: {len(clips)} clips (need 1-4)")
    frames = sum(_frames(c) for c in clips)
    if not MIN_FRAMES <= frames <= MAX_FRAMES:
        raise DemoPackageError(f"{task.id}: {frames} demo frames (need {MIN_FRAMES}-{MAX_FRAMES})")
    opening = task_start_sha256(task)
    for c in clips:
        r = replay_clip(task, c)
        if r.start_sha256 == opening:
            raise DemoPackageError(f"{task.id}: demo {c.id} starts at the task's own opening")


# ---------------------------------------------------------------------------
# writing the demos: lists into a task file
# ---------------------------------------------------------------------------
_ITEM = re.compile(r"^  - ")


def _clip_yaml(clip: DemoClip) -> dict:
    d = clip.model_dump(mode="json", exclude_defaults=True)
    return {
        k: d[k]
        for k in ("id", "seed", "initial_skip", "init_actions", "actions", "label", "source")
        if k in d
    }


def _flow(v) -> str:
    """One value as a single-line YAML scalar or flow collection."""
    text = yaml.safe_dump(v, default_flow_style=True, width=1_000_000, allow_unicode=True)
    text = text.strip()
    if text.endswith("..."):
        text = text[:-3].strip()
    return text


def _dump(d: dict, indent: int) -> list[str]:
    """A mapping in block style, one ``key: value`` line per key (lists in flow style)."""
    return [" " * indent + f"{k}: {_flow(v)}" for k, v in d.items()]


def render_tasks_block(lines: list[str], demos: dict[str, list[DemoClip]]) -> list[str]:
    """Rewrite the task items of a file's ``tasks:`` list with the given demos lists."""
    start = next(i for i, ln in enumerate(lines) if ln.rstrip() == "tasks:") + 1
    end = start
    while end < len(lines) and (lines[end].startswith("  ") or not lines[end].strip()):
        end += 1
    # A comment line indented less than an item's fields introduces the next item:
    # it travels with that item (as its lead), never into the previous one's body.
    items: list[list[str]] = []
    leads: list[list[str]] = []
    pending: list[str] = []
    for ln in lines[start:end]:
        is_lead_comment = ln.lstrip().startswith("#") and len(ln) - len(ln.lstrip()) < 4
        if _ITEM.match(ln):
            items.append([ln])
            leads.append(pending)
            pending = []
        elif is_lead_comment or not items:
            pending.append(ln)
        else:
            items[-1].append(ln)
    defined: set[str] = set()
    out_items = []
    for lead, item in zip(leads, items, strict=True):
        # drop any previous demos block from the item
        kept, skipping = [], False
        for ln in item:
            if ln.startswith("    demos:"):
                skipping = True
                continue
            if skipping and (ln.startswith("     ") or ln.startswith("    - ") or not ln.strip()):
                continue
            skipping = False
            kept.append(ln)
        head = kept[0]
        if head[4:].lstrip().startswith("{"):  # flow mapping: expand to block form
            data = yaml.safe_load(head[4:])
            data.pop("demos", None)
            body = _dump(data, 4)
            body[0] = "  - " + body[0][4:]
            kept = body + kept[1:]
            variant = data["variant"]
        else:
            fields = [x[4:] for x in kept if not x.lstrip().startswith("#")]
            variant = yaml.safe_load("\n".join(fields))["variant"]
        clips = demos.get(variant, [])
        if clips:
            kept.append("    demos:")
            for c in clips:
                if c.id in defined:
                    kept.append(f"      - *{c.id}")
                    continue
                defined.add(c.id)
                body = _dump(_clip_yaml(c), 8)
                body[0] = f"      - &{c.id}\n" + body[0]
                kept.extend(body)
        out_items.append(lead + kept)
    new = [ln for item in out_items for ln in item] + pending
    return lines[:start] + new + lines[end:]


def write_demos(
    env_key: str, demos: dict[str, list[DemoClip]], tasks_dir: Path = TASKS_DIR
) -> Path:
    """Store the demos lists in ``<tasks_dir>/<env>.yaml`` (atomic; validated before replacing)."""
    path = Path(tasks_dir) / f"{env_key}.yaml"
    lines = path.read_text().splitlines()
    text = "\n".join(render_tasks_block(lines, demos)) + "\n"
    d = Path(tempfile.mkdtemp(dir=path.parent, prefix=".demos-"))
    tmp = d / path.name
    try:
        tmp.write_text(text)
        spec = load_env_file(tmp)  # raises on anything invalid
        for v in spec.tasks:
            if [c.id for c in v.demos] != [c.id for c in demos.get(v.variant, [])]:
                raise ValueError(f"{env_key}/{v.variant}: demos did not round-trip")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
        d.rmdir()
    from vical.spec import load_envs

    load_envs.cache_clear()
    return path
