"""Search tools shared by the Alien, Assault, Asterix, BattleZone, Berzerk and
ChopperCommand rule modules.

Two jobs, both deterministic and fast (seconds):

* :func:`generate_dense_starts` produces the human-init action sequences: for
  each human-init variant it tries a few seeded random walks that never lose a
  life, probes what happens right after each walk with a handful of constant
  continuations, and keeps the walk whose continuations disagree the most
  (some score, some lose a life, some do neither). That is a dense decision
  point: the agent is alive and its next few actions matter.
* :func:`beam_search` finds high-reward action lists for a task; it was used to
  calibrate the score targets recorded in the task YAML files and to find the
  trajectories the tests replay.

Both step the simulator exactly as :class:`vical.envs.core.VicalEnv` does
(outer frame skip, NOOP fill, life-loss check after every slot).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

from vical.envs.ale import ALEAdapter
from vical.envs.ale_games._search import paper_sourced
from vical.envs.core import frame_sha256
from vical.spec import EnvSpec, TaskSpec, TaskVariant


@dataclass
class Outcome:
    """What one decision did: raw reward, native game over, a life lost."""

    reward: float
    over: bool
    lost: bool

    @property
    def bad(self) -> bool:
        return self.over or self.lost


class Sim:
    """A task's simulator at its seed and initial skip, with clone/restore."""

    def __init__(self, env_spec: EnvSpec, variant: TaskVariant):
        from vical.envs.ale import make_adapter

        plain = variant.model_copy(update={"init_actions": [], "init_source": None})
        self.task = TaskSpec(env=env_spec, variant=plain)
        self.adapter: ALEAdapter = make_adapter(self.task)  # type: ignore[assignment]
        self.actions = dict(env_spec.actions)
        self.noop = env_spec.noop
        self.fs = env_spec.frame_skip
        self.k = env_spec.action_steps
        self.adapter.reset(variant.seed)
        for _ in range(variant.initial_skip):
            self.adapter.act(self.noop)

    def snapshot(self):
        return self.adapter.ale.cloneState()

    def restore(self, state) -> None:
        self.adapter.ale.restoreState(state)

    def decide(self, name: str) -> Outcome:
        native = self.actions[name]
        total = 0.0
        for slot in range(self.fs):
            before = self.adapter.lives()
            tick = self.adapter.act(native if slot < self.k else self.noop)
            total += tick.reward
            if tick.terminated:
                return Outcome(total, True, False)
            if self.adapter.lives() < before:
                return Outcome(total, False, True)
        return Outcome(total, False, False)

    def run(self, names: list[str]) -> Outcome:
        total = 0.0
        for n in names:
            o = self.decide(n)
            total += o.reward
            if o.bad:
                return Outcome(total, o.over, o.lost)
        return Outcome(total, False, False)

    def frame_hash(self) -> str:
        return frame_sha256(self.adapter.frame())

    def close(self) -> None:
        self.adapter.close()


def _probe_spread(sim: Sim, probes: list[str], horizon: int) -> float | None:
    """How much the next few decisions matter: distinct outcomes of constant continuations.

    None when every continuation loses the life (a doomed state).
    """
    base = sim.snapshot()
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


