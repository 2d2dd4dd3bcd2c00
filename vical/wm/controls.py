"""Control interventions and their targets, fixed before anything is scored.

A world-model run is made under one *intervention* (``vical wm eval --control``):

- ``own`` (the default): the case's own intervention, scored against the case's
  stored truth (the simulator's frames after it);
- ``noop``: no decision taken, once per step of the case's intervention: the
  environment's NOOP action where it has one, else :data:`vical.wm.cases.NO_ACTION`
  (the protocol's reserved name for "no decision"). Its target is the simulator
  left alone from the context state (:meth:`vical.wm.sim.ContextSim.play_noop`):
  a real-time world steps its NOOP and goes on moving; a world without a NOOP
  (Toy Text, MiniGrid, Tetris, where nothing happens until a decision is taken)
  makes the identity transition, the context frame held. The five branches of a
  context share this one request, so the control scores one case a context
  (its first branch, :func:`scored_cases`);
- ``shuffled``: the case's own actions in another order, chosen with a seed
  from the distinct reorderings (:data:`SHUFFLE_SEED` and the case id), scored
  against the simulator's frames for that order. It tests whether a model
  follows the order of its actions. A case whose actions are all the same has
  no other order, and one whose reordering ends the episode before its last
  action has no full target: both are unavailable.

Each target is derived from the simulator (:class:`vical.wm.sim.ContextSim`)
from the case's origin, so it can be re-derived when a run is re-scored. The
model is told the control's actions (the request's ``intervention``), as in
any other request of the protocol.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

from vical.wm.cases import NO_ACTION, Case, load_frames
from vical.wm.sim import BranchEndedError, ContextSim, Frame, task_by_id

INTERVENTIONS = ("own", "noop", "shuffled")
SHUFFLE_SEED = 20

# the target each control is scored against, and what it tests (the report prints these)
TARGETS: dict[str, tuple[str, str]] = {
    "own": (
        "the simulator's frames after the case's own intervention",
        "fidelity to the requested change",
    ),
    "noop": (
        "the simulator left alone: its NOOP stepped, or the context frame held where "
        "it has none (identity transition)",
        "leaving the world alone when nothing is done",
    ),
    "shuffled": (
        "the simulator's frames after the case's actions in a seeded different order",
        "following the order of the actions",
    ),
}


@dataclass(frozen=True)
class Target:
    """A control's actions and the simulator's frames after them, or why there are none."""

    intervention: list[str] | None
    frames: list[Frame] | None
    unavailable: str | None = None


def noop_action(case: Case) -> str | None:
    """The name of the environment's NOOP action (first in vocabulary order), or None."""
    env = task_by_id(case.task).env
    if env.noop is None:
        return None
    for name in case.actions:
        if env.actions.get(name) == env.noop:
            return name
    return None


def shuffled_order(case: Case) -> list[str] | None:
    """The case's actions in a seeded order different from its own (None: there is none)."""
    own = tuple(case.intervention)
    orders = sorted({p for p in itertools.permutations(own)} - {own})
    if not orders:
        return None
    return list(random.Random(f"{SHUFFLE_SEED}/{case.id}").choice(orders))


def control_actions(case: Case, control: str) -> tuple[list[str] | None, str | None]:
    """(the control's actions, None) or (None, why the control has no target for this case)."""
    if control == "own":
        return list(case.intervention), None
    if control == "noop":
        name = noop_action(case) or NO_ACTION
        return [name] * len(case.intervention), None
    if control == "shuffled":
        order = shuffled_order(case)
        if order is None:
            return None, "every action is the same: no other order"
        return order, None
    raise ValueError(f"control {control!r} is not one of {', '.join(INTERVENTIONS)}")


def scored_cases(cases: list[Case], control: str) -> list[Case]:
    """The cases a run under ``control`` scores: one per distinct request. Under
    ``noop`` every branch of a context sends the same request, so only each context's
    first case (in case order) is scored; otherwise every case."""
    if control != "noop":
        return list(cases)
    seen: set[str] = set()
    out = []
    for c in cases:
        if c.group not in seen:
            seen.add(c.group)
            out.append(c)
    return out


def is_noop(case: Case, actions: list[str]) -> bool:
    """Whether ``actions`` take no decision at every step (the noop control's request)."""
    name = noop_action(case)
    return bool(actions) and all(a in (NO_ACTION, name) for a in actions)


def simulate(case: Case, actions: list[str]) -> list[Frame]:
    """The simulator's frames after each of ``actions`` from the case's context state
    (left alone, :meth:`vical.wm.sim.ContextSim.play_noop`, when they take no decision)."""
    with ContextSim(case.origin, snapshot=False) as sim:
        if is_noop(case, actions):
            return sim.play_noop(len(actions))
        frames, _ = sim.play(actions)
    return frames


def control_target(case: Case, control: str, folder: Path | None = None) -> Target:
    """The control's actions and target for ``case``.

    For ``own`` the target is the stored truth when ``folder`` (the case folder) is
    given, else the simulator's replay of the case's intervention.
    """
    actions, why = control_actions(case, control)
    if actions is None:
        return Target(None, None, why)
    if control == "own" and folder is not None:
        return Target(actions, load_frames(folder, case.truth_frames))
    if control == "noop":
        with ContextSim(case.origin, snapshot=False) as sim:
            return Target(actions, sim.play_noop(len(actions)))
    try:
        return Target(actions, simulate(case, actions))
    except BranchEndedError:
        return Target(None, None, f"the {control} actions end the episode before the last one")
