"""Freeway demo clips and human-init generator.

The clips: the three-deep look-ahead expert (:func:`expert_actions`) until the chicken
crosses; the failure holds Up until a car knocks the chicken back. The human-init
generator (:func:`generate_init_actions`) climbs with the same look-ahead, mixed with
seeded safe waiting moves, up to a per-variant height.
"""

from __future__ import annotations

import random

from vical.authoring.recipes._ale import AleRecipe, hold, scripted
from vical.authoring.sim import DecisionSim, human_init_variants
from vical.envs.games.freeway import CHICKEN_Y, Adapter
from vical.spec import EnvSpec

# -- expert play ----------------------------------------------------------


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


def _win(sim: DecisionSim, n: int, seed: int) -> list[str]:
    return expert_actions(sim, limit=n)


RECIPE = AleRecipe(
    win=_win,
    warm=scripted(lambda sim: safe_step(sim, depth=2)),
    wins=((7, 0, 60), (7, 14, 50), (19, 4, 56)),
    fail_policy=hold("Up"),
    fail_event=lambda sim, o, before: int(sim.ram()[14]) < int(before[14]) - 8,
    fail_start=(31, 0),
    fail_len=14,
    fail_after=3,
    win_note=(
        "search expert: exhaustive three-deep look-ahead over Up / NOOP / Down with the emulator's "
        "cloneState/restoreState until the chicken crosses (vical.authoring.recipes.freeway.expert_actions)"
    ),
    fail_note="scripted failure: Up held without looking until a car knocks the chicken back to the curb",
)


# -- human-init generation ------------------------------------------------

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
