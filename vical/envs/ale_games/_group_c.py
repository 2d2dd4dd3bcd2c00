"""Search helpers shared by the Riverraid, RoadRunner, Seaquest, Tennis, Trondead and Turmoil modules.

Everything here works on a :class:`~vical.envs.core.VicalEnv` at decision
level (frame skip, NOOP fill and life-loss termination included), so a found
action list replays exactly through ``make_env``:

* :func:`snapshot` / :func:`restore` save and restore the emulator
  (``ale.cloneState``) together with the env's and adapter's bookkeeping.
* :func:`lookahead_play` is the search-based expert: at each decision it
  tries every candidate action followed by a short seeded random rollout and
  keeps the action with the best progress, penalising rollouts that end the
  episode. Used for calibration and by the tests.
* :func:`search_init` builds human-init sequences: seeded random candidate
  sequences, kept only when the replay stays alive and the reached state is a
  *decision point* (doing nothing from there loses the episode soon, while
  some short action plan survives).

All randomness comes from ``random.Random`` seeded by the caller, so every
output is reproducible.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from typing import Any

from vical.envs.ale_games._search import paper_sourced
from vical.envs.core import VicalEnv, frame_sha256
from vical.spec import EnvSpec, TaskSpec, TaskVariant

_SKIP_ATTRS = {"task", "env", "ale"}


def snapshot(env: VicalEnv) -> tuple[Any, dict, dict]:
    """Emulator state plus a copy of the env's and adapter's Python state."""
    ad = env.adapter
    ad_state = {k: copy.deepcopy(v) for k, v in vars(ad).items() if k not in _SKIP_ATTRS}
    env_state = {k: v for k, v in vars(env).items() if k in {"steps", "done", "outcome", "_frame"}}
    return ad.ale.cloneState(), ad_state, env_state


def restore(env: VicalEnv, snap: tuple[Any, dict, dict]) -> None:
    state, ad_state, env_state = snap
    env.adapter.ale.restoreState(state)
    for k, v in ad_state.items():
        setattr(env.adapter, k, copy.deepcopy(v))
    for k, v in env_state.items():
        setattr(env, k, v)


def progress_value(env: VicalEnv) -> float:
    """The raw scoring quantity of an ALE adapter (``total``)."""
    return float(env.adapter.total)


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
    continuations and valued by the best of them.

    Plays at most ``n`` decisions from the env's current state and returns the
    actions taken (the env is left at the state they reach).
    """
    rng = random.Random(seed)
    names = list(candidates or env.action_names)
    taken: list[str] = []
    for _ in range(n):
        if env.done:
            break
        root = snapshot(env)
        conts = [[rng.choice(names) for _ in range(depth - 1)] for _ in range(tails)]
        best, best_a = None, names[0]
        for a in names:
            v = None
            for tail in conts:
                restore(env, root)
                r = rollout(env, [a, *tail], value, death_penalty)
                v = r if v is None else max(v, r)
            if best is None or v > best:
                best, best_a = v, a
        restore(env, root)
        env.step(best_a)
        taken.append(best_a)
    return taken


def task_without_init(env_spec: EnvSpec, variant: TaskVariant) -> TaskSpec:
    """The task of ``variant`` with its stored sequence removed (the generator's starting point)."""
    bare = variant.model_copy(update={"init_actions": [], "init_source": None})
    return TaskSpec(env=env_spec, variant=bare)


def search_init(
    env: VicalEnv,
    names: Sequence[str],
    rng: random.Random,
    length: tuple[int, int] = (3, 8),
    danger_within: int = 6,
    plan_depth: int = 6,
    plans: int = 6,
    tries: int = 12,
    avoid: set[str] | None = None,
    accept: Callable[[VicalEnv], bool] | None = None,
) -> list[str]:
    """A seeded search for a human-init sequence from the env's start state.

    Candidate sequences of random length in ``length`` are drawn from ``names``.
    A candidate is kept when (1) replaying it never ends the episode, (2) its
    end frame is not in ``avoid`` (frame hashes already used by siblings),
    (3) ``accept`` (if given) holds, and (4) the end state is a decision point:
    ``danger_within`` NOOP decisions end the episode but one of ``plans`` seeded
    random plans of ``plan_depth`` decisions survives. If no candidate meets
    (4) within ``tries``, the first candidate meeting (1)-(3) is returned.
    """
    avoid = avoid or set()
    root = snapshot(env)
    fallback: list[str] | None = None
    noop = next(iter(env.action_names))
    for _ in range(tries):
        seq = [rng.choice(list(names)) for _ in range(rng.randint(*length))]
        restore(env, root)
        ok = True
        for a in seq:
            s = env.step(a)
            if s.done:
                ok = False
                break
        if not ok or frame_sha256(env.frame) in avoid:
            continue
        if accept is not None and not accept(env):
            continue
        if fallback is None:
            fallback = seq
        mid = snapshot(env)
        idle_dies = False
        for _ in range(danger_within):
            if env.done:
                break
            s = env.step(noop)
            idle_dies = s.terminated and s.outcome != "Victory"
        if not idle_dies:
            continue
        for _ in range(plans):
            restore(env, mid)
            plan = [rng.choice(list(names)) for _ in range(plan_depth)]
            if rollout(env, plan, lambda e: 0.0) == 0.0:
                restore(env, root)
                return seq
    restore(env, root)
    if fallback is None:
        raise RuntimeError("search_init found no sequence that keeps the episode alive")
    return fallback


def generate_for_variants(
    env_spec: EnvSpec,
    make: Callable[[TaskSpec], VicalEnv],
    pick: Callable[[VicalEnv, TaskVariant, random.Random, set[str]], list[str]],
    seed: int,
) -> dict[str, list[str]]:
    """Run ``pick`` for every human-init variant in file order, keeping start frames distinct.

    Frames of the other variants' start states (base and parameterized tasks,
    and the sequences already chosen) are passed to ``pick`` as ``avoid``.
    """
    out: dict[str, list[str]] = {}
    used: set[str] = set()
    for v in env_spec.tasks:
        if v.kind != "human-init":
            env = make(task_without_init(env_spec, v))
            try:
                used.add(frame_sha256(env.reset()))
            finally:
                env.close()
        elif paper_sourced(v):  # a sequence the paper spells out: a fixed start, not generated
            env = make(TaskSpec(env=env_spec, variant=v))
            try:
                used.add(frame_sha256(env.reset()))
            finally:
                env.close()
    for v in env_spec.tasks:
        if v.kind != "human-init" or paper_sourced(v):
            continue
        rng = random.Random(f"{seed}/{env_spec.env}/{v.variant}")
        env = make(task_without_init(env_spec, v))
        try:
            env.reset()
            seq = pick(env, v, rng, used)
            restore_env = env
            restore_env.reset()
            for a in seq:
                restore_env.step(a)
            used.add(frame_sha256(restore_env.frame))
        finally:
            env.close()
        out[v.variant] = seq
    return out
