"""The reflex screen: does a task measure play, or can a policy that never looks win it?

The paper screened its environments for *policy discriminability*: play informed by
the rules must beat random or reflex-only behaviour. ``vical tasks screen`` holds every
task to that. On each task it plays a fixed battery of policies that never read the
frame (:func:`battery`):

* every constant action (the same action at every decision);
* uniform random play, three runs seeded as ``vical baseline random`` seeds them
  (run seed 0, run indexes 0-2);
* short action cycles: period 2 (every pair of legal actions while there are at most
  :data:`ALL_PAIRS` pairs, else :data:`CYCLES_PER_PERIOD` pairs drawn from a seed of the
  task id), periods 3 and 4 (:data:`CYCLES_PER_PERIOD` each, drawn the same way);
* "sticky" random play: repeat the previous action with probability p
  (:data:`STICKY_P`), else draw uniformly, two seeded runs each;

and the task's expert, replayed from the packaged plan file (``vical baseline expert``'s
plans). A task **fails** the screen when

1. any deterministic reflex (a constant action or a cycle) passes it, or random play
   (uniform and sticky, judged together) passes more than half of its episodes, or
2. the best deterministic reflex score, or random play's mean score, comes within
   :data:`MARGIN` points of the expert's score (or above it): the score then cannot
   tell play from reflex,

unless the task file records a ``reflex_exception`` (a rule the paper states that admits
the reflex pass, quoted) that excuses every failing policy. An exception that excuses
nothing any more, or that leaves a failing policy unexcused, fails the task too: a
claim must hold in both directions.

The battery is a pure function of the task, so the screen's verdicts are reproducible.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from vical.errors import VicalError
from vical.run.episode import episode_seed
from vical.spec import TaskSpec

# ours: the paper gives no number. A reflex score within 10 points (a tenth of the
# 0-100 scale) of the expert's leaves too little room between blind play and informed
# play for the score to tell a model that follows the rules from one that does not;
# 10 is also above the spread of the expert's own variants on most tasks.
MARGIN = 10.0
RANDOM_RUNS = 3
RUN_SEED = 0  # ``vical baseline random``'s default run seed
ALL_PAIRS = 15  # every pair while the vocabulary has at most this many pairs (6 actions)
CYCLES_PER_PERIOD = 4
STICKY_P = (0.5, 0.9)
STICKY_RUNS = 1

Pick = Callable[[int], str]


@dataclass(frozen=True)
class Policy:
    """One screen-blind policy: a name and a factory of its per-episode picker."""

    name: str
    make: Callable[[], Pick]


def _constant(action: str) -> Callable[[], Pick]:
    return lambda: lambda i: action


def _cycle(actions: tuple[str, ...]) -> Callable[[], Pick]:
    return lambda: lambda i: actions[i % len(actions)]


def _uniform(names: list[str], seed: int) -> Callable[[], Pick]:
    def make() -> Pick:
        rng = random.Random(seed)  # RandomAgent: random.Random(ctx.seed).choice(actions)
        return lambda i: rng.choice(names)

    return make


def _sticky(names: list[str], p: float, seed: int) -> Callable[[], Pick]:
    def make() -> Pick:
        rng = random.Random(seed)
        last: list[str] = []

        def pick(i: int) -> str:
            if last and rng.random() < p:
                return last[0]
            a = rng.choice(names)
            last[:] = [a]
            return a

        return pick

    return make


def _task_rng(task: TaskSpec, what: str) -> random.Random:
    h = hashlib.sha256(f"vical-screen:{task.id}:{what}".encode()).hexdigest()
    return random.Random(int(h[:16], 16))


def cycles(task: TaskSpec) -> list[tuple[str, ...]]:
    """The battery's action cycles for a task (deterministic in the task id)."""
    names = task.action_names
    n = len(names)
    out: list[tuple[str, ...]] = []
    if n < 2:
        return out
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if len(pairs) <= ALL_PAIRS:
        out.extend(pairs)
    else:
        out.extend(_task_rng(task, "period-2").sample(pairs, CYCLES_PER_PERIOD))
    for period in (3, 4):
        rng = _task_rng(task, f"period-{period}")
        seen: set[tuple[str, ...]] = set()
        tries = 0
        while len(seen) < CYCLES_PER_PERIOD and tries < 200:
            tries += 1
            c = (
                tuple(rng.sample(names, period))
                if n >= period
                else tuple(rng.choices(names, k=period))
            )
            if len(set(c)) > 1 and c not in seen:
                seen.add(c)
                out.append(c)
    return out


