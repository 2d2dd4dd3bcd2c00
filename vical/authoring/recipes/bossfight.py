"""Bossfight demo clips: the boss's shield dropping and the boss shot down on unused levels,
and the ship destroyed by the boss's fire.

The tasks have two targets (one broken round for most, the whole boss for seed49),
so clips are planned per label group; levels whose boss has one round of one or
two hits are chosen, and destroying such a boss is a Victory under either target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vical.authoring.recipes._procgen import ProcgenRecipe, bossfight_rounds, random_held
from vical.authoring.search import procgen_judged_beam
from vical.envs.games.bossfight import BOSSFIGHT_BOSS, BOSSFIGHT_ENEMY_BULLET
from vical.envs.procgen import GameState
from vical.spec import TaskSpec


def _short_fight(st: GameState) -> bool:
    rounds, round_health = bossfight_rounds(st)
    return rounds <= 2 and round_health <= 2


RECIPE = ProcgenRecipe(
    wins=2,
    win_len=(16, 45),
    horizon=60,
    width=16,
    midway_len=(10, 36),
    level_ok=_short_fight,
    fail_policy=random_held(hold=5, among=("NOOP", "Left", "Right", "Up", "Down")),
    fail_len=14,
    fails=2,
    fail_note=(
        "failure clip: seeded random flying without shooting (moves held 1-5 decisions) until "
        "a shot of the boss hits the ship; the clip is the last 14 decisions before that"
    ),
)


# -- a search expert that keeps its shots apart ---------------------------------
PLAYER_BULLET = 1  # entity type of the ship's lasers (procgen's bossfight.cpp)


def shot_judge(adapter: Any) -> tuple[Any, float]:
    """(search key, heuristic) of a bossfight state for
    :func:`vical.authoring.search.procgen_judged_beam`.

    The key is the game's own (rounded ship position and velocity) plus the boss's
    health and the heights of the ship's lasers in flight, so a decision that fires
    is not merged with one that does not. The heuristic is the game adapter's
    (boss health, clearance from enemy shots, lining up below the boss) plus a
    point per laser on course for the boss (below it, within its width)."""
    st = adapter.state()
    a = st.agent
    boss = st.of_type(BOSSFIGHT_BOSS)
    shots = st.of_type(PLAYER_BULLET)
    health = float(boss[0].health) if boss else 0.0
    bullets = st.of_type(BOSSFIGHT_ENEMY_BULLET)
    clear = min((float(np.hypot(b.x - a.x, b.y - a.y)) for b in bullets), default=10.0)
    below = -abs(boss[0].x - a.x) if boss else 0.0
    on_course = (
        sum(1 for s in shots if s.y < boss[0].y and abs(s.x - boss[0].x) < boss[0].rx)
        if boss
        else 0
    )
    key = (
        round(a.x * 2),
        round(a.y * 2),
        round(a.vx * 4),
        round(a.vy * 4),
        round(health),
        tuple(sorted(round(s.y) for s in shots)),
    )
    return key, -10.0 * health + 0.5 * min(clear, 2.0) + below + float(on_course)


def shooting_beam(task: TaskSpec, width: int = 32, seed: int = 0) -> list[str]:
    """Expert actions: :func:`~vical.authoring.search.procgen_judged_beam` with :func:`shot_judge`."""
    return procgen_judged_beam(task, shot_judge, width=width, seed=seed).actions


# experts tried after the recipe's own (benchmarks/policy_audit.py): (variant, task -> actions);
# the beam's key keeps a decision that fires apart from one that does not
EXTRA_EXPERTS: list[tuple[str, Callable[[TaskSpec], list[str]]]] = [
    ("shooting beam width 32", shooting_beam),
]
