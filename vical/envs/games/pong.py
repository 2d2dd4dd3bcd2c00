"""Pong: RAM-based ball/paddle tracking; balls returned are the scored events.

RAM layout used (read from the running game): byte 49 ball x (grows toward
the player's paddle on the right, about 186 at the paddle), byte 54 ball y,
byte 51 player paddle y (top edge; smaller is higher). The ball's horizontal
direction only reverses at a paddle, so a reversal from rightward to leftward
on the player's half of the court (pauses at the paddle are skipped), with no
point scored in that step, is a return by the player.

Score: capped count of returns against the calibrated target. Pass: at least
``pass_returns`` returns. No life loss exists; the episode always runs to the
horizon.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import EventCounter
from vical.spec import EnvSpec

if TYPE_CHECKING:
    from vical.authoring.sim import DecisionSim

BALL_X, BALL_Y, PADDLE_Y = 49, 54, 51
PLAYER_HALF_X = 140  # reversals right of this x happen at the player's paddle
PADDLE_CENTRE = 8  # ball y that lines up with the paddle's middle, relative to its top


class Adapter(ALEAdapter):
    def ball(self) -> tuple[int, int]:
        r = self.ram()
        return int(r[BALL_X]), int(r[BALL_Y])

    def start(self) -> None:
        self.returns = EventCounter(self.task.target("returns"))
        self.points_won = 0
        self.points_lost = 0
        self._x = self.ball()[0]
        self._dir = 0  # sign of the last nonzero horizontal move

    def on_tick(self, tick: Tick) -> None:
        x, _ = self.ball()
        dx = x - self._x
        if tick.reward > 0:
            self.points_won += 1
        elif tick.reward < 0:
            self.points_lost += 1
        elif self._dir > 0 and -16 <= dx < 0 and self._x >= PLAYER_HALF_X:
            self.returns.add(1)
        if tick.reward != 0 or abs(dx) > 16:
            self._dir = 0  # a new serve: no direction to reverse yet
        elif dx != 0:
            self._dir = 1 if dx > 0 else -1
        self._x = x

    def score(self) -> float:
        return self.returns.score()

    def passed(self) -> bool:
        return self.returns.count >= int(self.task.params["pass_returns"])

    def ending(self, native_terminated: bool) -> str | None:
        if not self.tracking:  # initial skip or human-init replay
            return super().ending(native_terminated)
        if native_terminated:
            return "Victory" if self.passed() else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "returns": self.returns.count,
            "points_won": self.points_won,
            "points_lost": self.points_lost,
        }


# -- scripted play and human-init generation -----------------------------


def track(sim: DecisionSim) -> str:
    """Scripted tracker: move the paddle's middle toward the ball's height."""
    r = sim.ram()
    want = int(r[BALL_Y]) - PADDLE_CENTRE
    y = int(r[PADDLE_Y])
    if want < y - 4:
        return "Up"
    if want > y + 4:
        return "Down"
    return "NOOP"


def _approaching(sim: DecisionSim) -> bool:
    """Ball on the opponent's half and moving toward the player (a dense decision)."""
    x0 = int(sim.ram()[BALL_X])
    root = sim.clone()
    sim.step("NOOP")
    x1 = int(sim.ram()[BALL_X])
    sim.restore(root)
    return 60 <= x0 <= 120 and x1 > x0


# variant -> (decisions of play before looking for the decision point, share of
# seeded random paddle moves)
RECIPES: dict[str, tuple[int, float]] = {
    "rally1": (4, 0.1),
    "rally2": (14, 0.2),
    "rally3": (26, 0.1),
    "offside": (10, 0.6),
}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic human-init sequences for the Pong human-init variants.

    Strategy: the scripted tracker (with a seeded share of random paddle moves
    for variety) plays the recipe's number of decisions, then keeps tracking
    until the ball is on the opponent's half flying toward the player, so the
    agent's first decision is about the next return.
    """
    from vical.authoring.sim import DecisionSim, human_init_variants

    out: dict[str, list[str]] = {}
    for i, v in enumerate(human_init_variants(env_spec)):
        n, p_random = RECIPES[v.variant]
        sim = DecisionSim(env_spec, v, Adapter)
        rng = random.Random(100 + i)
        actions: list[str] = []
        while len(actions) < n or not _approaching(sim):
            a = track(sim)
            if len(actions) < n and rng.random() < p_random:
                a = rng.choice(["Up", "Down", "NOOP"])
            sim.step(a)
            actions.append(a)
            if len(actions) > n + 60:
                raise RuntimeError(f"pong/{v.variant}: no approaching ball found")
        out[v.variant] = actions
    return out


INIT_STRATEGY = (
    "scripted ball tracker with seeded random paddle moves for a fixed number of decisions, "
    "then tracking until the ball flies toward the player from the far half"
)
