"""Pong demo clips and human-init generator.

The clips: the RAM ball tracker (:func:`track`); the failure holds NOOP until the
opponent scores. The human-init generator (:func:`generate_init_actions`) plays the
same tracker, with seeded random paddle moves, up to a decision point.
"""

from __future__ import annotations

import random

from vical.authoring.recipes._ale import AleRecipe, hold, scripted
from vical.authoring.sim import DecisionSim, human_init_variants
from vical.envs.games.pong import BALL_X, BALL_Y, PADDLE_Y, Adapter
from vical.spec import EnvSpec

PADDLE_CENTRE = 8  # ball y that lines up with the paddle's middle, relative to its top


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


RECIPE = AleRecipe(
    win=scripted(track),
    warm=scripted(track),
    wins=((7, 0, 30), (7, 20, 26)),
    fail_policy=hold("NOOP"),
    fail_event=lambda sim, o, before: o.reward < 0,
    fail_start=(7, 8),
    fail_len=14,
    fail_after=2,
    win_note=(
        "scripted expert: RAM ball tracker that moves the paddle's middle toward the ball's "
        "height (vical.authoring.recipes.pong.track)"
    ),
    fail_note="scripted failure: NOOP held, the paddle stays put and the opponent scores",
)


# -- human-init generation ------------------------------------------------


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
