"""Human-init sequences that end at decision points, searched on a started
:class:`~vical.envs.environment.VicalEnv`: seeded random sequences after which idling loses
but some short plan survives (:func:`decision_point_init`), one per generated variant
with start frames kept distinct (:func:`init_for_variants`, :func:`decision_point_inits`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from vical.authoring.search.scored import rollout
from vical.authoring.search.viable import EXTRA_CANDIDATES, NoViableStart, Viable
from vical.authoring.sim import human_init_variants, paper_sourced, task_without_init
from vical.envs.core import frame_sha256
from vical.envs.environment import VicalEnv
from vical.spec import EnvSpec, TaskSpec, TaskVariant


def decision_point_init(  # noqa: PLR0913 (each a keyword setting of the recipes)
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
    viable: Callable[[list[str]], bool] | None = None,
    extra_tries: int = EXTRA_CANDIDATES,
) -> list[str]:
    """A seeded search for a human-init sequence from the env's start state.

    Candidate sequences of random length in ``length`` are drawn from ``names``.
    A candidate is kept when (1) replaying it never ends the episode, (2) its
    end frame is not in ``avoid`` (frame hashes already used by siblings),
    (3) ``accept`` (if given) holds, and (4) the end state is a decision point:
    ``danger_within`` NOOP decisions end the episode but one of ``plans`` seeded
    random plans of ``plan_depth`` decisions survives. If no candidate meets
    (4) within ``tries``, the first candidate meeting (1)-(3) is returned.

    ``viable(sequence)``, when given (e.g. :func:`screen_viable` bound to the variant),
    is asked only of the candidate that would be returned; a rejected one is skipped and
    the search goes on as it would have (the same random stream), so a sequence the
    check accepts is the one found without it. When no candidate of the ``tries`` is
    viable, up to ``extra_tries`` more are drawn; then :class:`NoViableStart`.
    """
    avoid = avoid or set()
    root = env.snapshot()
    fallback: list[str] | None = None
    fallbacks: list[list[str]] = []
    noop = next(iter(env.action_names))
    extra = extra_tries if viable is not None else 0
    for i in range(tries + extra):
        if i == tries:  # the plain search is over: its first viable fallback, if any
            env.restore(root)
            for seq in fallbacks:
                if viable is None or viable(seq):
                    return seq
            fallbacks = []
        seq = [rng.choice(list(names)) for _ in range(rng.randint(*length))]
        env.restore(root)
        ok = True
        for a in seq:
            if env.step(a).done:
                ok = False
                break
        if not ok or frame_sha256(env.frame) in avoid:
            continue
        if accept is not None and not accept(env):
            continue
        if fallback is None:
            fallback = seq
        fallbacks.append(seq)
        mid = env.snapshot()
        idle_dies = False
        for _ in range(danger_within):
            if env.done:
                break
            s = env.step(noop)
            idle_dies = s.terminated and s.outcome != "Victory"
        if not idle_dies:
            continue
        for _ in range(plans):
            env.restore(mid)
            plan = [rng.choice(list(names)) for _ in range(plan_depth)]
            if rollout(env, plan, lambda e: 0.0) == 0.0:
                env.restore(root)
                if viable is None or viable(seq):
                    return seq
                fallbacks.pop()  # rejected: not a fallback either
                break
    env.restore(root)
    if viable is not None:
        for seq in fallbacks:
            if viable(seq):
                return seq
        raise NoViableStart(
            f"no viable sequence in {tries + extra} candidates; raise extra_tries or change "
            "the moves or the lengths"
        )
    if fallback is None:
        raise RuntimeError("decision_point_init found no sequence that keeps the episode alive")
    return fallback


def init_for_variants(
    env_spec: EnvSpec,
    make: Callable[[TaskSpec], VicalEnv],
    pick: Callable[[VicalEnv, TaskVariant, random.Random, set[str]], list[str]],
    seed: int,
) -> dict[str, list[str]]:
    """Run ``pick`` for every generated human-init variant in file order, keeping start
    frames distinct.

    Frames of the other variants' start states (base and parameterized tasks,
    sequences the paper spells out, and the sequences already chosen) are
    passed to ``pick`` as ``avoid``.
    """
    out: dict[str, list[str]] = {}
    used: set[str] = set()
    for v in env_spec.tasks:
        if v.kind != "human-init" or paper_sourced(v):
            # paper sequences are fixed starts, not generated: keep them whole
            whole = v.kind == "human-init"
            env = make(
                TaskSpec(env=env_spec, variant=v) if whole else task_without_init(env_spec, v)
            )
            try:
                used.add(frame_sha256(env.reset()))
            finally:
                env.close()
    for v in human_init_variants(env_spec):
        rng = random.Random(f"{seed}/{env_spec.env}/{v.variant}")
        env = make(task_without_init(env_spec, v))
        try:
            env.reset()
            seq = pick(env, v, rng, used)
            env.replay(seq)
            used.add(frame_sha256(env.frame))
        finally:
            env.close()
        out[v.variant] = seq
    return out


def decision_point_inits(
    env_spec: EnvSpec,
    names: Sequence[str],
    seed: int,
    start_viable: Viable | None = None,
    **search: Any,
) -> dict[str, list[str]]:
    """Human-init sequences of every generated variant by :func:`decision_point_init` over
    ``names`` (``search``: its other settings), start frames kept distinct by
    :func:`init_for_variants` with the variants' random streams seeded by ``seed``.
    ``start_viable(variant, sequence)`` (e.g. :func:`screen_viable`), when given, is
    :func:`decision_point_init`'s ``viable`` for each variant."""
    from vical.envs import make_env

    def pick(env: VicalEnv, v: TaskVariant, rng: random.Random, used: set[str]) -> list[str]:
        def viable(seq: list[str]) -> bool:
            assert start_viable is not None
            return start_viable(v, seq)

        check = viable if start_viable is not None else None
        return decision_point_init(env, names, rng, avoid=used, viable=check, **search)

    return init_for_variants(env_spec, make_env, pick, seed)
