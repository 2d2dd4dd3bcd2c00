"""Bossfight demo clips: the boss's shield dropping and the boss shot down on unused levels,
and the ship destroyed by the boss's fire.

The tasks have two targets (one broken round for most, the whole boss for seed49),
so clips are planned per label group; levels whose boss has one round of one or
two hits are chosen, and destroying such a boss is a Victory under either target.
"""

from __future__ import annotations

from vical.authoring.recipes._procgen import ProcgenRecipe, bossfight_rounds, random_held
from vical.envs.procgen import GameState


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
