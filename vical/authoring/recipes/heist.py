"""Heist demo clips: search-expert runs (keys, locks, the gem) on unused levels, and a
thief who walks up to a locked door without its key and is stopped by it.

Heist has no death; what fails a task is running out of moves without a key and
its lock opened. The failure clip shows the rule that matters for that: a lock
only opens with the key of its colour.
"""

from __future__ import annotations

import random
from typing import cast

import numpy as np

from vical.authoring.recipes._procgen import ProcgenRecipe
from vical.envs.environment import VicalEnv
from vical.envs.games.heist import HEIST_KEY, HEIST_LOCKED_DOOR, HEIST_WALL
from vical.envs.games.heist import Adapter as HeistAdapter
from vical.envs.procgen import grid_distances

MOVES = {"Left": (-1, 0), "Right": (1, 0), "Up": (0, 1), "Down": (0, -1)}
PUSHES = 3  # decisions spent pushing against the locked door once there


def _toward_lock(env: VicalEnv) -> tuple[int, str] | None:
    """(grid steps left, move) toward the nearest locked door whose key the thief lacks.

    Steps are counted over floor with walls, keys and the other locks blocked, so
    the walk never picks up a key; the move heads for the centre of the next cell on
    that route (the door itself once next to it). None if no such door is reachable.
    """
    ad = cast(HeistAdapter, env.adapter)
    st = ad.state()
    _, _, has = ad._keys_doors()
    a = st.agent
    ax, ay = int(a.x), int(a.y)
    floor = st.grid != HEIST_WALL
    for e in [*st.of_type(HEIST_KEY), *st.of_type(HEIST_LOCKED_DOOR)]:
        floor[int(e.y), int(e.x)] = False
    best = None
    for d in st.of_type(HEIST_LOCKED_DOOR):
        if has[d.theme]:
            continue
        cell = floor.copy()
        cell[int(d.y), int(d.x)] = True
        dist = grid_distances(cell, (int(d.x), int(d.y)))
        n = dist[ay, ax]
        if not np.isfinite(n) or (best is not None and n >= best[0]):
            continue
        if n <= 1:
            nx, ny = int(d.x), int(d.y)
        else:  # the neighbouring cell one step nearer
            nx, ny = min(
                ((ax + dx, ay + dy) for dx, dy in MOVES.values()),
                key=lambda c: (
                    dist[c[1], c[0]]
                    if 0 <= c[0] < dist.shape[1] and 0 <= c[1] < dist.shape[0]
                    else np.inf
                ),
            )
        dx, dy = nx + 0.5 - a.x, ny + 0.5 - a.y
        move = (
            ("Right" if dx > 0 else "Left") if abs(dx) >= abs(dy) else ("Up" if dy > 0 else "Down")
        )
        best = (int(n), move)
    return best


def walk_into_lock(env: VicalEnv, rng: random.Random, t: int) -> str | None:
    """Follow the route to the nearest locked door whose key the thief lacks, then push
    against it a few times; None once done (or if no such door can be reached)."""
    if t == 0:
        walk_into_lock.pushes = 0  # type: ignore[attr-defined]
    way = _toward_lock(env)
    if way is None:
        return None
    n, move = way
    if n <= 1:
        if walk_into_lock.pushes >= PUSHES:  # type: ignore[attr-defined]
            return None
        walk_into_lock.pushes += 1  # type: ignore[attr-defined]
    return move


walk_into_lock.pushes = 0  # type: ignore[attr-defined]

RECIPE = ProcgenRecipe(
    wins=3,
    win_len=(14, 45),
    horizon=60,
    width=12,
    midway_len=(10, 36),
    fail_policy=walk_into_lock,
    fail_len=14,
    fails=1,
    fail_tries=1,
    fail_limit=80,
    fail_label="Time Out",
    target_groups=False,  # targets scale the score; labels (gem, or two milestones) are shared
    fail_note=(
        "scripted failure: follow the grid route (keys avoided) to a locked door without its "
        "key and push against it: the lock stays shut and the clip runs out of time"
    ),
)
