"""Play on a started :class:`~vical.envs.environment.VicalEnv` (the task's own score, pass and
ending rules): greedy look-ahead over seeded rollouts (:func:`lookahead_play`) and beam
search by the task's score (:func:`scored_beam`, on Procgen :func:`procgen_beam` and
:func:`procgen_judged_beam`). Saving and restoring is :meth:`VicalEnv.snapshot` /
:meth:`VicalEnv.restore` (the adapter's own state in :func:`scored_beam`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vical.envs.environment import VicalEnv
from vical.spec import TaskSpec

if TYPE_CHECKING:
    from vical.envs.ale import ALEAdapter


def progress_value(env: VicalEnv) -> float:
    """The raw scoring quantity of an ALE adapter (``total``)."""
    return float(cast("ALEAdapter", env.adapter).total)


def rollout(
    env: VicalEnv,
    actions: Sequence[str],
    value: Callable[[VicalEnv], float] = progress_value,
    death_penalty: float = 1000.0,
) -> float:
    """Play ``actions`` from the current state; progress minus a penalty if the episode fails."""
    for a in actions:
        if env.done:
            break
        s = env.step(a)
        if s.terminated and s.outcome != "Victory":
            return value(env) - death_penalty
    return value(env)


def lookahead_play(
    env: VicalEnv,
    n: int,
    candidates: Sequence[str] | None = None,
    depth: int = 6,
    seed: int = 0,
    value: Callable[[VicalEnv], float] = progress_value,
    death_penalty: float = 1000.0,
    tails: int = 1,
) -> list[str]:
    """Search-based expert: greedy one-step choice over seeded random rollouts of ``depth``.

    Each candidate action is followed by the same ``tails`` seeded random
    continuations and valued by the best of them. Plays at most ``n``
    decisions from the env's current state and returns the actions taken (the
    env is left at the state they reach).
    """
    rng = random.Random(seed)
    names = list(candidates or env.action_names)
    taken: list[str] = []
    for _ in range(n):
        if env.done:
            break
        root = env.snapshot()
        conts = [[rng.choice(names) for _ in range(depth - 1)] for _ in range(tails)]
        best, best_a = None, names[0]
        for a in names:
            v = None
            for tail in conts:
                env.restore(root)
                r = rollout(env, [a, *tail], value, death_penalty)
                v = r if v is None else max(v, r)
            if best is None or (v is not None and v > best):
                best, best_a = v, a
        env.restore(root)
        env.step(best_a)
        taken.append(best_a)
    return taken


def scored_beam(
    env: VicalEnv,
    width: int = 24,
    max_decisions: int | None = None,
    seed: int = 0,
    key: Callable[[], Any] | None = None,
    heuristic: Callable[[], float] | None = None,
) -> tuple[list[str], float, bool, str | None]:
    """Beam search over canonical actions on a started env, by the task's own score.

    From the env's state, every beam entry is expanded with every action (one
    decision each). Children that end in failure are dropped; the rest are
    ranked by (score, passed, ``heuristic()``) with a fixed-seed random
    tie-break and deduplicated by (``key()``, score). The first child that ends
    in Victory (or passes at full score) is returned; otherwise the best leaf
    at the horizon. Returns (actions, score, passed, ending).
    """
    rng = np.random.default_rng(seed)
    horizon = min(env.max_steps, max_decisions or env.max_steps)
    key = key or (lambda: None)
    heuristic = heuristic or (lambda: 0.0)
    steps0 = env.steps

    def decide(name: str) -> tuple[str | None, float, bool]:
        # one decision without frame hashing (VicalEnv.step does the same plus a sha256)
        ending = env.decide(name, record=False).ending
        env.steps += 1
        if ending is None and env.steps >= env.max_steps:
            ending = "Time Out"
        return ending, env.score(), env.passed()

    # (the adapter's own state, opaque to the Adapter API, and the decision count)
    def snap() -> tuple[Any, int]:
        return env.adapter.snapshot(), env.steps

    def back(s: tuple[Any, int]) -> None:
        env.adapter.restore(s[0])
        env.steps = s[1]

    beam: list[tuple[Any, list[str]]] = [(snap(), [])]
    best: tuple[list[str], float, bool, str | None] = ([], env.score(), env.passed(), None)
    try:
        for _ in range(horizon):
            children = []
            seen: set[tuple[Any, float]] = set()
            for s, acts in beam:
                for name in env.action_names:
                    back(s)
                    ending, score, passed = decide(name)
                    seq = [*acts, name]
                    if ending == "Victory" or (passed and score >= 100.0):
                        return seq, score, passed, ending
                    if ending not in (None, "Time Out"):
                        continue
                    k = (key(), score)
                    if k in seen:
                        continue
                    seen.add(k)
                    rank = (score, passed, heuristic(), rng.random())
                    children.append((rank, snap(), seq, ending))
            if not children:
                break
            children.sort(key=lambda c: c[0], reverse=True)
            beam = [(c[1], c[2]) for c in children[:width]]
            (score, passed, _, _), _, seq, ending = children[0]
            if (score, passed, len(seq)) > (best[1], best[2], len(best[0])):
                best = (seq, score, passed, ending)
            if ending == "Time Out":
                break
        return best
    finally:
        env.steps = steps0


@dataclass
class SearchResult:
    actions: list[str]
    score: float
    passed: bool
    outcome: str | None


def procgen_beam(
    task: TaskSpec, width: int = 24, max_decisions: int | None = None, seed: int = 0
) -> SearchResult:
    """:func:`scored_beam` on a Procgen task, guided by the game's own search key and heuristic.

    Runs on a twin of the task's env that skips the 512x512 rendering (the game
    logic is the same; the tests replay found actions in the rendered env),
    from the task's start state. Deterministic for a given task, width and seed.
    """
    from vical.envs.procgen import make_adapter

    adapter = make_adapter(task, render=False)
    env = VicalEnv(task, adapter)
    try:
        env.reset()
        found = scored_beam(
            env, width, max_decisions, seed, key=adapter.search_key, heuristic=adapter.heuristic
        )
        return SearchResult(*found)
    finally:
        env.close()


def procgen_judged_beam(
    task: TaskSpec,
    judge: Callable[[Any], tuple[Any, float]],
    width: int = 32,
    max_decisions: int | None = None,
    seed: int = 0,
) -> SearchResult:
    """:func:`procgen_beam` with the search key and heuristic given by the caller.

    ``judge(adapter)`` returns (search key, heuristic) of the adapter's current
    state in one go (one parse of the serialised state). Use it when the game's
    own :meth:`~vical.envs.procgen.ProcgenAdapter.search_key` merges states the
    objective needs apart, e.g. a shot in flight against none.
    """
    from vical.envs.procgen import make_adapter

    adapter = make_adapter(task, render=False)
    env = VicalEnv(task, adapter)
    memo: dict[str, tuple[Any, float]] = {}

    def judged() -> tuple[Any, float]:
        # scored_beam asks for the key and then the heuristic of the same state
        if "now" not in memo:
            memo["now"] = judge(adapter)
        return memo["now"]

    def key() -> Any:
        memo.clear()
        return judged()[0]

    def heuristic() -> float:
        return judged()[1]

    try:
        env.reset()
        found = scored_beam(env, width, max_decisions, seed, key=key, heuristic=heuristic)
        return SearchResult(*found)
    finally:
        env.close()
