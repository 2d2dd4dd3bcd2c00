"""Freeway: RAM-based forward progress of the chicken, halfway pass, crossing = Victory.

RAM byte 14 holds the left (player) chicken's height: 6 on the starting curb,
growing by about 4 per native 4-frame step while Up is held, up to about 176 on
the last lane; reaching the far curb pays +1 and puts the chicken back at 6.
At difficulty 1 a car hit sends the chicken back to the starting curb.

Score: 100 x (best height reached - start height) / (far curb - start height);
a crossing scores 100 and ends the episode with the label Victory. Pass: the
chicken has covered half the distance from its start height to the far curb.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import capped_ratio
from vical.spec import EnvSpec

if TYPE_CHECKING:
    from vical.authoring.sim import DecisionSim

CHICKEN_Y = 14  # RAM address of the player's chicken height
CURB_Y = 6  # height on the starting curb


class Adapter(ALEAdapter):
    def chicken_y(self) -> int:
        return int(self.ram()[CHICKEN_Y])

    def start(self) -> None:
        self.y0 = self.chicken_y()
        self.best = self.y0
        self.crossed = False
        self.hits = 0
        self._last = self.y0

    def on_tick(self, tick: Tick) -> None:
        y = self.chicken_y()
        if tick.reward > 0:
            self.crossed = True
        elif y < self._last - 8:
            self.hits += 1  # knocked back to the curb by a car
        if not self.crossed:
            self.best = max(self.best, y)
        self._last = y

    def goal_y(self) -> float:
        return self.task.target("goal_height")

    def score(self) -> float:
        if self.crossed:
            return 100.0
        return capped_ratio(self.best - self.y0, self.goal_y() - self.y0)

    def passed(self) -> bool:
        halfway = self.y0 + (self.goal_y() - self.y0) * float(self.task.params["pass_fraction"])
        return self.crossed or self.best >= halfway

    def ending(self, native_terminated: bool) -> str | None:
        if not self.tracking:  # initial skip or human-init replay
            return super().ending(native_terminated)
        if self.crossed:
            return "Victory"
        if native_terminated:
            return "Victory" if self.passed() else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "start_height": self.y0,
            "best_height": self.best,
            "crossed": self.crossed,
            "hits": self.hits,
        }


# -- expert play and human-init generation -------------------------------


def _height(sim: DecisionSim) -> int:
    return int(sim.ram()[CHICKEN_Y])


def _branch(sim: DecisionSim, name: str, depth: int, last: int) -> float:
    """Rating of taking ``name`` now with ``depth`` decisions left (crossing > height > knock)."""
    o = sim.step(name)
    y = _height(sim)
    if o.reward > 0:
        return 1000.0 + depth
    if y < last - 8:
        return -1000.0 - depth
    return _search(sim, depth - 1, y)


def _search(sim: DecisionSim, depth: int, last: int) -> float:
    """Best rating reachable in ``depth`` more decisions (crossing > height > knock)."""
    if depth == 0:
        return float(last)
    root = sim.clone()
    best = -1e9
    for name in ("Up", "NOOP", "Down"):
        sim.restore(root)
        best = max(best, _branch(sim, name, depth, last))
        if best >= 1000.0:
            break
    sim.restore(root)
    return best


def safe_step(sim: DecisionSim, depth: int = 3) -> str:
    """Look-ahead expert move: exhaustive search over Up / NOOP / Down ``depth`` deep.

    A branch that makes the crossing is best, then the greatest height at the
    horizon; a branch where a car knocks the chicken back is worst (later
    knocks less bad). Ties favour Up, then NOOP.
    """
    root = sim.clone()
    last = _height(sim)
    best, best_val = "Up", -1e9
    for name in ("Up", "NOOP", "Down"):
        sim.restore(root)
        val = _branch(sim, name, depth, last)
        if val > best_val:
            best, best_val = name, val
    sim.restore(root)
    return best


def expert_actions(sim: DecisionSim, limit: int = 120) -> list[str]:
    """Search-based expert: :func:`safe_step` until the chicken crosses (or ``limit``)."""
    actions: list[str] = []
    while len(actions) < limit:
        a = safe_step(sim)
        actions.append(a)
        if sim.step(a).reward > 0:
            break
    return actions


# variant -> (target height, share of random waiting moves, rng seed). The
# chicken climbs with the look-ahead expert, mixed with seeded random NOOP /
# Down moves that are kept only when no car hits the chicken in the next two
# decisions, until it first stands at or above the target height.
RECIPES: dict[str, tuple[int, float, int]] = {
    "m0-lane2": (30, 0.2, 1),
    "m0-lane3": (50, 0.3, 2),
    "m0-lane4": (66, 0.2, 3),
    "m0-lane5": (86, 0.4, 4),
    "m0-lane6": (102, 0.2, 5),
    "m0-lane7": (118, 0.4, 6),
    "m0-wait": (22, 0.7, 7),
    "m0-drift": (94, 0.5, 8),
    "m2-lane2": (30, 0.2, 11),
    "m2-lane3": (50, 0.3, 12),
    "m2-lane4": (66, 0.2, 13),
    "m2-lane5": (86, 0.4, 14),
    "m2-lane6": (102, 0.2, 15),
    "m2-lane7": (118, 0.4, 16),
    "m2-wait": (22, 0.7, 17),
    "m2-drift": (94, 0.5, 18),
}


def _safe(sim: DecisionSim, name: str) -> bool:
    """True when ``name`` then NOOP leaves the chicken unhurt (and not across)."""
    root = sim.clone()
    last = _height(sim)
    ok = True
    for a in (name, "NOOP"):
        o = sim.step(a)
        y = _height(sim)
        if o.reward > 0 or y < last - 8:
            ok = False
            break
        last = y
    sim.restore(root)
    return ok


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic human-init sequences for every Freeway human-init variant.

    Strategy: from the variant's reset, each decision is either the look-ahead
    expert move (:func:`safe_step`) or, with the recipe's probability, a
    seeded random NOOP / Down kept only if :func:`_safe`; play stops once the
    chicken first reaches the recipe's target height (at most 60 decisions).
    """
    from vical.authoring.sim import DecisionSim, human_init_variants

    out: dict[str, list[str]] = {}
    for v in human_init_variants(env_spec):
        target, p_random, seed = RECIPES[v.variant]
        sim = DecisionSim(env_spec, v, Adapter)
        rng = random.Random(seed)
        actions: list[str] = []
        while _height(sim) < target and len(actions) < 60:
            a = safe_step(sim, depth=2)
            if rng.random() < p_random:
                wait = rng.choice(["NOOP", "NOOP", "Down"])
                if _safe(sim, wait):
                    a = wait
            sim.step(a)
            actions.append(a)
        out[v.variant] = actions
    return out


INIT_STRATEGY = (
    "two-deep exhaustive look-ahead expert (clone/restore, avoids cars) mixed with seeded "
    "safe waiting moves, stopped when the chicken first reaches a per-variant target height"
)
