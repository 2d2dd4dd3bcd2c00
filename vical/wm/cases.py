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
:data:`CONTEXTS` contexts over a few environments of a family (:data:`SCENARIOS`);
eight scenarios of 50 cases make 400.

Context states are the tasks' start states and states along their demonstration
clips (the clip's own start plus its first decisions), named as data
(:class:`vical.wm.sim.Origin`) so that the truth can be re-derived by replay.
Everything is chosen in a fixed order: building twice gives the same bytes.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

from vical.wm.sim import BranchEndedError, ContextSim, Origin, task_by_id
from vical.wm.state import EXACT_FAMILIES

CONTEXT_FRAMES = 3
BRANCHES = 5
CONTEXTS = 10
HORIZON = 4
MIN_CHANGED_PIXELS = 16
MAX_CANDIDATES = 48  # interventions tried per context before it is given up
DEMO_POSITIONS = (2, 5, 9, 14)  # decisions into a demo clip where contexts are taken
CASES_FILE = "cases.jsonl"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Scenario:
    """A scenario: a name, what it covers, and its environments (in build order)."""

    name: str
    description: str
    envs: tuple[str, ...]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("grid-navigation", "Toy Text grid worlds", ("taxi", "cliffwalking")),
    Scenario("classic-control", "classic control physics", ("cartpole", "mountaincar", "acrobot")),
    Scenario("atari-shooters", "Atari shooters", ("assault", "demonattack", "seaquest")),
    Scenario("atari-dodging", "Atari dodging games", ("freeway", "asterix", "roadrunner")),
    Scenario(
        "minigrid", "MiniGrid partial-view mazes", ("lavacrossing", "multiroom", "unlockpickup")
    ),
    Scenario("procgen", "Procgen games", ("bigfish", "leaper", "ninja", "bossfight")),
    Scenario("driving", "driving", ("highway", "enduro")),
    Scenario("arcade", "Tetris, Flappy Bird and Breakout", ("tetris", "flappybird", "breakout")),
)


def scenario(name: str) -> Scenario:
    for s in SCENARIOS:
        if s.name == name:
            return s
    raise KeyError(f"unknown scenario {name!r}; scenarios: {', '.join(s.name for s in SCENARIOS)}")


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
    context: list[np.ndarray]
    context_actions: list[str]
    intervention: list[str]


# -- PNG -----------------------------------------------------------------------------
def encode_png(frame: np.ndarray) -> bytes:
    """A frame as PNG bytes (fixed settings: the same frame always gives the same bytes)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8), "RGB").save(
        buf, format="PNG", compress_level=6
    )
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


def pixels_sha256(frame: np.ndarray) -> str:
    """sha256 of a frame's pixels (shape, then bytes), independent of the PNG encoding."""
    arr = np.ascontiguousarray(frame, dtype=np.uint8)
    h = hashlib.sha256(f"{arr.shape}|".encode())
    h.update(arr.data)
    return h.hexdigest()


# -- choosing contexts and branches ---------------------------------------------------
def _origins(env_key: str) -> Iterator[Origin]:
    """Candidate context states of one environment: start states and demo positions, alternating."""
    from vical.spec import load_envs

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


def _differs(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return True
    return int(np.any(a != b, axis=2).sum()) >= MIN_CHANGED_PIXELS


@dataclass
class _Branch:
    intervention: list[str]
    frames: list[np.ndarray]
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


def build_scenario(
    sc: Scenario, out: Path, contexts: int = CONTEXTS, h: int = HORIZON
) -> list[Case]:
    """Build ``contexts`` x :data:`BRANCHES` cases of a scenario, writing frames under ``out``."""
    sources = [_origins(e) for e in sc.envs]
    cases: list[Case] = []
    group_no = 0
    exhausted: set[int] = set()
    turn = 0
    while group_no < contexts:
        if len(exhausted) == len(sources):
            raise RuntimeError(
                f"scenario {sc.name}: only {group_no} of {contexts} contexts have "
                f"{BRANCHES} visibly different branches"
            )
        k = turn % len(sources)
        turn += 1
        if k in exhausted:
            continue
        origin = next(sources[k], None)
        if origin is None:
            exhausted.add(k)
            continue
        try:
            sim = ContextSim(origin)
        except BranchEndedError:
            continue
        with sim:
            found = _branches(sim, h)
            if found is None:
                continue
            before = sim.state()
            task = task_by_id(origin.task)
            ctx = sim.frames[-CONTEXT_FRAMES:]
            ctx_actions = (
                list(origin.prefix[len(origin.prefix) - (len(ctx) - 1) :]) if len(ctx) > 1 else []
            )
            group = f"{sc.name}/g{group_no:02d}"
            ids = [f"{sc.name}/{group_no * BRANCHES + b:03d}" for b in range(BRANCHES)]
            for b, branch in enumerate(found):
                cid = ids[b]
                folder = out / "frames" / cid
                folder.mkdir(parents=True, exist_ok=True)
                ctx_names, truth_names = [], []
                for i, f in enumerate(ctx):
                    name = f"frames/{cid}/context_{i}.png"
                    (out / name).write_bytes(encode_png(f))
                    ctx_names.append(name)
                for i, f in enumerate(branch.frames):
                    name = f"frames/{cid}/truth_{i + 1}.png"
                    (out / name).write_bytes(encode_png(f))
                    truth_names.append(name)
                cases.append(
                    Case(
                        id=cid,
                        scenario=sc.name,
                        env=task.env.env,
                        family=task.env.family,
                        task=origin.task,
                        origin_clip=origin.clip,
                        origin_prefix=list(origin.prefix),
                        group=group,
                        branch=b,
                        branches=ids,
                        actions=sim.env.action_names,
                        context_frames=ctx_names,
                        context_actions=ctx_actions,
                        intervention=branch.intervention,
                        truth_frames=truth_names,
                        context_sha256=[pixels_sha256(f) for f in ctx],
                        truth_sha256=[pixels_sha256(f) for f in branch.frames],
                        spec=_spec(task.env.family, origin, branch, before, task.env.frame_skip),
                    )
                )
            group_no += 1
    return cases


def build(
    out: Path, scenarios: list[str] | None = None, contexts: int = CONTEXTS, h: int = HORIZON
) -> list[Case]:
    """Build the cases of the named scenarios (default all) into ``out``; write ``cases.jsonl``.

    The folder is built beside ``out`` and then renamed into place (a previous
    ``out`` is replaced whole), so it never mixes frames of two builds.
    """
    import shutil
    import tempfile

    out = Path(out)
    chosen = [scenario(n) for n in scenarios] if scenarios else list(SCENARIOS)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        cases: list[Case] = []
        for sc in chosen:
            cases.extend(build_scenario(sc, tmp, contexts, h))
        write_cases(tmp, cases)
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        tmp.replace(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
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


def load_frames(folder: Path, names: list[str]) -> list[np.ndarray]:
    return [decode_png((Path(folder) / n).read_bytes()) for n in names]
