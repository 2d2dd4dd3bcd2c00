"""Frostbite: ice floes reached as events, a calibrated death penalty, early Victory.

Each jump onto a row of white ice floes turns the row blue, adds a block to
the igloo and pays 10 points (level 1); these small rewards are counted as
"floes reached". The score is the capped share of the ``floes`` target; when a
life is lost (which ends the episode, Table 7) the calibrated ``death_penalty``
is subtracted from the score. Reaching the target ends the episode with the
label Victory, and that is also the pass rule.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter, weighted_policy
from vical.envs.core import Tick
from vical.envs.scoring import EventCounter, clamp
from vical.spec import EnvSpec

LANDING_MAX = 90  # floe rewards are 10 x level; larger rewards are igloo or catch bonuses


class Adapter(ALEAdapter):
    def start(self) -> None:
        self.floes = EventCounter(self.task.target("floes"))
        self.lives0 = int(self.ale.lives())
        self.died = False

    def on_tick(self, tick: Tick) -> None:
        if 0 < tick.reward <= LANDING_MAX:
            self.floes.add(1)
        if int(self.ale.lives()) < self.lives0 or tick.terminated:
            self.died = True

    def score(self) -> float:
        s = self.floes.score()
        if self.died:
            s -= self.task.target("death_penalty")
        return clamp(s)

    def passed(self) -> bool:
        return self.floes.count >= self.floes.target

    def won(self) -> bool:
        return self.passed()

    def progress(self) -> dict[str, Any]:
        return {"floes": self.floes.count, "died": self.died}


# human-init preload length (decisions) per variant
LENGTHS: dict[str, int] = {"floes-a": 5, "floes-b": 8}  # floes-c replays Figure 5

# Seeded hopper: mostly jumps between rows, sometimes walks or waits.
policy = weighted_policy(
    ["Down", "Up", "Down+Right", "Down+Left", "Up+Right", "Up+Left", "Right", "Left", "NOOP"],
    (4, 2, 2, 2, 1, 1, 1, 1, 2),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic preloads: deathless seeded hopping from each variant's own skip."""
    from vical.authoring.search import prefix_streams

    return prefix_streams(env_spec, Adapter, LENGTHS, policy, seed=11)


INIT_STRATEGY = (
    "deathless seeded hopping between floe rows (clone/restore rewinds whenever a life "
    "would be lost), a few decisions long so the player stands among moving floes"
)