def battery(task: TaskSpec) -> list[Policy]:
    """Every screen-blind policy the screen plays on ``task``, in a fixed order."""
    names = task.action_names
    pols = [Policy(f"const:{a}", _constant(a)) for a in names]
    pols += [
        Policy(f"random:{r}", _uniform(names, episode_seed(RUN_SEED, task.id, r)))
        for r in range(RANDOM_RUNS)
    ]
    pols += [Policy("cycle:" + ",".join(c), _cycle(c)) for c in cycles(task)]
    pols += [
        Policy(
            f"sticky:{p}:{r}",
            _sticky(names, p, episode_seed(RUN_SEED, f"{task.id}#sticky{p}", r)),
        )
        for p in STICKY_P
        for r in range(STICKY_RUNS)
    ]
    return pols


@dataclass(frozen=True)
class Played:
    """One episode of the screen."""

    policy: str
    score: float
    passed: bool
    steps: int
    outcome: str | None


def play(env: Any, pick: Pick, name: str) -> Played:
    """Play ``pick(decision index)`` from the start to the end of one episode."""
    env.reset()
    step = None
    i = 0
    while not env.done:
        step = env.step(pick(i))
        i += 1
    assert step is not None
    return Played(name, float(step.score), bool(step.passed), int(step.index), step.outcome)


@dataclass
class TaskScreen:
    """The screen's findings on one task."""

    task: str
    env: str
    policies: int
    best_reflex: str
    best_reflex_score: float
    reflex_passes: list[str]
    random_scores: list[float]
    random_passes: int
    expert_score: float | None
    expert_passed: bool | None
    failures: list[str] = field(default_factory=list)  # why it fails, one line each
    excused: list[str] = field(default_factory=list)  # policies the exception excuses
    exception: dict[str, Any] | None = None
    played: dict[str, tuple[float, bool]] = field(default_factory=dict)  # policy -> score, pass

    @property
    def status(self) -> str:
        if self.failures:
            return "fail"
        return "exception" if self.excused else "ok"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def _expert_plan(task: TaskSpec, plans: dict[str, list[str]]) -> list[str] | None:
    acts = plans.get(task.id)
    if not acts or any(a not in task.env.actions for a in acts):
        return None
    return acts


def is_random(policy: str) -> bool:
    """Uniform and sticky random play (judged as a family, by rate and mean)."""
    return policy.startswith(("random:", "sticky:"))


def failing_policies(results: list[Played], expert: Played | None) -> dict[str, str]:
    """The battery's policies that fail the task, each with the reason.

    Deterministic reflexes (constant actions, cycles) fail it by one pass, or by a
    score within :data:`MARGIN` of the expert's. Random play (uniform and sticky) is
    judged as a family: the paper's own random reference passes 14% of its episodes
    (30% in Sport), so a single lucky pass is no evidence; the family fails the task
    when more than half of its episodes pass, or when its mean score comes within the
    margin of the expert's.
    """
    failing: dict[str, str] = {}
    for r in results:
        if not is_random(r.policy) and r.passed:
            failing[r.policy] = "passes"
    rand = [r for r in results if is_random(r.policy)]
    won = [r for r in rand if r.passed]
    if rand and 2 * len(won) > len(rand):
        for r in won:
            failing[r.policy] = f"passes (random play passes {len(won)} of {len(rand)} episodes)"
    if expert is not None:
        bar = expert.score - MARGIN
        for r in results:
            if not is_random(r.policy) and r.score > bar and r.policy not in failing:
                failing[r.policy] = (
                    f"scores {r.score:.1f}, within {MARGIN:g} of the expert's {expert.score:.1f}"
                )
        mean = sum(r.score for r in rand) / len(rand) if rand else 0.0
        if rand and mean > bar:
            for r in rand:
                failing.setdefault(
                    r.policy,
                    f"random play's mean score {mean:.1f} is within {MARGIN:g} of the "
                    f"expert's {expert.score:.1f}",
                )
    return failing


