"""Human-init sequences from play on a :class:`~vical.authoring.sim.DecisionSim`:
prefixes of deathless plays (:func:`prefix_streams`) and walks to dense decision points
(:func:`dense_starts`), each optionally screened by a viability check
(:mod:`vical.authoring.search.viable`).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vical.authoring.search.play import Policy, play_without_dying
from vical.authoring.search.viable import EXTRA_CANDIDATES, NoViableStart, Viable
from vical.authoring.sim import DecisionSim, human_init_variants, paper_sourced
from vical.envs.environment import Snapshot
from vical.spec import EnvSpec, TaskVariant


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
        plays = _Plays(env_spec, vs[0], adapter_cls, policy, n, seed * 1000 + i, viable)
        if per_variant and start_viable is not None:
            out.update(_per_variant_prefixes(plays, vs, lengths, attempts, start_viable))
            continue
        for attempt in range(attempts):
            stream = plays.get(attempt)
            if stream is not None and (
                start_viable is None
                or all(start_viable(v, stream[: lengths[v.variant]]) for v in vs)
            ):
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


@dataclass
class _Plays:
    """:func:`prefix_streams`' deathless plays of one group of variants (one start):
    attempt ``k`` plays ``n`` decisions of ``policy`` seeded ``base_seed + 100_000 * k``
    from ``variant``'s start, made once, when first asked for."""

    env_spec: EnvSpec
    variant: TaskVariant
    adapter_cls: type | None
    policy: Policy
    n: int
    base_seed: int
    viable: Callable[[DecisionSim], bool] | None
    made: dict[int, list[str] | None] = field(default_factory=dict)

    def get(self, attempt: int) -> list[str] | None:
        """The attempt's play, or None when ``viable`` rejects the state it ends in."""
        if attempt not in self.made:
            sim = DecisionSim(self.env_spec, self.variant, self.adapter_cls)
            try:
                seed = self.base_seed + 100_000 * attempt
                stream = play_without_dying(sim, self.policy, self.n, seed=seed)
                self.made[attempt] = stream if self.viable is None or self.viable(sim) else None
            finally:
                sim.close()
        return self.made[attempt]


def _per_variant_prefixes(
    plays: _Plays,
    vs: list[TaskVariant],
    lengths: dict[str, int],
    attempts: int,
    start_viable: Viable,
) -> dict[str, list[str]]:
    """:func:`prefix_streams` with ``per_variant``, for one group ``vs``: each variant
    takes its prefix of the first of ``plays`` that ``start_viable`` accepts."""
    out: dict[str, list[str]] = {}
    for v in vs:
        for attempt in range(attempts):
            stream = plays.get(attempt)
            if stream is not None and start_viable(v, stream[: lengths[v.variant]]):
                out[v.variant] = stream[: lengths[v.variant]]
                break
        else:
            raise NoViableStart(
                f"{plays.env_spec.env}: no viable play of {lengths[v.variant]} decisions for "
                f"{v.variant} in {attempts} seeds; raise attempts or change the policy or "
                "the lengths"
            )
    return out


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
