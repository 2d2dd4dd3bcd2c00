"""World-model cases: a context, one fixed intervention, and the simulator's truth.

A case holds

- its *context*: the last frames (up to :data:`CONTEXT_FRAMES`) the simulator
  showed before the context state, with the actions between them;
- its *intervention*: a fixed sequence of canonical actions;
- its *truth*: the simulator's frame after each action of the intervention,
  played from an exact snapshot of the context state;
- its *specification* in the reference's terms: initial condition, permitted
  intervention, required change (the facts the intervention changes, with their
  values before and after), protected state (the facts it leaves alone) and the
  evidence rule, written from the simulator's state (:mod:`vical.wm.state`).

Each context has :data:`BRANCHES` cases whose interventions lead to visibly
different outcomes (their final true frames differ in at least
:data:`MIN_CHANGED_PIXELS` pixels from one another), so that a model ignoring
its actions cannot predict every branch of a context. A scenario is
:data:`CONTEXTS` contexts over a few environments of a family (:func:`all_scenarios`);
eight scenarios of 50 cases make 400.

Context states are the tasks' start states and states along their demonstration
clips (the clip's own start plus its first decisions), named as data
(:class:`vical.wm.sim.Origin`) so that the truth can be re-derived by replay.
Everything is chosen in a fixed order: building twice gives the same bytes.
Candidate contexts may be tried several at once on worker processes
(:func:`find_contexts`); a scenario takes the first ones, in that order, that
have a context, so the number of workers never changes a byte.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from vical.jobs import Pool, in_process
from vical.wm.sim import (
    BranchEndedError,
    ContextSim,
    Frame,
    Origin,
    decode_png,
    encode_png,
    pixels_sha256,
    task_by_id,
)
from vical.wm.state import EXACT_FAMILIES

CONTEXT_FRAMES = 3
BRANCHES = 5
CONTEXTS = 10
HORIZON = 4
MIN_CHANGED_PIXELS = 16
MAX_CANDIDATES = 48  # interventions tried per context before it is given up
DEMO_POSITIONS = (2, 5, 9, 14)  # decisions into a demo clip where contexts are taken
CASES_FILE = "cases.jsonl"
# the reserved action name of "no decision taken" (the no-op control, where a game has no
# NOOP action); the protocol accepts it in any intervention besides the vocabulary
NO_ACTION = "(no action)"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Scenario:
    """A scenario: a name, what it covers, and its environments (in build order)."""

    name: str
    description: str
    envs: tuple[str, ...]


# the scenarios in build order, each with what it covers; an environment joins one
# through its game module's WORLD_MODEL_SCENARIO = (scenario name, place in its order)
SCENARIO_TOPICS: dict[str, str] = {
    "grid-navigation": "Toy Text grid worlds",
    "classic-control": "classic control physics",
    "atari-shooters": "Atari shooters",
    "atari-dodging": "Atari dodging games",
    "minigrid": "MiniGrid partial-view mazes",
    "procgen": "Procgen games",
    "driving": "driving",
    "arcade": "Tetris, Flappy Bird and Breakout",
}
SCENARIO_HOOK = "WORLD_MODEL_SCENARIO"


def all_scenarios() -> tuple[Scenario, ...]:
    """The scenarios with their environments, read from the game modules of the
    environments present (a scenario no environment joins is left out)."""
    from vical.envs import game_module
    from vical.spec import load_envs

    members: dict[str, list[tuple[int, str]]] = {name: [] for name in SCENARIO_TOPICS}
    for env, spec in load_envs().items():
        entry = getattr(game_module(spec), SCENARIO_HOOK, None)
        if entry is None:
            continue
        name, place = entry
        if name not in members:
            raise KeyError(
                f"{env}: {SCENARIO_HOOK} names scenario {name!r}; "
                f"scenarios: {', '.join(SCENARIO_TOPICS)}"
            )
        members[name].append((place, env))
    return tuple(
        Scenario(name, topic, tuple(env for _, env in sorted(members[name])))
        for name, topic in SCENARIO_TOPICS.items()
        if members[name]
    )


def scenario(name: str) -> Scenario:
    for s in all_scenarios():
        if s.name == name:
            return s
    raise KeyError(f"unknown scenario {name!r}; scenarios: {', '.join(SCENARIO_TOPICS)}")


class Fact(BaseModel):
    """One fact of a specification: its name and value(s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fact: str
    before: Any = None
    after: Any = None


class CaseSpec(BaseModel):
    """The reference's specification fields, written from simulator state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_condition: str
    permitted_intervention: str
    required_change: list[Fact]
    protected_state: list[Fact]
    evidence_rule: str
    exact: bool = Field(description="checked on facts read back from the frame (else on pixels)")
    context_facts: dict[str, Any]


class Case(BaseModel):
    """One world-model case (see the module docstring). Frame paths are relative to the case folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    scenario: str
    env: str
    family: str
    task: str
    origin_clip: str | None
    origin_prefix: list[str]
    group: str
    branch: int
    branches: list[str]
    actions: list[str] = Field(description="the environment's canonical action vocabulary")
    context_frames: list[str]
    context_actions: list[str] = Field(description="action i leads from context frame i to i+1")
    intervention: list[str]
    truth_frames: list[str]
    context_sha256: list[str]
    truth_sha256: list[str]
    spec: CaseSpec

    @property
    def origin(self) -> Origin:
        return Origin(self.task, self.origin_clip, tuple(self.origin_prefix))


@dataclass(frozen=True)
class Request:
    """What a world model is given for one case: its public inputs (the wire format
    is :mod:`vical.wm.protocol`'s)."""

    case: str
    env: str
    actions: list[str]
    context: list[Frame]
    context_actions: list[str]
    intervention: list[str]


# -- choosing contexts and branches ---------------------------------------------------
HELD_OUT_FILE = "held-out.json"
HELD_OUT_CANDIDATES = 400  # seeded candidate context states per environment
HELD_OUT_WALK = (3, 12)  # decisions of a seeded walk from a task's start


def _held_out_origins(env_key: str, seed: str) -> Iterator[Origin]:
    """Candidate context states drawn from a private seed: states after a seeded walk of
    random decisions from a task's start, alternating with demo-clip positions the
    published cases never take. Nothing here is published: the cases built from them
    are held out (:func:`build`'s ``private_seed``)."""
    import random

    from vical.spec import load_envs

    spec = load_envs()[env_key]
    rng = random.Random(f"vical-wm-held-out:{seed}:{env_key}")
    actions = list(spec.actions)
    for k in range(HELD_OUT_CANDIDATES):
        v = rng.choice(spec.tasks)
        clips = [c for c in v.demos if len(c.actions) > 2]
        if k % 2 and clips:
            clip = rng.choice(clips)
            spots = [p for p in range(1, len(clip.actions)) if p not in DEMO_POSITIONS]
            if spots:
                pos = rng.choice(spots)
                yield Origin(f"{env_key}/{v.variant}", clip.id, tuple(clip.actions[:pos]))
                continue
        walk = tuple(rng.choice(actions) for _ in range(rng.randint(*HELD_OUT_WALK)))
        yield Origin(f"{env_key}/{v.variant}", None, walk)


def _origins(env_key: str, seed: str | None = None) -> Iterator[Origin]:
    """Candidate context states of one environment: start states and demo positions,
    alternating (with a private ``seed``: :func:`_held_out_origins`)."""
    from vical.spec import load_envs

    if seed is not None:
        yield from _held_out_origins(env_key, seed)
        return
    spec = load_envs()[env_key]
    starts = [Origin(f"{env_key}/{v.variant}", None, ()) for v in spec.tasks]
    seen: set[str] = set()
    along: list[Origin] = []
    for pos in DEMO_POSITIONS:
        for v in spec.tasks:
            for clip in v.demos:
                key = f"{clip.id}@{pos}"
                if key in seen or pos >= len(clip.actions):
                    continue
                seen.add(key)
                along.append(Origin(f"{env_key}/{v.variant}", clip.id, tuple(clip.actions[:pos])))
    for a, b in itertools.zip_longest(along, starts):
        if a is not None:
            yield a
        if b is not None:
            yield b


def _candidates(actions: list[str], noop_names: set[str], h: int) -> Iterator[list[str]]:
    """Interventions in a fixed order: one action held, two actions in halves, then the rest."""
    moves = [a for a in actions if a not in noop_names]
    emitted: set[tuple[str, ...]] = set()

    def fresh(seq: list[str]) -> bool:
        key = tuple(seq)
        if key in emitted or all(a in noop_names for a in seq):
            return False
        emitted.add(key)
        return True

    for a in moves:
        if fresh([a] * h):
            yield [a] * h
    for a, b in itertools.permutations(moves, 2):
        seq = [a] * (h // 2) + [b] * (h - h // 2)
        if fresh(seq):
            yield seq
    for combo in itertools.product(actions, repeat=h):
        if fresh(list(combo)):
            yield list(combo)


def _differs(a: Frame, b: Frame) -> bool:
    if a.shape != b.shape:
        return True
    return int(np.any(a != b, axis=2).sum()) >= MIN_CHANGED_PIXELS


@dataclass
class _Branch:
    intervention: list[str]
    frames: list[Frame]
    final_facts: dict[str, Any]


def _branches(sim: ContextSim, h: int) -> list[_Branch] | None:
    env = sim.env
    noop_names = {n for n, v in env.actions.items() if env.noop is not None and v == env.noop}
    chosen: list[_Branch] = []
    for tried, seq in enumerate(_candidates(env.action_names, noop_names, h)):
        if tried >= MAX_CANDIDATES or len(chosen) == BRANCHES:
            break
        try:
            frames, states = sim.play(seq, with_states=True)
        except BranchEndedError:
            continue
        if all(_differs(frames[-1], c.frames[-1]) for c in chosen):
            chosen.append(_Branch(seq, frames, states[-1]))
    return chosen if len(chosen) == BRANCHES else None


def _spec(
    case_family: str,
    origin: Origin,
    branch: _Branch,
    before: dict[str, Any],
    frame_skip: int,
) -> CaseSpec:
    after = branch.final_facts
    changed = [
        Fact(fact=k, before=before.get(k), after=after.get(k))
        for k in after
        if before.get(k) != after.get(k)
    ]
    kept = [Fact(fact=k, before=v, after=v) for k, v in after.items() if before.get(k) == v]
    if origin.clip is None:
        where = f"{origin.task}: the task's start state"
    else:
        where = (
            f"{origin.task}: the state after the first {len(origin.prefix)} decisions "
            f"of demonstration clip {origin.clip}"
        )
    exact = case_family in EXACT_FAMILIES
    rule = (
        "The predicted frame after the last action is read back into facts with the "
        "family's renderer; each required change must show its 'after' value and each "
        "protected fact its value."
        if exact
        else "Pixels decide: where the true frame after the last action differs from the "
        "last context frame the prediction must match the truth (required change); where "
        "no true frame of the intervention differs from the last context frame, the "
        "prediction must equal it (protected state)."
    )
    return CaseSpec(
        initial_condition=where + "; the last context frame shows it.",
        permitted_intervention=(
            f"{len(branch.intervention)} decisions, in order: {', '.join(branch.intervention)} "
            f"(each held for {frame_skip} simulator frame(s))."
        ),
        required_change=changed,
        protected_state=kept,
        evidence_rule=rule,
        exact=exact,
        context_facts=before,
    )


@dataclass(frozen=True)
class _Context:
    """One context as a worker finds it: everything of its cases but their ids.

    Frames travel as PNG bytes (encoded in the worker), with their pixel hashes.
    """

    origin: Origin
    env: str
    family: str
    actions: list[str]
    context_png: list[bytes]
    context_sha256: list[str]
    context_actions: list[str]
    interventions: list[list[str]]
    truth_png: list[list[bytes]]
    truth_sha256: list[list[str]]
    specs: list[CaseSpec]


def find_context(job: tuple[Origin, int]) -> _Context | None:
    """The context at ``origin`` with its :data:`BRANCHES` branches of ``h`` actions, or
    None when it has none (the prefix ends the episode, or too few visibly different
    branches). A pool job: it reads nothing but the task files and writes nothing."""
    origin, h = job
    try:
        sim = ContextSim(origin)
    except BranchEndedError:
        return None
    with sim:
        found = _branches(sim, h)
        if found is None:
            return None
        before = sim.state()
        task = task_by_id(origin.task)
        ctx = sim.frames[-CONTEXT_FRAMES:]
        ctx_actions = (
            list(origin.prefix[len(origin.prefix) - (len(ctx) - 1) :]) if len(ctx) > 1 else []
        )
        return _Context(
            origin=origin,
            env=task.env.env,
            family=task.env.family,
            actions=list(sim.env.action_names),
            context_png=[encode_png(f) for f in ctx],
            context_sha256=[pixels_sha256(f) for f in ctx],
            context_actions=ctx_actions,
            interventions=[b.intervention for b in found],
            truth_png=[[encode_png(f) for f in b.frames] for b in found],
            truth_sha256=[[pixels_sha256(f) for f in b.frames] for b in found],
            specs=[_spec(task.env.family, origin, b, before, task.env.frame_skip) for b in found],
        )


def _origin_order(sc: Scenario, seed: str | None = None) -> Iterator[Origin]:
    """Every candidate context state of a scenario, in the order they are tried: one of
    each environment in turn (an environment with no more candidates drops out)."""
    sources = [_origins(e, seed) for e in sc.envs]
    exhausted: set[int] = set()
    turn = 0
    while len(exhausted) < len(sources):
        k = turn % len(sources)
        turn += 1
        if k in exhausted:
            continue
        origin = next(sources[k], None)
        if origin is None:
            exhausted.add(k)
            continue
        yield origin


class _Plan:
    """Which candidate contexts of one scenario to try, and which are taken.

    A scenario takes the first ``contexts`` candidates, in :func:`_origin_order`, that
    have a context. Candidates are handed out ahead of their results (as if each will
    succeed), so workers never wait for one another; the contexts taken depend only on
    the results, never on which worker finished first.
    """

    def __init__(self, sc: Scenario, contexts: int, seed: str | None = None):
        self.sc = sc
        self.contexts = contexts
        self._order = _origin_order(sc, seed)
        self._handed = 0  # candidates handed out so far
        self._ended = False  # no candidate left
        self.results: dict[int, _Context | None] = {}

    def _found(self) -> int:
        return sum(r is not None for r in self.results.values())

    def next_job(self) -> tuple[int, Origin] | None:
        """The next candidate to try (its position and origin), or None: none needed now."""
        in_flight = self._handed - len(self.results)
        if self._ended or self._found() + in_flight >= self.contexts:
            return None
        origin = next(self._order, None)
        if origin is None:
            self._ended = True
            return None
        self._handed += 1
        return self._handed - 1, origin

    def taken(self) -> list[_Context] | None:
        """The contexts taken, once the results decide them (else None).

        Raises RuntimeError when every candidate was tried and too few have a context.
        """
        taken: list[_Context] = []
        for pos in range(self._handed):
            if pos not in self.results:
                return None
            r = self.results[pos]
            if r is not None:
                taken.append(r)
                if len(taken) == self.contexts:
                    return taken
        if self._ended:
            raise RuntimeError(
                f"scenario {self.sc.name}: only {len(taken)} of {self.contexts} contexts have "
                f"{BRANCHES} visibly different branches"
            )
        return None


class _Schedule:
    """The build's job source for :func:`vical.run.pool.run_pool`: candidates of the first
    scenario still short of contexts. It may have nothing to hand out for a while (every
    short scenario waits for results in flight); the pool asks again after each result."""

    def __init__(self, plans: list[_Plan], h: int):
        self.plans = plans
        self.h = h

    def __iter__(self) -> _Schedule:
        return self

    def __next__(self) -> tuple[int, int, Origin, int]:
        for i, plan in enumerate(self.plans):
            if plan.taken() is not None:
                continue
            job = plan.next_job()
            if job is not None:
                return i, job[0], job[1], self.h
        raise StopIteration


def _context_job(job: tuple[int, int, Origin, int]) -> _Context | None:
    return find_context((job[2], job[3]))


def find_contexts(
    chosen: list[Scenario],
    contexts: int,
    h: int = HORIZON,
    workers: int = 1,
    pool: Pool | None = None,
    on_abort: Callable[[], None] | None = None,
    seed: str | None = None,
) -> list[list[_Context]]:
    """The contexts each scenario takes, found by ``pool`` on ``workers`` processes (the
    same contexts whatever the pool and the number; default: in this process); with a
    private ``seed``, held-out contexts (:func:`_held_out_origins`)."""
    plans = [_Plan(sc, contexts, seed) for sc in chosen]

    def on_result(
        job: tuple[int, int, Origin, int], found: Any, error: BaseException | None
    ) -> bool:
        i, pos, origin = job[0], job[1], job[2]
        if error is not None:
            where = origin.task + (f" (clip {origin.clip})" if origin.clip else "")
            raise RuntimeError(f"{where}: {type(error).__name__}: {error}") from error
        plans[i].results[pos] = found
        return True

    run = pool or in_process
    run(_context_job, _Schedule(plans, h), max(1, workers), on_result, on_abort=on_abort)
    out: list[list[_Context]] = []
    for plan in plans:
        taken = plan.taken()
        if taken is None:  # cannot happen: the pool ran until every plan was decided
            raise RuntimeError(f"scenario {plan.sc.name}: its contexts were not decided")
        out.append(taken)
    return out


def write_contexts(sc: Scenario, found: list[_Context], out: Path) -> list[Case]:
    """The cases of a scenario's contexts (numbered in order), their frames written under ``out``."""
    cases: list[Case] = []
    for group_no, ctx in enumerate(found):
        group = f"{sc.name}/g{group_no:02d}"
        ids = [f"{sc.name}/{group_no * BRANCHES + b:03d}" for b in range(BRANCHES)]
        for b, cid in enumerate(ids):
            folder = out / "frames" / cid
            folder.mkdir(parents=True, exist_ok=True)
            ctx_names, truth_names = [], []
            for i, data in enumerate(ctx.context_png):
                name = f"frames/{cid}/context_{i}.png"
                (out / name).write_bytes(data)
                ctx_names.append(name)
            for i, data in enumerate(ctx.truth_png[b]):
                name = f"frames/{cid}/truth_{i + 1}.png"
                (out / name).write_bytes(data)
                truth_names.append(name)
            cases.append(
                Case(
                    id=cid,
                    scenario=sc.name,
                    env=ctx.env,
                    family=ctx.family,
                    task=ctx.origin.task,
                    origin_clip=ctx.origin.clip,
                    origin_prefix=list(ctx.origin.prefix),
                    group=group,
                    branch=b,
                    branches=ids,
                    actions=list(ctx.actions),
                    context_frames=ctx_names,
                    context_actions=list(ctx.context_actions),
                    intervention=list(ctx.interventions[b]),
                    truth_frames=truth_names,
                    context_sha256=list(ctx.context_sha256),
                    truth_sha256=list(ctx.truth_sha256[b]),
                    spec=ctx.specs[b],
                )
            )
    return cases


def build_scenario(
    sc: Scenario,
    out: Path,
    contexts: int = CONTEXTS,
    h: int = HORIZON,
    workers: int = 1,
    pool: Pool | None = None,
) -> list[Case]:
    """Build ``contexts`` x :data:`BRANCHES` cases of a scenario, writing frames under ``out``."""
    (found,) = find_contexts([sc], contexts, h, workers, pool)
    return write_contexts(sc, found, Path(out))


def _stale(out: Path) -> list[Path]:
    """Temporary folders of earlier builds of ``out`` that a second signal or a kill left."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}-[A-Za-z0-9_]{{8}}(-old)?$")
    if not out.parent.is_dir():
        return []
    return [p for p in out.parent.iterdir() if p.is_dir() and pattern.match(p.name)]


def build(
    out: Path,
    scenarios: list[str] | None = None,
    contexts: int = CONTEXTS,
    h: int = HORIZON,
    workers: int = 1,
    pool: Pool | None = None,
    private_seed: str | None = None,
) -> list[Case]:
    """Build the cases of the named scenarios (default all) into ``out``; write ``cases.jsonl``.

    ``private_seed``: build *held-out* cases instead, from context states that seed
    draws (:func:`_held_out_origins`) and the published cases never use; the folder is
    marked (:data:`HELD_OUT_FILE`, holding only the seed's sha256) and is never
    published (``vical dataset build`` refuses it). The same seed builds the same
    bytes.

    Contexts are found by ``pool`` on ``workers`` processes (``vical wm build -j``
    passes :func:`vical.run.pool.run_pool`; default: one at a time here); the folder
    is the same, byte for byte, whatever the pool. It is built in a temporary folder
    beside ``out`` and renamed into place (a previous ``out`` is moved aside first,
    put back if the rename is cut short, and removed after), so it never mixes
    frames of two builds. An interrupt (``KeyboardInterrupt``, or the pool's
    ``Interrupted``) leaves ``out`` as it was and no temporary folder; one left by a
    process killed outright is removed by the next build of ``out``.
    """
    import shutil
    import tempfile

    out = Path(out)
    chosen = [scenario(n) for n in scenarios] if scenarios else list(all_scenarios())
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in _stale(out):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    old = out.parent / f"{tmp.name}-old"

    def remove_tmp() -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    try:
        found = find_contexts(
            chosen, contexts, h, workers, pool, on_abort=remove_tmp, seed=private_seed
        )
        cases: list[Case] = []
        for sc, ctxs in zip(chosen, found, strict=True):
            cases.extend(write_contexts(sc, ctxs, tmp))
        write_cases(tmp, cases)
        if private_seed is not None:
            digest = hashlib.sha256(private_seed.encode()).hexdigest()
            (tmp / HELD_OUT_FILE).write_text(
                json.dumps({"held_out": True, "seed_sha256": digest}, indent=2) + "\n"
            )
        tmp.chmod(0o755)
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        if old.exists() and not out.exists():  # cut between the two renames
            os.replace(old, out)
        remove_tmp()
        shutil.rmtree(old, ignore_errors=True)
    return cases


def write_cases(out: Path, cases: list[Case]) -> None:
    lines = [json.dumps(c.model_dump(mode="json"), sort_keys=True) for c in cases]
    (out / CASES_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def load_cases(folder: Path) -> list[Case]:
    """The cases of a case folder (``cases.jsonl`` and its frames)."""
    path = Path(folder) / CASES_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no world-model cases here; build them with `vical wm build --out {folder}`"
        )
    return [Case.model_validate_json(line) for line in path.read_text("utf-8").splitlines() if line]


def is_held_out(folder: Path) -> bool:
    """Whether a case folder holds held-out cases (built with a private seed)."""
    return (Path(folder) / HELD_OUT_FILE).is_file()


def load_frames(folder: Path, names: list[str]) -> list[Frame]:
    return [decode_png((Path(folder) / n).read_bytes()) for n in names]
