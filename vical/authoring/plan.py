"""Clip plans and pools: what a demo recipe returns, and how clips are assigned to tasks.

A recipe (one per environment, :mod:`vical.authoring.recipes`) returns clip
plans (:class:`ClipPlan`: a start state, an expert, a horizon, a note) and
either pools (:class:`Pool`: the clips a group of tasks shares, assigned by
:func:`assign_pools` within each package's frame budget) or a fixed list of
clip ids per task. The helpers here (task starts, their frame hashes, settings
groups) are the recipes' shared public toolkit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from vical.authoring.experts import replay_actions
from vical.demos.experts import ExpertResult
from vical.demos.render import clip_task, replay_clip, task_start_sha256
from vical.envs.environment import VicalEnv
from vical.spec import DemoClip, EnvSpec, TaskSpec

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


def frames(clip: DemoClip) -> int:
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


def task_start_hashes(spec: EnvSpec) -> set[str]:
    """The opening frame hash of every task of the environment."""
    return {task_start_sha256(TaskSpec(env=spec, variant=v)) for v in spec.tasks}


def start_hash(
    spec: EnvSpec, on: str | None, seed: int | None, skip: int, init: list[str]
) -> str | None:
    """Frame hash of a clip start (seed, skip, init actions) under variant ``on``'s settings."""
    probe = DemoClip(
        id="probe",
        seed=seed,
        initial_skip=skip,
        init_actions=init,
        actions=["-"],
        label="Victory",
        source="scripted probe (never stored)",
    )
    try:
        return task_start_sha256(clip_task(variant_task(spec, on), probe))
    except RuntimeError:  # the start cannot be reached (the game ended on the way)
        return None


def replayed(actions: list[str]) -> Callable[[TaskSpec], ExpertResult]:
    """An expert that replays fixed actions (a clip found beforehand)."""
    acts = list(actions)
    return lambda t: replay_actions(t, acts)


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


def rotate(ids: list[str], k: int) -> list[str]:
    """``ids`` rotated left by ``k`` (modulo its length)."""
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
            w, f = rotate(wins, i), rotate(fails, i // 2)
            fail_second = pool.fail_every or i % 2
            order = [*w[:1], *f[:1], *w[1:], *f[1:]] if fail_second else [*w, *f]
            if not order:
                chosen[v] = []
                continue
            budget = FRAME_BUDGETS[(i + 3 * gi) % len(FRAME_BUDGETS)]
            ids, total = [order[0]], frames(clips[order[0]])
            for c in order[1:]:
                n = frames(clips[c])
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


def group_tag(spec: EnvSpec, variant: str) -> str:
    """Short id part naming a group's own settings (variant-level env_kwargs)."""
    v = next(t for t in spec.tasks if t.variant == variant)
    return "-".join(f"{k.split('_')[0]}{x}" for k, x in sorted(v.env_kwargs.items()))


class DemoPackageError(ValueError):
    """A task's demo clips break a package rule."""


def check_package(task: TaskSpec, clips: list[DemoClip]) -> None:
    """Package rules: 1-4 clips, 10-80 frames, labels replay, no clip starts at the task's opening."""
    if not 1 <= len(clips) <= 4:
        raise DemoPackageError(f"{task.id}: {len(clips)} clips (need 1-4)")
    total = sum(frames(c) for c in clips)
    if not MIN_FRAMES <= total <= MAX_FRAMES:
        raise DemoPackageError(f"{task.id}: {total} demo frames (need {MIN_FRAMES}-{MAX_FRAMES})")
    opening = task_start_sha256(task)
    for c in clips:
        r = replay_clip(task, c)
        if r.start_sha256 == opening:
            raise DemoPackageError(f"{task.id}: demo {c.id} starts at the task's own opening")


def first_passing(results: Iterable[ExpertResult]) -> ExpertResult | None:
    """The first expert run that passes without ending Terminated, else the best of them
    (not lost first, then the higher score). ``results`` is consumed lazily."""
    best = None
    for r in results:
        if r.passed and r.outcome != "Terminated":
            return r
        if best is None or (r.outcome != "Terminated", r.score) > (
            best.outcome != "Terminated",
            best.score,
        ):
            best = r
    return best


def claim_start(
    spec: EnvSpec, on: str, seed: int | None, skip: int, init: list[str], taken: set[str]
) -> bool:
    """Reserve a clip start: False when it cannot be reached or its frame is already in
    ``taken`` (a task's opening or another clip's start); else its hash joins ``taken``."""
    h = start_hash(spec, on, seed, skip, init)
    if h is None or h in taken:
        return False
    taken.add(h)
    return True


class ClipPool:
    """Fixed-action clips from distinct starts (under variant ``on``'s settings), gathered
    into one pool: of every task, or of ``variants``. ``taken``: the start frames already
    claimed, shared by pools that draw on it (default: a set of every task's opening)."""

    def __init__(
        self,
        spec: EnvSpec,
        on: str,
        fail_every: bool = False,
        variants: list[str] | None = None,
        taken: set[str] | None = None,
    ):
        self.spec, self.on = spec, on
        self.taken = task_start_hashes(spec) if taken is None else taken
        if variants is None:
            variants = [v.variant for v in spec.tasks]
        self.pool = Pool(variants=variants, fail_every=fail_every)
        self.plans: list[ClipPlan] = []

    def add(
        self,
        cid: str,
        seed: int,
        init: list[str],
        acts: list[str],
        note: str,
        fail: bool = False,
        horizon: int | None = None,
    ) -> bool:
        """Plan the clip (as a success, or a failure with ``fail``) unless its start is taken;
        its horizon is ``horizon``, default the number of its actions."""
        if not claim_start(self.spec, self.on, seed, 0, init, self.taken):
            return False
        if horizon is None:
            horizon = len(acts)
        self.plans.append(
            ClipPlan(
                cid, replayed(acts), note, seed, init_actions=init, horizon=horizon, on=self.on
            )
        )
        (self.pool.fails if fail else self.pool.wins).append(cid)
        return True


def group_pools(spec: EnvSpec, fail_every: bool = False) -> list[ClipPool]:
    """A :class:`ClipPool` per settings group (:func:`settings_groups`; its clips start
    under the group's first task), all claiming start frames from one set."""
    taken = task_start_hashes(spec)
    return [ClipPool(spec, g[0], fail_every, g, taken) for g in settings_groups(spec)]


def gathered(pools: list[ClipPool]) -> tuple[list[ClipPlan], list[Pool]]:
    """A recipe's result from its clip pools: every plan, pool by pool, and the pools."""
    return [p for clips in pools for p in clips.plans], [clips.pool for clips in pools]


def seed_env(spec: EnvSpec, seed: int, max_steps: int) -> VicalEnv:
    """The base task's environment with another seed and step cap, reset to its start."""
    from vical.envs import make_env

    base = next(v for v in spec.tasks if v.kind == "base")
    v = base.model_copy(update={"seed": seed, "max_steps": max_steps, "demos": []})
    env = make_env(TaskSpec(env=spec, variant=v))
    env.reset()
    return env
