"""Make the demo clips of an environment with the expert tools, and store them in its YAML.

``make_demos(env_key)`` plans a small pool of clips for the environment (each
from its own start state, never the opening of any task of the environment),
runs the expert that each clip calls for, and assigns 1-4 clips to every task
so that a task's package holds 10-80 frames, reusing clips across tasks; the
assignment is then packed into the paper's package structure by
:mod:`vical.demos.packages` (clips per task and distinct clips per environment).
:func:`vical.authoring.yamlio.write_demos` stores the result in the task file.

Which plans an environment gets is its recipe module's business
(:func:`vical.authoring.recipe_for`); environments without one get the
generic plan: search expert from two shifted starts plus a loss found by
seeded random play.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from vical.authoring import recipe_for
from vical.authoring.experts import failure_search, search_expert
from vical.authoring.plan import (
    MAX_FRAMES,
    ClipPlan,
    Pool,
    assign_pools,
    base_task,
    check_package,
    frames,
    run_plan,
    start_hash,
    task_start_hashes,
)
from vical.demos.experts import bfs_expert
from vical.demos.render import replay_clip, task_start_sha256
from vical.spec import TASKS_DIR, DemoClip, EnvSpec, TaskSpec, load_env_file

if TYPE_CHECKING:
    from typing_extensions import TypeIs

BFS = (
    "scripted expert: breadth-first search over decisions on the simulator (states keyed by "
    "frame hash), shortest path to the pass condition"
)


def _shifted_starts(spec: EnvSpec, n: int, taken: set[str]) -> list[tuple[int, int]]:
    """Up to ``n`` (seed, initial_skip) starts whose frame differs from every task opening.

    Other seeds come first (seeded games change their layout); games whose
    seed leaves the opening unchanged get more skipped frames instead.
    """
    base = base_task(spec)
    seed0, skip0 = base.variant.seed, base.variant.initial_skip
    candidates = [(seed0 + k, skip0) for k in (101, 202, 303)]
    if spec.noop is not None:  # skipped frames play the NOOP action
        candidates += [(seed0, skip0 + k) for k in (23, 47, 71, 95, 130)]
    out, seen = [], set(taken)
    for seed, skip in candidates:
        h = start_hash(spec, None, seed, skip, [])
        if h is None:  # the game ended during the skip
            continue
        if h not in seen:
            seen.add(h)
            out.append((seed, skip))
        if len(out) == n:
            break
    return out


def generic_plans(spec: EnvSpec) -> list[ClipPlan]:
    taken = task_start_hashes(spec)
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
                    partial(search_expert, seed=i),
                    "search expert: receding-horizon rollouts with the simulator's save/restore, "
                    "benchmark score as objective (vical.authoring.experts.search_expert)",
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
                "failure clip: seeded random play that loses (vical.authoring.experts.failure_search)",
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
            total = sum(frames(c) for c in chosen)
            if total + frames(extra) <= MAX_FRAMES and (total < 40 or extra in losses):
                chosen.append(extra)
        out.append([c.id for c in chosen])
    return out


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
    recipe = recipe_for(spec)
    plans, grouping = recipe(spec) if recipe is not None else (generic_plans(spec), None)
    # a recipe gives pools, or fixed clip id lists per task
    pools: list[Pool] | None = None
    assignment: list[list[str]] | None = None
    if grouping is not None and _is_pools(grouping):
        pools = grouping
    else:
        assignment = grouping
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


def _is_pools(grouping: list[Pool] | list[list[str]]) -> TypeIs[list[Pool]]:
    """Whether a recipe's grouping is pools (else clip id lists; an empty one is taken
    for id lists)."""
    return bool(grouping) and isinstance(grouping[0], Pool)


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
