"""ALE demo recipes on the decision simulator: expert clips from shifted and warmed-up
starts per settings group, plus a failure clip.

An ALE game's recipe module defines ``RECIPE``, an :class:`AleRecipe` (called
with the spec, it is :func:`ale_recipe`), or ``recipe(spec)`` calling
:func:`ale_recipe` with one. The building blocks
for ``win``/``warm``/failure callables are here too: :func:`chunk_win`,
:func:`deathless_warm`, :func:`hold`, :func:`life_lost` and the beam-search
based :func:`beam_win`, :func:`deathless_walk` and :func:`beam_warm`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vical.authoring.experts import replay_actions
from vical.authoring.plan import (
    ClipPlan,
    Pool,
    claim_start,
    first_passing,
    group_tag,
    replayed,
    settings_groups,
    task_start_hashes,
    variant_task,
)
from vical.authoring.search import (
    Policy,
    Viable,
    beam_search,
    chunk_search,
    play_without_dying,
    prefix_streams,
    screen_viable,
)
from vical.authoring.sim import DecisionSim
from vical.demos.experts import ExpertResult
from vical.envs.core import Outcome
from vical.spec import EnvSpec, TaskSpec


def weighted_policy(
    moves: Sequence[str], weights: Sequence[float]
) -> Callable[[Any, random.Random], str]:
    """A seeded policy ``policy(sim, rng)``: every decision one of ``moves``, drawn with
    ``weights`` (the games' preload and expert policies)."""
    names = list(moves)

    def policy(sim: Any, rng: random.Random) -> str:
        return rng.choices(names, weights=weights)[0]

    return policy


# The fire button in most decisions, left and right at random: DemonAttack's shooter,
# and Enduro's driver (there the button is the gas).
FIRE_AND_STEER = weighted_policy(
    ["Shoot", "Right+Shoot", "Left+Shoot", "Right", "Left", "NOOP"], (4, 3, 3, 1, 1, 1)
)


def screened_prefixes(
    env_spec: EnvSpec,
    adapter_cls: type,
    lengths: dict[str, int],
    policy: Policy,
    seed: int,
    viable: Viable | None = None,
) -> dict[str, list[str]]:
    """Human-init sequences of a game played by a seeded ``policy``: each variant's
    prefix of a deathless play of it, one play per start
    (:func:`~vical.authoring.search.prefix_streams`), screened variant by variant: a
    prefix from whose end a constant action or an action cycle of the reflex screen
    passes the task is replaced by that variant's prefix of the next seed's play
    (``viable``: the check, default :func:`~vical.authoring.search.screen_viable`)."""
    check = viable or screen_viable(env_spec)
    return prefix_streams(
        env_spec, adapter_cls, lengths, policy, seed=seed, start_viable=check, per_variant=True
    )


@dataclass(frozen=True)
class AleRecipe:
    """How to make one ALE game's clips.

    ``win(sim, n, seed)`` returns expert decisions from a decision sim;
    ``warm(sim, n, seed)`` deathless play that carries a start later into the
    game. ``wins``: (extra skipped frames, warm-up decisions, clip decisions)
    per success clip. The failure clip plays ``fail_policy`` from a start
    (``fail_start``: extra skip, warm-up) until ``fail_event`` fires, plus
    ``fail_after`` NOOP decisions, and keeps the last ``fail_len`` decisions.
    """

    win: Callable[[Any, int, int], list[str]]
    warm: Callable[[Any, int, int], list[str]]
    wins: tuple[tuple[int, int, int], ...]
    fail_policy: Callable[[Any, random.Random], str]
    fail_event: Callable[[Any, Any, Any], bool]
    fail_start: tuple[int, int]
    fail_len: int
    win_note: str
    fail_note: str
    fail_after: int = 0
    fail_every: bool = False

    def __call__(self, spec: EnvSpec) -> tuple[list[ClipPlan], list[Pool]]:
        return ale_recipe(spec, self)


# stored as clip ``source`` (see BEAM_NOTE): keeps the path it was made under
CHUNK = (
    "search expert: random-shooting planner over the game's seeded policy with the emulator's "
    "cloneState/restoreState, 8 candidates per 5-decision chunk, deaths avoided "
    "(vical.authoring.search.chunk_search)"
)


def _ale_win_expert(recipe: AleRecipe, n: int, seed: int) -> Callable[[TaskSpec], ExpertResult]:
    """The recipe's expert; the first of a few seeds whose clip passes (else the best score)."""

    def play(s: int) -> Callable[[Any, int], list[str]]:
        return lambda sim, k: recipe.win(sim, k, s)

    def expert(t: TaskSpec) -> ExpertResult:
        result = first_passing(ale_expert(t, play(s), n) for s in (seed, seed + 100, seed + 200))
        assert result is not None  # three runs, so there is a best
        return result

    return expert


def ale_recipe(spec: EnvSpec, recipe: AleRecipe) -> tuple[list[ClipPlan], list[Pool]]:
    """Per settings group: expert clips from shifted and warmed-up starts, plus a failure."""
    taken = task_start_hashes(spec)
    plans: list[ClipPlan] = []
    pools: list[Pool] = []
    for gi, group in enumerate(settings_groups(spec)):
        on = group[0]
        base = variant_task(spec, on)
        seed0, skip0 = base.variant.seed, base.variant.initial_skip
        tag = group_tag(spec, on)
        prefix = f"{spec.env}-{tag}" if tag else spec.env
        pool = Pool(variants=group, fail_every=recipe.fail_every)
        pools.append(pool)
        for j, (shift, warm_n, n) in enumerate(recipe.wins):
            start = ale_start(spec, recipe, on, seed0, skip0 + shift, warm_n, 10 * gi + j, taken)
            if start is None:
                continue
            skip, init = start
            cid = f"{prefix}-k{skip}-w{len(init)}-expert"
            plans.append(
                ClipPlan(
                    cid,
                    _ale_win_expert(recipe, n, seed=j + 1),
                    recipe.win_note,
                    seed0,
                    skip,
                    init_actions=init,
                    horizon=n,
                    on=on,
                )
            )
            pool.wins.append(cid)
        fail = _ale_failure(spec, recipe, on, seed0, skip0, taken, 10 * gi)
        if fail is not None:
            skip, init, acts = fail
            cid = f"{prefix}-k{skip}-w{len(init)}-loss"
            plans.append(
                ClipPlan(
                    cid,
                    replayed(acts),
                    recipe.fail_note,
                    seed0,
                    skip,
                    init_actions=init,
                    horizon=len(acts),
                    on=on,
                )
            )
            pool.fails.append(cid)
    return plans, pools


def _ale_sim(spec: EnvSpec, on: str, seed: int, skip: int) -> DecisionSim:
    base = variant_task(spec, on)
    v = base.variant.model_copy(
        update={"seed": seed, "initial_skip": skip, "init_actions": [], "init_source": None}
    )
    return ale_decision_sim(TaskSpec(env=spec, variant=v))


def ale_start(
    spec: EnvSpec,
    recipe: AleRecipe,
    on: str,
    seed: int,
    skip: int,
    warm_n: int,
    warm_seed: int,
    taken: set[str],
) -> tuple[int, list[str]] | None:
    """(initial skip, warm-up decisions) of a start whose frame no task opens on (and no
    other clip starts from); the skip grows a frame at a time on a clash."""
    for extra in range(6):
        sim = _ale_sim(spec, on, seed, skip + extra)
        try:
            init = recipe.warm(sim, warm_n, warm_seed)
        except RuntimeError:  # no deathless warm-up from here
            continue
        finally:
            sim.adapter.close()
        if claim_start(spec, on, seed, skip + extra, init, taken):
            return skip + extra, init
    return None


def _ale_failure(
    spec: EnvSpec,
    recipe: AleRecipe,
    on: str,
    seed: int,
    skip0: int,
    taken: set[str],
    warm_seed: int,
) -> tuple[int, list[str], list[str]] | None:
    shift, warm_n = recipe.fail_start
    for extra in range(6):
        skip = skip0 + shift + extra
        sim = _ale_sim(spec, on, seed, skip)
        try:
            warm = recipe.warm(sim, warm_n, warm_seed)
            acts = play_until(
                sim, recipe.fail_policy, recipe.fail_event, seed=warm_seed, after=recipe.fail_after
            )
        except RuntimeError:
            continue
        finally:
            sim.adapter.close()
        if acts is None:
            continue
        cut = max(0, len(acts) - recipe.fail_len)
        init, clip = warm + acts[:cut], acts[cut:]
        if claim_start(spec, on, seed, skip, init, taken):
            return skip, init, clip
    return None


# ---------------------------------------------------------------------------
# experts on the decision simulator
# ---------------------------------------------------------------------------
def ale_decision_sim(task: TaskSpec) -> DecisionSim:
    """A :class:`~vical.authoring.sim.DecisionSim` where the task starts.

    The sim resets with the task's seed and initial skip, then plays the
    task's init actions, so it stands where the agent (or a clip) starts.
    """
    return DecisionSim.at(task)


def ale_expert(
    task: TaskSpec, play: Callable[[Any, int], list[str]], n: int | None = None
) -> ExpertResult:
    """Actions chosen by ``play(sim, n)`` on a decision sim at the task's start,
    cut where the task's own episode ends (replayed on :class:`VicalEnv`)."""
    sim = ale_decision_sim(task)
    try:
        actions = play(sim, n or task.max_steps)
    finally:
        sim.close()
    return replay_actions(task, actions[: n or task.max_steps])


def play_until(
    sim: Any,
    policy: Callable[[Any, random.Random], str],
    event: Callable[[Any, Any, int], bool],
    *,
    seed: int = 0,
    limit: int = 200,
    after: int = 0,
    after_action: str = "NOOP",
) -> list[str] | None:
    """Decisions of ``policy`` until ``event(sim, outcome, height_before)`` fires, plus ``after``
    decisions of ``after_action`` to show what follows; None if the event never comes."""
    rng = random.Random(seed)
    actions: list[str] = []
    while len(actions) < limit:
        before = sim.ram().copy()
        a = policy(sim, rng)
        o = sim.step(a)
        actions.append(a)
        if event(sim, o, before):
            for _ in range(after):
                if o.ended:
                    break
                o = sim.step(after_action)
                actions.append(after_action)
            return actions
        if o.ended:
            return None
    return None


# ---------------------------------------------------------------------------
# building blocks for recipes
# ---------------------------------------------------------------------------
def chunk_win(policy: Callable[[Any, random.Random], str]) -> Callable[[Any, int, int], list[str]]:
    """Expert ``win(sim, n, seed)``: :func:`~vical.authoring.search.chunk_search` over ``policy``
    (8 candidates per chunk)."""

    def win(sim: Any, n: int, seed: int) -> list[str]:
        return chunk_search(sim, policy, n, seed=seed, candidates=8)

    return win


def deathless_warm(
    policy: Callable[[Any, random.Random], str],
) -> Callable[[Any, int, int], list[str]]:
    """Warm-up ``warm(sim, n, seed)``: ``n`` decisions of ``policy`` that never lose a life."""

    def warm(sim: Any, n: int, seed: int) -> list[str]:
        return play_without_dying(sim, policy, n, seed=seed) if n else []

    return warm


def scripted(pick: Callable[[Any], str]) -> Callable[[Any, int, int], list[str]]:
    """``n`` decisions of a scripted (seedless) controller ``pick(sim)``."""

    def play(sim: Any, n: int, seed: int) -> list[str]:
        out = []
        for _ in range(n):
            a = pick(sim)
            sim.step(a)
            out.append(a)
        return out

    return play


def beam_win(
    width: int = 8, actions: Sequence[str] | None = None
) -> Callable[[Any, int, int], list[str]]:
    """Expert ``win(sim, n, seed)``: the best life-safe ``n``-decision list of a beam search
    (width ``width``, states merged by RAM, ties broken by an RNG seeded with ``seed``)."""

    def win(sim: Any, n: int, seed: int) -> list[str]:
        _value, acts = beam_search(
            sim,
            n,
            width=width,
            actions=list(actions) if actions else None,
            seed=seed,
            full_depth=True,
            counted=True,
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


def life_lost(sim: Any, o: Outcome, before: Any) -> bool:
    """Failure event: the decision cost the life (or ended the game)."""
    return o.life_lost or o.ended


# The clip notes are stored in the task files as each clip's ``source``; they keep the
# module paths the clips were made under (changing them would change the data).
BEAM_NOTE = (
    "search expert: life-safe beam search over all actions with the emulator's "
    "cloneState/restoreState, width {width}, states merged by RAM, the task's counted points as "
    "objective (vical.authoring.search.beam_search)"
)


def beam_recipe(
    walk_actions: Sequence[str] | None,
    wins: tuple[tuple[int, int, int], ...],
    fail_action: str,
    fail_start: tuple[int, int],
    fail_len: int,
    fail_note: str,
    width: int = 8,
    actions: Sequence[str] | None = None,
    win_note: str | None = None,
    fail_every: bool = False,
) -> AleRecipe:
    """An :class:`AleRecipe` whose expert is the life-safe beam search (width ``width``, over
    ``actions`` or all), warmed up by deathless random walks over ``walk_actions`` (None:
    by the beam itself), failing by ``fail_action`` held until a life is lost."""
    return AleRecipe(
        win=beam_win(width=width, actions=actions),
        warm=deathless_walk(walk_actions) if walk_actions else beam_warm(width=width),
        wins=wins,
        fail_policy=hold(fail_action),
        fail_event=life_lost,
        fail_start=fail_start,
        fail_len=fail_len,
        win_note=win_note or BEAM_NOTE.format(width=width),
        fail_note=fail_note,
        fail_every=fail_every,
    )


def chunk_recipe(
    policy: Callable[[Any, random.Random], str],
    wins: tuple[tuple[int, int, int], ...],
    fail_policy: Callable[[Any, random.Random], str],
    fail_start: tuple[int, int],
    fail_len: int,
    fail_note: str,
    fail_event: Callable[[Any, Any, Any], bool] = life_lost,
    fail_after: int = 0,
    fail_every: bool = False,
) -> AleRecipe:
    """An :class:`AleRecipe` whose expert is random shooting over the game's seeded
    ``policy`` (:func:`chunk_win`), warmed up by deathless play of the same policy."""
    return AleRecipe(
        win=chunk_win(policy),
        warm=deathless_warm(policy),
        wins=wins,
        fail_policy=fail_policy,
        fail_event=fail_event,
        fail_start=fail_start,
        fail_len=fail_len,
        win_note=CHUNK,
        fail_note=fail_note,
        fail_after=fail_after,
        fail_every=fail_every,
    )