def judge(
    task: TaskSpec,
    results: list[Played],
    expert: Played | None,
) -> TaskScreen:
    """The verdict on one task from its battery's episodes and the expert's."""
    best = max(results, key=lambda r: r.score)
    passes = [r.policy for r in results if r.passed]
    rand = [r for r in results if r.policy.startswith("random:")]
    ts = TaskScreen(
        task=task.id,
        env=task.env.env,
        policies=len(results),
        best_reflex=best.policy,
        best_reflex_score=round(best.score, 4),
        reflex_passes=passes,
        random_scores=[round(r.score, 4) for r in rand],
        random_passes=sum(r.passed for r in rand),
        expert_score=None if expert is None else round(expert.score, 4),
        expert_passed=None if expert is None else expert.passed,
        played={r.policy: (round(r.score, 4), r.passed) for r in results},
    )
    failing = failing_policies(results, expert)
    exc = task.variant.reflex_exception
    if exc is not None:
        ts.exception = exc.model_dump()
        ts.excused = [p for p in failing if any(fnmatchcase(p, g) for g in exc.policies)]
        if not ts.excused:
            ts.failures.append(
                "its reflex_exception excuses nothing: no policy it names fails the "
                "screen any more; remove the exception from the task file"
            )
    left = [p for p in failing if p not in ts.excused]
    passing_left = [p for p in left if failing[p].startswith("passes")]
    if passing_left:
        more = f" (+{len(passing_left) - 3} more)" if len(passing_left) > 3 else ""
        ts.failures.append("passed by " + ", ".join(passing_left[:3]) + more)
    if any(is_random(p) for p in passing_left):
        ts.failures.append(next(failing[p] for p in passing_left if is_random(p)))
    near = [p for p in left if not failing[p].startswith("passes")]
    if near:
        top = max(near, key=lambda p: next(r.score for r in results if r.policy == p))
        ts.failures.append(f"{top} {failing[top]}")
    return ts


def screen_task(job: tuple[TaskSpec | str, list[str] | None]) -> TaskScreen:
    """Play the battery and the expert on one task (a pool job: the task or its id, and
    the expert's plan or None)."""
    from vical.agent.plans import fill_action
    from vical.envs import make_env
    from vical.spec import get_task

    spec, plan = job
    task = get_task(spec) if isinstance(spec, str) else spec
    env = make_env(task)
    try:
        results = []
        for pol in battery(task):
            results.append(play(env, pol.make(), pol.name))
        expert = None
        if plan is not None:
            fill = fill_action(task)
            expert = play(env, lambda i: plan[i] if i < len(plan) else fill, "expert")
    finally:
        env.close()
    return judge(task, results, expert)


def load_expert_plans(path: Path | None = None) -> tuple[dict[str, list[str]], str | None]:
    """The expert plans by task id, and a note when they were made for other task data.

    The plans are read as data, without :func:`vical.agent.plans.load_plans`'s digest
    check: the screen compares with the expert on every task whose plan still names
    legal actions, and says when the file predates the task data.
    """
    from vical.agent.plans import DEFAULT_PLANS
    from vical.spec import tasks_digest

    p = path or DEFAULT_PLANS
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, f"no expert plans at {p}: the margin rule is not applied"
    tasks = doc.get("tasks", {}) if isinstance(doc, dict) else {}
    plans = {
        str(k): list(v["actions"])
        for k, v in tasks.items()
        if isinstance(v, dict) and isinstance(v.get("actions"), list)
    }
    note = None
    if doc.get("tasks_digest") != tasks_digest():
        note = f"the expert plans in {p.name} were made for other task data"
    return plans, note


def run_screen(
    tasks: list[TaskSpec],
    workers: int = 1,
    plans_path: Path | None = None,
    on_task: Callable[[TaskScreen], None] | None = None,
) -> tuple[list[TaskScreen], str | None]:
    """Screen ``tasks`` on ``workers`` processes; results in task order."""
    from vical.run.pool import run_pool

    plans, note = load_expert_plans(plans_path)
    jobs: list[tuple[TaskSpec, list[str] | None]] = [(t, _expert_plan(t, plans)) for t in tasks]
    found: dict[str, TaskScreen] = {}
    errors: list[tuple[str, BaseException]] = []

    def on_result(job: tuple[TaskSpec, Any], value: Any, error: BaseException | None) -> bool:
        if error is not None:  # a failure to play is never a verdict: stop at once
            errors.append((job[0].id, error))
            return False
        found[job[0].id] = value
        if on_task is not None:
            on_task(value)
        return True

    run_pool(screen_task, jobs, max(1, min(workers, len(jobs))), on_result)
    if errors:
        tid, err = errors[0]
        raise ScreenError(f"the screen could not play {tid}: {type(err).__name__}: {err}")
    return [found[t.id] for t in tasks], note


class ScreenError(VicalError):
    """A task could not be played (a broken simulator or task file): no verdict."""

    exit_code = 1


def summary(results: Iterable[TaskScreen]) -> dict[str, int]:
    """Counts of tasks by status."""
    out = {"ok": 0, "exception": 0, "fail": 0}
    for r in results:
        out[r.status] += 1
    return out
