"""Berzerk demo clips, per game variation (ALE mode): leaving the room, and robots shot
with the life kept.

Berzerk passes two ways: walking out of the room through a gap in its outer wall
(the room's own objective; the episode ends at once as a Victory), or keeping
the life to the step limit with enough points. Every mode gets one exit clip,
and that clip opens every package of the mode's tasks, so an agent sees the main
objective first.

The exit expert (:func:`exit_walk`) is a breadth-first search over the eight
joystick directions on the decision simulator: one emulator state is kept per
player position (RAM bytes 19 and 11), decisions that cost the life are
dropped, and the search stops at the first decision after which the room
counter (RAM byte 92) has moved with the life kept. So the clip is a
shortest walk, in decisions, through the nearest open gap that the robots and
walls leave passable (shortest among the walks the search keeps) (in every mode that walk needs no shot). It starts nine
skipped frames after the mode's task opening (the points clips start seven
frames after it, the failures five); a walk shorter than 10 or longer than 40
decisions is not used.

The points clips come from the group's life-safe beam search (see
:mod:`vical.authoring.recipes._ale`), which only keeps action lists that live
through the whole clip; one clip from a shifted start and one from a
warmed-up start per mode. The warm-ups are beam-search play as well: with
every action held for four slots, seeded random walks run into walls faster
than rewinding can save them. None of these leaves its room, so each runs to
its own step limit. Survival is part of the pass, so the failure clip (Right
held, walking into the electrified maze wall or a robot without stopping) goes
second into every package; the points clips follow while the package's frame
budget has room for them.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded walks, with the quiet-NOOP filter off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vical.authoring.plan import (
    ClipPlan,
    Pool,
    group_tag,
    rotate,
    start_hash,
    task_start_hashes,
    variant_task,
)
from vical.authoring.recipes._ale import ale_expert, ale_recipe, ale_start, beam_recipe
from vical.authoring.search import Viable, dense_starts, screen_viable
from vical.demos.experts import ExpertResult
from vical.envs.ale import JOYSTICK
from vical.envs.games.berzerk import ROOM_BYTE
from vical.spec import EnvSpec, TaskSpec

# RAM bytes of the player's position (horizontal, vertical)
PLAYER_X, PLAYER_Y = 19, 11
DIRECTIONS = list(JOYSTICK)
# (extra skipped frames, warm-up decisions) of the exit clip's start, and its length limits
EXIT_START = (9, 0)
EXIT_MIN, EXIT_MAX = 10, 40

# human-init walks: length (decisions) per variant, moves, and the probes that rate
# where a walk ends
WALK_LENGTHS = {
    "mode1-walk": 3,
    "mode3-walk": 5,
    "mode6-walk": 7,
    "mode9-walk": 9,
    "mode17-walk": 11,
}
WALK_ACTIONS = [
    "Up",
    "Down",
    "Left",
    "Right",
    "Up+Right",
    "Down+Left",
    "Right+Shoot",
    "Left+Shoot",
    "Up+Shoot",
    "NOOP",
]
PROBES = ["NOOP", "Right+Shoot", "Left+Shoot", "Up+Shoot", "Down+Shoot", "Right"]

POINTS = beam_recipe(
    None,  # warmed up by the beam itself
    # (extra skipped frames, warm-up decisions, clip decisions). Most modes hold a single
    # task; the points clips are kept short so that the frame budget of a package still
    # has room for one after the exit and failure clips.
    wins=((7, 0, 22), (7, 6, 28)),
    fail_action="Right",
    fail_start=(5, 2),
    fail_len=10,
    fail_note=(
        "scripted failure: Right held without stopping until the player runs into the "
        "electrified wall (or a robot) and the life is lost"
    ),
    fail_every=True,  # a lost life fails the task whatever the points
)

EXIT_NOTE = (
    "search expert: breadth-first search over the eight joystick directions with the "
    "emulator's cloneState/restoreState, one state per player position (RAM bytes 19 and "
    "11), life-losing decisions dropped, until the room counter (RAM byte 92) moves with "
    "the life kept: the shortest walk out of the room (vical.demos.recipes.berzerk.exit_walk)"
)


def exit_walk(sim: Any, depth: int = EXIT_MAX) -> list[str]:
    """The shortest walk (at most ``depth`` decisions) out of the room with the life kept,
    or [] if there is none; the sim is left where it started.

    Breadth-first over :data:`DIRECTIONS` in that order, one state per player
    position (the first one reached), so the search is deterministic.
    """
    root = sim.clone()
    room0 = int(sim.ram()[ROOM_BYTE])
    ram = sim.ram()
    seen = {(int(ram[PLAYER_X]), int(ram[PLAYER_Y]))}
    frontier: list[tuple[list[str], Any]] = [([], root)]
    try:
        for _ in range(depth):
            nxt = []
            for walk, state in frontier:
                for name in DIRECTIONS:
                    sim.restore(state)
                    o = sim.step(name)
                    if o.ended or o.life_lost:
                        continue
                    ram = sim.ram()
                    if int(ram[ROOM_BYTE]) != room0:
                        return [*walk, name]
                    key = (int(ram[PLAYER_X]), int(ram[PLAYER_Y]))
                    if key not in seen:
                        seen.add(key)
                        nxt.append(([*walk, name], sim.clone()))
            if not nxt:
                break
            frontier = nxt
        return []
    finally:
        sim.restore(root)


def _exit_play(sim: Any, n: int) -> list[str]:
    walk = exit_walk(sim, min(n, EXIT_MAX))
    return walk if EXIT_MIN <= len(walk) <= EXIT_MAX else []


def _exit_expert(t: TaskSpec) -> ExpertResult | None:
    """The exit walk from the clip's start, replayed on the task: None unless it ends in
    Victory (a room change with the life kept)."""
    res = ale_expert(t, _exit_play, EXIT_MAX)
    return res if res.actions and res.outcome == "Victory" else None


def _points_recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    """The plan of the points clips: :func:`vical.authoring.recipes._ale.ale_recipe` with
    :data:`POINTS` (this module defines ``recipe`` rather than ``RECIPE``, to add the
    exit clips)."""
    return ale_recipe(spec, POINTS)


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    """Points clips and failures per mode (as before), plus one exit clip per mode that
    goes first into every package of that mode.

    Every task gets a pool of its own, so the exit clip is never rotated away
    from the front: the mode's points clips follow it rotated by the task's
    place in its mode (as :func:`vical.authoring.plan.assign_pools` would), the
    failure second.
    """
    plans, groups = _points_recipe(spec)
    taken = task_start_hashes(spec)
    for p in plans:
        # an unreachable start (None) is never claimed anyway (see claim_start)
        h = start_hash(spec, p.on, p.seed, p.initial_skip, p.init_actions)
        if h is not None:
            taken.add(h)
    pools: list[Pool] = []
    shift, warm_n = EXIT_START
    for gi, group in enumerate(groups):
        on = group.variants[0]
        base = variant_task(spec, on)
        seed0, skip0 = base.variant.seed, base.variant.initial_skip
        tag = group_tag(spec, on)
        prefix = f"{spec.env}-{tag}" if tag else spec.env
        start = ale_start(spec, POINTS, on, seed0, skip0 + shift, warm_n, 10 * gi + 5, taken)
        exits = []
        if start is not None:
            skip, init = start
            cid = f"{prefix}-k{skip}-w{len(init)}-exit"
            plans.append(
                ClipPlan(
                    cid,
                    _exit_expert,
                    EXIT_NOTE,
                    seed0,
                    skip,
                    init_actions=init,
                    horizon=EXIT_MAX,
                    on=on,
                )
            )
            exits.append(cid)
        for i, v in enumerate(group.variants):
            pools.append(
                Pool(
                    variants=[v],
                    wins=[*exits, *rotate(group.wins, i)],
                    fails=rotate(group.fails, i // 2),
                    fail_every=True,
                )
            )
    return plans, pools


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded walks ending where the next moves matter.

    Robots in Berzerk destroy themselves on walls and on each other's bolts
    whatever the player does, so points under do-nothing play are part of the
    game here and the quiet-NOOP filter is off. A walk from whose end a constant
    action or an action cycle of the reflex screen passes the task is skipped
    (``viable``: the check, default :func:`~vical.authoring.search.screen_viable`).
    """
    check = viable or screen_viable(env_spec)
    return dense_starts(
        env_spec,
        WALK_ACTIONS,
        WALK_LENGTHS,
        PROBES,
        probe_horizon=3,
        candidates=12,
        quiet_noop=False,
        viable=check,
    )


def _exit_search(task: TaskSpec) -> list[str]:
    """The exit walk searched over the task's whole budget."""
    return ale_expert(task, _exit_play, task.max_steps).actions


# benchmarks/policy_audit.py: this game's expert, and its plans in the order tried
AUDIT_EXPERT = "ALE search for the room exit"
AUDIT_PLANS: list[tuple[str, Callable[[TaskSpec], list[str]]]] = [("exit search", _exit_search)]
