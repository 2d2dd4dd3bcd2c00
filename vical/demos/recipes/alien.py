"""Alien demo clips, and the search helpers every ALE group-A recipe shares.

The group-A recipes (Alien, Assault, Asterix, BattleZone, Berzerk,
ChopperCommand) import :func:`beam_win`, :func:`deathless_walk`, :func:`hold`
and :func:`life_lost` from here. The expert is the life-safe beam search the
game modules' developers used to calibrate the score targets
(:func:`vical.envs.ale_games._group_a.beam_search`), run on the decision
simulator that :mod:`vical.demos.make` hands to a recipe; warm-ups are seeded
deathless random walks over the game's own human-init walk actions.

Alien: counted points (eggs, with the one-shot 500-point bonuses removed)
pass at 75 and end the episode at 150. The clips are beam-search corridor
runs (joystick only, no flame) from a shifted start and two warmed-up starts;
the failure clip stops steering (NOOP) until an alien walks into the crew
member.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from vical.demos.make import AleRecipe
from vical.envs.ale_games._group_a import Outcome, beam_search
from vical.envs.ale_games.alien import WALK_ACTIONS


class DecisionView:
    """A :class:`~vical.envs.ale_games._search.DecisionSim` seen through the interface of
    :class:`vical.envs.ale_games._group_a.Sim`, so ``beam_search`` can drive it.

    Rewards go through the game adapter's own ``reward_filter`` (Alien's bonus
    removal), so the beam ranks by the points the task counts.
    """

    def __init__(self, sim: Any):
        self.sim = sim
        self.adapter = sim.adapter
        self.actions = dict(sim.spec.actions)

    def snapshot(self) -> Any:
        return self.sim.clone()

    def restore(self, state: Any) -> None:
        self.sim.restore(state)

    def decide(self, name: str) -> Outcome:
        o = self.sim.step(name)
        reward = self.adapter.reward_filter(o.reward) if o.reward else 0.0
        return Outcome(reward, o.ended, o.life_lost and not o.ended)


def beam_win(
    width: int = 8, actions: Sequence[str] | None = None
) -> Callable[[Any, int, int], list[str]]:
    """Expert ``win(sim, n, seed)``: the best life-safe ``n``-decision list of a beam search
    (width ``width``, states merged by RAM, ties broken by an RNG seeded with ``seed``)."""

    def win(sim: Any, n: int, seed: int) -> list[str]:
        _value, acts = beam_search(
            DecisionView(sim),
            n,
            width=width,
            actions=list(actions) if actions else None,
            seed=seed,
            full_depth=True,
        )
        return acts

    return win


def deathless_walk(actions: Sequence[str], margin: int = 8) -> Callable[[Any, int, int], list[str]]:
    """Warm-up ``warm(sim, n, seed)``: ``n`` seeded random decisions over ``actions`` that
    never lose a life (rewinds on danger; RuntimeError when no safe way on).

    The walk is played ``margin`` decisions further than it is kept: in some games
    (Asterix) the life counter drops several decisions after the fatal touch, so
    a walk cut right after its last safe-looking decision can leave a doomed
    start. The sim is left after the ``n`` kept decisions, where the caller
    carries on from.
    """
    names = list(actions)

    def warm(sim: Any, n: int, seed: int) -> list[str]:
        from vical.envs.ale_games._search import play_without_dying

        if not n:
            return []
        origin = sim.clone()
        walk = play_without_dying(sim, lambda s, rng: rng.choice(names), n + margin, seed=seed)
        sim.restore(origin)
        for name in walk[:n]:
            sim.step(name)
        return walk[:n]

    return warm


def beam_warm(width: int = 8, margin: int = 8) -> Callable[[Any, int, int], list[str]]:
    """Warm-up ``warm(sim, n, seed)``: the first ``n`` decisions of a life-safe beam-search
    play of ``n + margin`` decisions (for games where random walks keep walking into
    deaths that register too late to rewind); RuntimeError when the beam finds no
    such play. The sim is left after the ``n`` kept decisions."""
    search = beam_win(width)

    def warm(sim: Any, n: int, seed: int) -> list[str]:
        if not n:
            return []
        origin = sim.clone()
        play = search(sim, n + margin, seed)
        if len(play) < n + margin:
            raise RuntimeError(f"no life-safe play of {n + margin} decisions")
        sim.restore(origin)
        for name in play[:n]:
            sim.step(name)
        return play[:n]

    return warm


def hold(name: str) -> Callable[[Any, random.Random], str]:
    """Failure policy: one action held whatever happens."""
    return lambda sim, rng: name


def life_lost(sim: Any, o: Any, before: Any) -> bool:
    """Failure event: the decision cost the life (or ended the game)."""
    return o.life_lost or o.ended


BEAM_NOTE = (
    "search expert: life-safe beam search over all actions with the emulator's "
    "cloneState/restoreState, width {width}, states merged by RAM, the task's counted points as "
    "objective (vical.envs.ale_games._group_a.beam_search)"
)


# The beam plays the joystick only: the crew member keeps walking along a corridor
# by itself, so turns at junctions and NOOP collect the eggs, and the clips do not
# teach spending the limited flame (Shoot) for nothing.
MOVES = ["NOOP", "Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left", "Down+Right"]

RECIPE = AleRecipe(
    win=beam_win(width=8, actions=MOVES),
    warm=deathless_walk(WALK_ACTIONS),
    # (extra skipped frames, warm-up decisions, clip decisions)
    wins=((7, 0, 34), (7, 12, 30), (20, 30, 28)),
    fail_policy=hold("NOOP"),
    fail_event=life_lost,
    fail_start=(9, 6),
    fail_len=16,
    win_note=BEAM_NOTE.format(width=8).replace(
        "over all actions", "over NOOP and the eight joystick directions"
    ),
    fail_note=(
        "scripted failure: NOOP held (no steering, no flame) until an alien catches the crew "
        "member and the life is lost"
    ),
)
