"""The search strategies the authoring tools use, written once.

All of them are deterministic (randomness only from :class:`random.Random` or
NumPy generators with fixed seeds) and work at decision level through the
runtime's own decision step, so a found action list replays exactly through
``make_env``. Two kinds of state:

- a :class:`~vical.authoring.sim.DecisionSim` (the start state before scoring
  begins; every lost life reported): :func:`play_without_dying`,
  :func:`prefix_streams`, :func:`chunk_search`, :func:`lookahead_policy`,
  :func:`beam_search`, :func:`live_beam_search`, :func:`dense_starts` (with
  :func:`screen_viable`, starts no screen-blind policy of the reflex screen passes);
- a started :class:`~vical.envs.core.VicalEnv` (the task's own score, pass and
  ending rules): :func:`lookahead_play`, :func:`decision_point_init`,
  :func:`init_for_variants`, :func:`decision_point_inits`, :func:`scored_beam`
  (:func:`procgen_beam`, :func:`procgen_judged_beam`).

Saving and restoring is :meth:`VicalEnv.snapshot` / :meth:`VicalEnv.restore`
throughout.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vical.authoring.sim import DecisionSim, human_init_variants, paper_sourced, task_without_init
from vical.envs.core import Snapshot, VicalEnv, frame_sha256
from vical.errors import TaskDataError
from vical.spec import EnvSpec, TaskSpec, TaskVariant

if TYPE_CHECKING:
    from vical.envs.ale import ALEAdapter

Policy = Callable[[DecisionSim, random.Random], str]


# ---------------------------------------------------------------------------
# deathless play and random shooting (DecisionSim)
# ---------------------------------------------------------------------------
def play_without_dying(
    sim: DecisionSim,
    policy: Policy,
    n: int,
    seed: int,
    back: int = 6,
    max_rewinds: int = 200,
) -> list[str]:
    """``n`` decisions of ``policy`` that never end the game or lose a life.

    Checkpoints are kept every decision; when a decision ends the game or costs
    a life, play rewinds ``back`` decisions (further on repeated failure) and
    continues with a fresh branch of the seeded random stream. Raises
    :class:`RuntimeError` if ``max_rewinds`` rewinds do not get past a danger.
    """
    rng = random.Random(seed)
    actions: list[str] = []
    states = [sim.clone()]
    rewinds = 0
    depth = back
    while len(actions) < n:
        name = policy(sim, rng)
        if sim.step(name).bad:
            rewinds += 1
            if rewinds > max_rewinds:
                raise RuntimeError(f"no safe continuation after {len(actions)} decisions")
            keep = max(0, len(actions) - depth)
            del actions[keep:]
            del states[keep + 1 :]
            sim.restore(states[keep])
            rng = random.Random(f"{seed}/{rewinds}")
            depth = min(depth + 2, 4 * back)
            continue
        actions.append(name)
        states.append(sim.clone())
        if len(actions) % back == 0:
            depth = back
    return actions


def prefix_streams(
    env_spec: EnvSpec,
    adapter_cls: type | None,
    lengths: dict[str, int],
    policy: Policy,
    seed: int,
    viable: Callable[[DecisionSim], bool] | None = None,
    attempts: int = 20,
    start_viable: Viable | None = None,
    per_variant: bool = False,
) -> dict[str, list[str]]:
    """Human-init sequences as prefixes of a few long deathless plays.

    Variants that share a start (seed, initial skip, simulator kwargs) share
    one play of :func:`play_without_dying`, as long as the longest of them
    needs; each variant stores the first ``lengths[variant]`` decisions, so
    longer prefixes reach later stages of the game (progress bands).

    ``viable(sim)``, when given, is asked at the end of each play (the state the
    longest prefix leaves): a play it rejects (a death that shows only after the
    play, such as Frostbite's sinking animation) is replaced by the play of the next
    seed, up to ``attempts`` seeds. The first seed's play is the one kept whenever it
    is viable, so a check added later changes only the sequences it rejects.

    ``start_viable(variant, prefix)`` (e.g. :func:`screen_viable`), when given, is asked
    of each variant's prefix of a play; a play with a rejected prefix is replaced in the
    same way. The variants of a group share one play, so a rejected prefix changes the
    whole group's sequences; a group whose play passes the check keeps it exactly.
    With ``per_variant``, only a rejected variant moves: it takes its prefix of the
    first later seed's play that it accepts, and the group's other variants keep the
    first play's prefixes exactly (a variant that moved is then no longer a prefix of
    its group's longer variants). When no seed's play passes, :class:`NoViableStart`
    is raised.
    """
    groups: dict[tuple[int, int, tuple[tuple[str, Any], ...]], list[TaskVariant]] = {}
    for v in human_init_variants(env_spec):
        key = (v.seed, v.initial_skip, tuple(sorted(v.env_kwargs.items())))
        groups.setdefault(key, []).append(v)
    out: dict[str, list[str]] = {}
    for i, (_key, vs) in enumerate(groups.items()):
        n = max(lengths[v.variant] for v in vs)
        if per_variant and start_viable is not None:
            out.update(
                _per_variant_prefixes(
                    env_spec,
                    adapter_cls,
                    lengths,
                    policy,
                    seed * 1000 + i,
                    vs,
                    n,
                    viable,
                    attempts,
                    start_viable,
                )
            )
            continue
        for attempt in range(attempts):
            sim = DecisionSim(env_spec, vs[0], adapter_cls)
            try:
                stream = play_without_dying(
                    sim, policy, n, seed=seed * 1000 + i + 100_000 * attempt
                )
                ok = viable is None or viable(sim)
            finally:
                sim.close()
            if ok and start_viable is not None:
                ok = all(start_viable(v, stream[: lengths[v.variant]]) for v in vs)
            if ok:
                break
        else:
            names = ", ".join(v.variant for v in vs)
            raise NoViableStart(
                f"{env_spec.env}: no viable play of {n} decisions for {names} in {attempts} "
                "seeds; raise attempts or change the policy or the lengths"
            )
        for v in vs:
            out[v.variant] = stream[: lengths[v.variant]]
    return out


def _per_variant_prefixes(
    env_spec: EnvSpec,
    adapter_cls: type | None,
    lengths: dict[str, int],
    policy: Policy,
    base_seed: int,
    vs: list[TaskVariant],
    n: int,
    viable: Callable[[DecisionSim], bool] | None,
    attempts: int,
    start_viable: Viable,
) -> dict[str, list[str]]:
    """:func:`prefix_streams` with ``per_variant``, for one group ``vs``: each variant
    takes its prefix of the first seed's play (of ``n`` decisions) that ``viable`` and
    ``start_viable`` accept; plays are made once, when a variant first needs them."""
    plays: dict[int, list[str] | None] = {}

    def play(attempt: int) -> list[str] | None:
        if attempt not in plays:
            sim = DecisionSim(env_spec, vs[0], adapter_cls)
            try:
                stream = play_without_dying(sim, policy, n, seed=base_seed + 100_000 * attempt)
                plays[attempt] = stream if viable is None or viable(sim) else None
            finally:
                sim.close()
        return plays[attempt]

    out: dict[str, list[str]] = {}
    for v in vs:
        for attempt in range(attempts):
            stream = play(attempt)
            if stream is not None and start_viable(v, stream[: lengths[v.variant]]):
                out[v.variant] = stream[: lengths[v.variant]]
                break
        else:
            raise NoViableStart(
                f"{env_spec.env}: no viable play of {lengths[v.variant]} decisions for "
                f"{v.variant} in {attempts} seeds; raise attempts or change the policy or "
                "the lengths"
            )
    return out


def lookahead_policy(
    sim: DecisionSim,
    actions: Sequence[str],
    horizon: int,
    value: Callable[[DecisionSim, float, bool], float],
    rollout: Callable[[int], Sequence[str]] | None = None,
) -> str:
    """Pick the action whose short rollout scores best; ties go to the earlier action.

    For each candidate action the state is saved, the action is taken and
    followed by ``horizon - 1`` decisions of ``rollout(i)`` (default: repeat the
    candidate), then ``value(sim, reward, survived)`` rates the end state. The
    state is restored before returning.
    """
    root = sim.clone()
    best_name, best_val = actions[0], -float("inf")
    for name in actions:
        sim.restore(root)
        plan = [name, *(rollout(horizon - 1) if rollout else [name] * (horizon - 1))]
        o = sim.run(plan)
        v = value(sim, o.reward, not o.bad)
        if v > best_val:
            best_name, best_val = name, v
    sim.restore(root)
    return best_name


def chunk_search(
    sim: DecisionSim,
    policy: Policy,
    n: int,
    seed: int,
    chunk: int = 5,
    candidates: int = 8,
    value: Callable[[DecisionSim, float], float] | None = None,
) -> list[str]:
    """Random-shooting planner: ``n`` decisions picked ``chunk`` at a time.

    For each chunk, ``candidates`` seeded policy rollouts of ``chunk``
    decisions are tried, each followed by one more chunk of policy play to
    check it does not walk into a death; the candidate with the best
    ``value(sim, reward)`` (default: reward of the chunk) plus half the reward
    of the follow-up chunk (shots still in flight) among the survivors is kept.
    Falls back to the best non-surviving candidate when none survives.
    """
    rng = random.Random(seed)
    actions: list[str] = []
    while len(actions) < n:
        root = sim.clone()
        best: tuple[float, list[str]] | None = None
        for _ in range(candidates):
            sim.restore(root)
            plan = [policy(sim, rng)]
            total, alive = 0.0, True
            for i in range(min(chunk, n - len(actions))):
                if i:
                    plan.append(policy(sim, rng))
                o = sim.step(plan[-1])
                total += o.reward
                if o.bad:
                    alive = False
                    break
            v = value(sim, total) if value and alive else total
            if alive:
                later = sim.run([policy(sim, rng) for _ in range(chunk)])
                v += 0.5 * later.reward
                alive = not later.bad
            rating = v + (0.0 if alive else -1e6)
            if best is None or rating > best[0]:
                best = (rating, plan)
        sim.restore(root)
        assert best is not None
        sim.run(best[1])
        actions.extend(best[1])
    return actions[:n]


# ---------------------------------------------------------------------------
# beam search and dense starts (DecisionSim)
# ---------------------------------------------------------------------------
def beam_search(
    sim: DecisionSim,
    depth: int,
    width: int = 8,
    actions: list[str] | None = None,
    value: Callable[[float, int], float] | None = None,
    seed: int = 0,
    full_depth: bool = False,
    counted: bool = False,
) -> tuple[float, list[str]]:
    """Highest-value action list of length <= ``depth`` that never loses a life.

    ``value(total_reward, steps)`` ranks beam entries (default: total reward;
    with ``counted``, only the reward the task's score counts). Entries whose
    RAM is identical are merged, and ties are broken by an RNG seeded with
    ``seed`` so the beam keeps exploring while no reward has been seen. Returns
    the best value found and its action list; with ``full_depth``, only lists
    that survive all ``depth`` decisions count.
    """
    names = actions or list(sim.actions)
    value = value or (lambda total, steps: total)
    rng = random.Random(seed)
    beam: list[tuple[float, list[str], Any]] = [(0.0, [], sim.clone())]
    best: tuple[float, list[str]] = (value(0.0, 0), [])
    for step in range(depth):
        # RAM -> (value, tie-break, total, actions, state)
        nxt: dict[bytes, tuple[float, float, float, list[str], Snapshot]] = {}
        for total, seq, state in beam:
            for name in names:
                sim.restore(state)
                o = sim.step(name)
                if o.bad:
                    continue
                t = total + (sim.counted(o.reward) if counted else o.reward)
                key = sim.ram().tobytes()
                if key in nxt and nxt[key][0] >= value(t, step + 1):
                    continue
                nxt[key] = (value(t, step + 1), rng.random(), t, [*seq, name], sim.clone())
        if not nxt:
            break
        ranked = sorted(nxt.values(), key=lambda x: (-x[0], x[1]))
        beam = [(t, s, st) for _, _, t, s, st in ranked[:width]]
        if ranked[0][0] > best[0] or (full_depth and step == depth - 1):
            best = (ranked[0][0], ranked[0][3])
    return best


def live_beam_search(
    sim: DecisionSim,
    depth: int,
    width: int = 32,
    actions: list[str] | None = None,
    seed: int = 0,
    events: Callable[[float], int] | None = None,
    goal: int | None = None,
    stuck_limit: int = 3,
) -> list[str]:
    """Beam search for ``goal`` events that also sets aside states already doomed.

    Like :func:`beam_search` (RAM-merged entries, lists that lose a life
    dropped, seeded tie-break), but an entry every one of whose actions leads
    to the same RAM ignores the input; after ``stuck_limit`` such expansions in
    a row the entry ranks below every other (some games play a long death
    animation before the life counter drops: in Frostbite about a dozen
    decisions of a sinking player). Entries rank by (not stuck, events,
    counted reward); ``events(reward)`` counts the events in a decision's raw
    reward (default: one per rewarded decision). Returns the first action list
    that reaches ``goal`` events, else the best one seen.
    """
    names = actions or list(sim.actions)
    count = events or (lambda r: 1 if r > 0 else 0)
    rng = random.Random(seed)
    # (rank, events, stuck, actions, state); rank = (alive, events, reward)
    beam: list[tuple[tuple[bool, int, float], int, list[str], Snapshot]] = [
        ((True, 0, 0.0), 0, [], sim.clone())
    ]
    best: tuple[tuple[int, float], list[str]] = ((0, 0.0), [])
    for _step in range(depth):
        nxt: dict[bytes, tuple[tuple[bool, int, float], float, int, list[str], Snapshot]] = {}
        for (_alive, ev, total), stuck, seq, state in beam:
            kids: list[tuple[bytes, int, float, list[str], Snapshot]] = []
            rams: set[bytes] = set()
            for name in names:
                sim.restore(state)
                o = sim.step(name)
                ram = sim.ram().tobytes()
                rams.add(ram)
                if o.bad:
                    continue
                e = ev + count(o.reward)
                if goal is not None and e >= goal:
                    return [*seq, name]
                kids.append((ram, e, total + sim.counted(o.reward), [*seq, name], sim.clone()))
            stuck2 = stuck + 1 if len(rams) == 1 and len(names) > 1 else 0
            for ram, e, t, s, st in kids:
                rank = (stuck2 < stuck_limit, e, t)
                if ram in nxt and nxt[ram][0] >= rank:
                    continue
                nxt[ram] = (rank, rng.random(), stuck2, s, st)
        if not nxt:
            break
        ranked = sorted(nxt.values(), key=lambda x: (x[0], -x[1]), reverse=True)
        beam = [(rank, stuck, s, st) for rank, _, stuck, s, st in ranked[:width]]
        top = ranked[0]
        if (top[0][1], top[0][2]) > best[0]:
            best = ((top[0][1], top[0][2]), top[3])
    return best[1]


# ---------------------------------------------------------------------------
# screen-viable starts: no screen-blind policy passes the task from them
# ---------------------------------------------------------------------------
Viable = Callable[[TaskVariant, list[str]], bool]
"""``viable(variant, init_actions)``: may the variant start after these actions?"""

# ours: how many walks :func:`dense_starts` draws beyond its ``candidates`` before it
# gives up on a variant none of whose walks is viable (four more batches of six)
EXTRA_CANDIDATES = 24


class NoViableStart(TaskDataError, RuntimeError):
    """No drawn start of a generated variant passes the viability check."""


def reflex_pass(
    env_spec: EnvSpec,
    variant: TaskVariant,
    init_actions: list[str],
    make: Callable[[TaskSpec], Any] | None = None,
) -> str | None:
    """The first deterministic screen-blind policy that passes the task from a start.

    The task is ``variant`` started after ``init_actions``; the policies are the
    reflex screen's deterministic ones (:func:`vical.run.screen.battery` without its
    random family: every constant action, then the action cycles), each played for
    one episode on ``make(task)`` (default :func:`vical.envs.make_env`) exactly as
    ``vical tasks screen`` plays it. Returns the passing policy's name, or None when
    none passes.
    """
    from vical.envs import make_env
    from vical.run.screen import battery, is_random, play

    task = TaskSpec(
        env=env_spec, variant=variant.model_copy(update={"init_actions": list(init_actions)})
    )
    env = (make or make_env)(task)
    try:
        for pol in battery(task):
            if not is_random(pol.name) and play(env, pol.make(), pol.name).passed:
                return pol.name
    finally:
        env.close()
    return None


def screen_viable(env_spec: EnvSpec, make: Callable[[TaskSpec], Any] | None = None) -> Viable:
    """A viability check for generated starts: no constant action and no action cycle
    of the reflex screen passes the task from the start (see :func:`reflex_pass`;
    ``make`` builds the env, default :func:`vical.envs.make_env`).

    Random play is left out to keep the check cheap (the screen judges it by its pass
    rate over several episodes, not by one pass)."""

    def viable(variant: TaskVariant, init_actions: list[str]) -> bool:
        return reflex_pass(env_spec, variant, init_actions, make) is None

    return viable


def _probe_spread(sim: DecisionSim, probes: list[str], horizon: int) -> float | None:
    """How much the next few decisions matter: distinct outcomes of constant continuations.

    None when every continuation loses the life (a doomed state).
    """
    base = sim.clone()
    results = set()
    rewarded = 0
    for name in probes:
        o = sim.run([name] * horizon)
        results.add((o.reward > 0, o.bad))
        rewarded += o.reward > 0
        sim.restore(base)
    if all(bad for _, bad in results):
        return None
    return len(results) + 0.1 * rewarded


def dense_starts(  # noqa: PLR0913 (each a keyword setting of the recipes)
    env_spec: EnvSpec,
    walk_actions: list[str],
    lengths: dict[str, int],
    probes: list[str],
    probe_horizon: int = 6,
    candidates: int = 6,
    quiet_noop: bool = True,
    quiet_horizon: int | None = None,
    noop_grace: int = 3,
    viable: Viable | None = None,
    extra_candidates: int = EXTRA_CANDIDATES,
) -> dict[str, list[str]]:
    """Human-init sequences at dense decision points, for every generated variant.

    ``lengths`` gives each variant's walk length (decisions). For each variant,
    ``candidates`` random walks over ``walk_actions`` are drawn from an RNG
    seeded by the variant name; a step that would lose a life is replaced by
    the first safe alternative (in ``walk_actions`` order). Each complete walk
    is probed with every ``probes`` action held for ``probe_horizon``
    decisions; the walk with the most distinct probe outcomes wins (ties: the
    earlier candidate). Walks whose end frame equals an already chosen start
    frame (or the plain start frame) are skipped, so variants stay distinct.
    With ``quiet_noop``, walks after which doing nothing for ``quiet_horizon``
    (default ``probe_horizon``) decisions already earns points are skipped too:
    points the walk set up (a shot already in flight) must not be credited to
    the agent. A walk is also skipped when doing nothing would lose the life
    within ``noop_grace`` decisions, or when every probe loses it: the start
    state must leave the agent time to act.

    ``viable(variant, walk)``, when given (e.g. :func:`screen_viable`), is asked of
    the candidates in rank order (most probe spread first, ties: the earlier one) and
    the first it accepts is kept; the ones it rejects are skipped. The candidates are
    drawn as before, so **a variant whose best candidate is viable keeps exactly the
    sequence it had without the check**: the check changes only the starts it rejects.
    When none of the first ``candidates`` walks is viable, further walks are drawn
    from the same seeded stream, ``candidates`` at a time, up to ``extra_candidates``
    more; if none of those is viable either, :class:`NoViableStart` is raised.
    """
    how = _Walks(
        walk_actions, probes, probe_horizon, quiet_noop, quiet_horizon or probe_horizon, noop_grace
    )
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for variant in env_spec.tasks:
        if variant.kind != "human-init" or paper_sourced(variant):
            # fixed starts: other tasks, and sequences the paper spells out
            sim = DecisionSim(env_spec, variant)
            if paper_sourced(variant):
                sim.run(list(variant.init_actions))
            seen.add(sim.frame_hash())
            sim.close()
    for variant in human_init_variants(env_spec):
        sim = DecisionSim(env_spec, variant)
        seen.add(sim.frame_hash())
        origin = sim.clone()
        rng = random.Random(zlib.crc32(f"{env_spec.env}/{variant.variant}".encode()))
        best: tuple[float, list[str], str] | None = None
        limit = candidates + (max(0, extra_candidates) if viable is not None else 0)
        drawn = safe = 0
        while best is None and drawn < limit:
            batch = min(candidates, limit - drawn)
            drawn += batch
            ranked = _dense_candidates(sim, origin, rng, batch, lengths[variant.variant], seen, how)
            safe += len(ranked)
            for cand in ranked:
                if viable is None or viable(variant, cand[1]):
                    best = cand
                    break
        sim.close()
        if best is None:
            if viable is not None and safe:
                raise NoViableStart(
                    f"{env_spec.env}/{variant.variant}: none of {safe} safe distinct walks "
                    f"(of {drawn} drawn) is viable: a screen-blind policy passes the task "
                    "from each; raise extra_candidates or change the walk actions or length"
                )
            raise RuntimeError(f"{env_spec.env}/{variant.variant}: no safe distinct walk found")
        out[variant.variant] = best[1]
        seen.add(best[2])
    return out


@dataclass(frozen=True)
class _Walks:
    """:func:`dense_starts`' walk and probe settings."""

    actions: list[str]
    probes: list[str]
    probe_horizon: int
    quiet_noop: bool
    quiet_horizon: int
    noop_grace: int


def _dense_candidates(
    sim: DecisionSim,
    origin: Snapshot,
    rng: random.Random,
    count: int,
    length: int,
    seen: set[str],
    how: _Walks,
) -> list[tuple[float, list[str], str]]:
    """:func:`dense_starts`' next ``count`` walks that qualify, best probe spread first
    (a stable sort: ties keep the draw order), as (spread, walk, end frame hash)."""
    found: list[tuple[float, list[str], str]] = []
    for _ in range(count):
        sim.restore(origin)
        walk: list[str] = []
        ok = True
        for _step in range(length):
            choice = rng.choice(how.actions)
            state = sim.clone()
            for name in [choice, *how.actions]:
                sim.restore(state)
                if not sim.step(name).bad:
                    walk.append(name)
                    break
            else:
                ok = False
                break
        if not ok:
            continue
        h = sim.frame_hash()
        if h in seen:
            continue
        state = sim.clone()
        doomed = sim.run(["NOOP"] * how.noop_grace).bad
        sim.restore(state)
        if doomed:
            continue
        if how.quiet_noop:
            pending = sim.run(["NOOP"] * how.quiet_horizon).reward
            sim.restore(state)
            if pending > 0:
                continue
        spread = _probe_spread(sim, how.probes, how.probe_horizon)
        if spread is None:
            continue
        found.append((spread, walk, h))
    found.sort(key=lambda c: -c[0])
    return found


# ---------------------------------------------------------------------------
# look-ahead play and decision-point starts (started VicalEnv)
# ---------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------
# beam search on the task's own score (started VicalEnv with a search guide)
# ---------------------------------------------------------------------------
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