def generate_dense_starts(
    env_spec: EnvSpec,
    walk_actions: list[str],
    lengths: dict[str, int],
    probes: list[str],
    probe_horizon: int = 6,
    candidates: int = 6,
    quiet_noop: bool = True,
    quiet_horizon: int | None = None,
    noop_grace: int = 3,
) -> dict[str, list[str]]:
    """Human-init sequences for every human-init variant of ``env_spec``.

    ``lengths`` gives each variant's walk length (decisions). For each variant,
    ``candidates`` random walks over ``walk_actions`` are drawn from an RNG
    seeded by the variant name; a step that would lose a life is replaced by
    the first safe alternative (in ``walk_actions`` order). Each complete walk
    is probed with every ``probes`` action held for ``probe_horizon``
    decisions; the walk with the most distinct probe outcomes wins (ties: the
    earlier candidate). Walks whose end frame equals an already chosen start
    frame (or the plain start frame) are skipped, so variants stay distinct.
    With ``quiet_noop``, walks after which doing nothing for ``quiet_horizon``
    (default ``probe_horizon``) decisions already earns points are skipped too: points the walk set up
    (a shot already in flight) must not be credited to the agent. A walk is
    also skipped when doing nothing would lose the life within
    ``noop_grace`` decisions, or when every probe loses it: the start state
    must leave the agent time to act.
    """
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for variant in env_spec.tasks:
        if variant.kind != "human-init" or paper_sourced(variant):
            # fixed starts: other tasks, and sequences the paper spells out
            sim = Sim(env_spec, variant)
            if paper_sourced(variant):
                sim.run(list(variant.init_actions))
            seen.add(sim.frame_hash())
            sim.close()
    for variant in env_spec.tasks:
        if variant.kind != "human-init" or paper_sourced(variant):
            continue
        sim = Sim(env_spec, variant)
        seen.add(sim.frame_hash())
        origin = sim.snapshot()
        rng = random.Random(zlib.crc32(f"{env_spec.env}/{variant.variant}".encode()))
        best: tuple[float, list[str], str] | None = None
        for _ in range(candidates):
            sim.restore(origin)
            walk: list[str] = []
            ok = True
            for _step in range(lengths[variant.variant]):
                choice = rng.choice(walk_actions)
                state = sim.snapshot()
                for name in [choice, *walk_actions]:
                    sim.restore(state)
                    if not sim.decide(name).bad:
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
            state = sim.snapshot()
            doomed = sim.run(["NOOP"] * noop_grace).bad
            sim.restore(state)
            if doomed:
                continue
            if quiet_noop:
                pending = sim.run(["NOOP"] * (quiet_horizon or probe_horizon)).reward
                sim.restore(state)
                if pending > 0:
                    continue
            spread = _probe_spread(sim, probes, probe_horizon)
            if spread is None:
                continue
            if best is None or spread > best[0]:
                best = (spread, walk, h)
        sim.close()
        if best is None:
            raise RuntimeError(f"{env_spec.env}/{variant.variant}: no safe distinct walk found")
        out[variant.variant] = best[1]
        seen.add(best[2])
    return out


def beam_search(
    sim: Sim,
    depth: int,
    width: int = 8,
    actions: list[str] | None = None,
    value=None,
    seed: int = 0,
    full_depth: bool = False,
) -> tuple[float, list[str]]:
    """Highest-value action list of length <= ``depth`` that never loses a life.

    ``value(total_reward, steps)`` ranks beam entries (default: total raw
    reward). Entries whose RAM is identical are merged, and ties are broken by
    an RNG seeded with ``seed`` so the beam keeps exploring while no reward
    has been seen. Returns the best value found and its action list; with
    ``full_depth``, only lists that survive all ``depth`` decisions count.
    """
    names = actions or list(sim.actions)
    value = value or (lambda total, steps: total)
    rng = random.Random(seed)
    beam = [(0.0, [], sim.snapshot())]
    best: tuple[float, list[str]] = (value(0.0, 0), [])
    for step in range(depth):
        nxt = {}
        for total, seq, state in beam:
            for name in names:
                sim.restore(state)
                o = sim.decide(name)
                if o.bad:
                    continue
                t = total + o.reward
                key = sim.adapter.ram().tobytes()
                if key in nxt and nxt[key][0] >= value(t, step + 1):
                    continue
                nxt[key] = (value(t, step + 1), rng.random(), t, [*seq, name], sim.snapshot())
        if not nxt:
            break
        ranked = sorted(nxt.values(), key=lambda x: (-x[0], x[1]))
        beam = [(t, s, st) for _, _, t, s, st in ranked[:width]]
        if ranked[0][0] > best[0] or (full_depth and step == depth - 1):
            best = (ranked[0][0], ranked[0][3])
    return best
