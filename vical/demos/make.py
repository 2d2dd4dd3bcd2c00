"""Make the demo clips of an environment with the expert tools, and store them in its YAML.

``make_demos(env_key)`` plans a small pool of clips for the environment (each
from its own start state, never the opening of any task of the environment),
runs the expert that each clip calls for, and assigns 1-3 clips to every task
so that a task's package holds 10-80 frames, reusing clips across tasks.
``write_demos(env_key, demos)`` writes the result into the ``demos:`` lists
of ``vical/tasks/<env>.yaml`` (clips defined once with a YAML anchor, then
referenced by alias), leaving the rest of the file as it is.

Environments with a recipe in :data:`RECIPES` use scripted experts (BFS for
the grid worlds, controllers for classic control); every other environment
gets the generic plan: search expert from two shifted starts plus a loss
found by seeded random play.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vical.demos.experts import (
    CONTROLLERS,
    ExpertResult,
    bfs_expert,
    failure_search,
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


def run_plan(spec: EnvSpec, plan: ClipPlan) -> DemoClip | None:
    """Run a clip's expert from its start and return the clip (None if it found nothing)."""
    base = base_task(spec)
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
# the entry points
# ---------------------------------------------------------------------------
def make_demos(env_key: str, tasks_dir: Path = TASKS_DIR) -> dict[str, list[DemoClip]]:
    """Run the experts for an environment and assign clips: ``{variant: [DemoClip, ...]}``.

    Checks every assignment: the clip replays to its label on that task, it
    does not start at that task's opening frame, and the task's package has
    10-80 frames.
    """
    spec = load_env_file(Path(tasks_dir) / f"{env_key}.yaml")
    recipes = _recipes()
    if env_key in recipes:
        plans, assignment = recipes[env_key]
    else:
        plans, assignment = generic_plans(spec), None
    clips = {}
    for plan in plans:
        clip = run_plan(spec, plan)
        if clip is not None:
            clips[clip.id] = clip
    if assignment is None:
        assignment = _assign_generic(spec, list(clips.values()))
        assignment = _fit_generic(spec, clips, assignment)
    if len(assignment) != len(spec.tasks):
        raise ValueError(f"{env_key}: {len(assignment)} assignments for {len(spec.tasks)} tasks")
    out: dict[str, list[DemoClip]] = {}
    for v, ids in zip(spec.tasks, assignment, strict=True):
        task = TaskSpec(env=spec, variant=v)
        chosen = [clips[i] for i in ids if i in clips]
        check_package(task, chosen)
        out[v.variant] = chosen
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
    items: list[list[str]] = []
    for ln in lines[start:end]:
        if _ITEM.match(ln):
            items.append([ln])
        elif items:
            items[-1].append(ln)
    defined: set[str] = set()
    out_items = []
    for item in items:
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
            variant = yaml.safe_load("\n".join(x[4:] for x in kept))["variant"]
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
        out_items.append(kept)
    new = [ln for item in out_items for ln in item]
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
