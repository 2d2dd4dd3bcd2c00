"""Demo clips of CustomBreakout: the ball tracker clearing the row, and a lost ball.

Every task of the environment starts from seed 41 (the base task at the serve,
the human-init tasks somewhere in its opening), so the clips start from other
seeds, where the paddle stands elsewhere and the serve goes the other way.
Per brick-column setting (2 or 3 bricks: the clips must replay on the task's
own row) the pool holds

- a whole game: Fire, then the tracker until the row is cleared;
- the tracker joined after the first brick broke, to the end of the row;
- the tracker joined after all but one brick broke, to the last brick;
- a failure: the tracker keeps the ball in play, then the paddle slides away
  from it and the ball falls past (the single life is lost: Terminated).

The tracker is :func:`vical.envs.breakout.track_ball`, the scripted player of
the human-init openings and of ``tests/test_breakout.py``, with its aim (the
paddle's offset from the ball, which sets the rebound angle) chosen per clip
as the first of a fixed list that clears the row soonest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from vical.authoring.plan import ClipPlan, Pool, gathered, group_pools, variant_task
from vical.envs.breakout import BALL, NATIVE_NAMES, BreakoutGame, track_ball
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec

# seeds no task uses, tried in this order (all tasks use 41)
SEEDS = (2, 3, 5, 6, 8, 10, 12, 13, 17, 19, 23)
AIMS = (2, 0, -2, 4, -4)
LIMIT = 200

TRACKER = (
    "scripted expert: paddle tracker aiming {aim:+d} units off the ball's column "
    "(vical.envs.breakout.track_ball), from {start}"
)
FAIL = (
    "scripted failure: the tracker (aim {aim:+d}) keeps the ball in play from the serve, then "
    "the paddle slides {side} away from the falling ball, which drops past it"
)


def _game(seed: int, columns: int) -> BreakoutGame:
    g = BreakoutGame(columns=columns)
    g.reset(seed)
    return g


def _tracked(seed: int, columns: int, aim: int) -> tuple[list[str], list[int]] | None:
    """The tracker's whole game from the serve, and the step index of every broken brick;
    None if the ball is lost or the row is not cleared within ``LIMIT`` steps."""
    g = _game(seed, columns)
    names, breaks = [], []
    for t in range(LIMIT):
        a = track_ball(g, aim)
        if g.step(a):
            breaks.append(t)
        names.append(NATIVE_NAMES[a])
        if g.over:
            return (names, breaks) if g.won else None
    return None


def _best_run(seed: int, columns: int) -> tuple[int, list[str], list[int]] | None:
    """(aim, actions, brick steps) of the aim that clears the row soonest from this seed."""
    best = None
    for aim in AIMS:
        run = _tracked(seed, columns, aim)
        if run is not None and (best is None or len(run[0]) < len(best[1])):
            best = (aim, *run)
    return best


def _failure(seed: int, columns: int, aim: int) -> tuple[list[str], list[str]] | None:
    """Warm-up and clip actions: the tracker until the first rebound off a brick, then the
    paddle moves away from the ball once it is falling in the lower half, until it is lost."""
    g = _game(seed, columns)
    warm: list[str] = []
    while not g.over and len(warm) < LIMIT:
        a = track_ball(g, aim)
        broken = g.step(a)
        warm.append(NATIVE_NAMES[a])
        if broken:
            break
    if g.over:
        return None
    # keep tracking until the ball, on its way down, passes the middle of the field
    clip: list[str] = []
    while not g.over and not (g.vy > 0 and g.ball_y > 30):
        a = track_ball(g, aim)
        g.step(a)
        clip.append(NATIVE_NAMES[a])
    paddle_mid = g.paddle_x + 7
    away = "Left" if g.ball_x + BALL / 2 > paddle_mid else "Right"
    native = {v: k for k, v in NATIVE_NAMES.items()}[away]
    while not g.over and len(clip) < 40:
        g.step(native)
        clip.append(away)
    if not g.lost:
        return None
    # the clip opens a few steps before the paddle turns away
    cut = max(0, len(clip) - 16)
    return warm + clip[:cut], clip[cut:]


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
    pools = group_pools(spec, fail_every=True)  # one life: losing the ball ends it
    for clips in pools:
        columns = int(variant_task(spec, clips.on).env_kwargs["columns"])
        prefix = f"{spec.env}-cols{columns}"
        seeds = iter(SEEDS)
        # (name, how many bricks are broken when the clip joins: 0 = from the serve)
        kinds = [("whole-row", 0), ("from-brick1", 1), ("last-brick", columns - 1)]
        if columns == 2:  # after one brick is already the last brick
            kinds.pop(1)
        for kind, after in kinds:
            for seed in seeds:
                run = _best_run(seed, columns)
                if run is None:
                    continue
                aim, acts, breaks = run
                k = 0 if after == 0 else breaks[after - 1] + 1
                start = (
                    "the serve" if k == 0 else f"the step after brick {after} of {columns} broke"
                )
                note = TRACKER.format(aim=aim, start=start)
                if clips.add(f"{prefix}-seed{seed}-{kind}", seed, acts[:k], acts[k:], note):
                    break
        for seed in seeds:
            run = _best_run(seed, columns)
            aim = run[0] if run else AIMS[0]
            fail = _failure(seed, columns, aim)
            if fail is None:
                continue
            init, acts = fail
            note = FAIL.format(aim=aim, side=acts[-1].lower())
            if clips.add(f"{prefix}-seed{seed}-ball-lost", seed, init, acts, note, fail=True):
                break
    return gathered(pools)


def _tracker(aim: int) -> Callable[[VicalEnv], str]:
    """The ball tracker with ``aim`` as a per-decision player (NOOP where the task's
    vocabulary lacks the move)."""

    def pick(env: VicalEnv) -> str:
        name = NATIVE_NAMES[track_ball(cast(Any, env.adapter).game, aim)]
        return name if name in env.actions else "NOOP"

    return pick


# benchmarks/policy_audit.py: this game's expert, and its players in the order tried
AUDIT_EXPERT = "scripted ball tracker"
AUDIT_POLICIES: list[tuple[str, Callable[[VicalEnv], str]]] = [
    (f"tracker aim {aim:+d}", _tracker(aim)) for aim in (0, *(a for a in AIMS if a))
]
