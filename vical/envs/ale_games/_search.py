"""Decision-level ALE simulation for generating human-init sequences and expert play.

:class:`DecisionSim` drives an :class:`~vical.envs.ale.ALEAdapter` exactly the
way :class:`~vical.envs.core.VicalEnv` does (seed, initial skipped frames, then
decisions of ``frame_skip`` slots holding the action for ``action_steps`` slots
and NOOP after), but exposes ``clone``/``restore`` of the emulator so a
generator can look ahead and back off. Generators built on it are
deterministic: no randomness beyond :class:`random.Random` with fixed seeds.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vical.envs.ale import ALEAdapter
from vical.spec import EnvSpec, TaskSpec, TaskVariant


@dataclass(frozen=True)
class Outcome:
    """What one decision did: summed raw reward, native end, life lost."""

    reward: float
    ended: bool
    life_lost: bool


class DecisionSim:
    """One task's start (seed + initial skip) and canonical decisions on it."""

    def __init__(self, env_spec: EnvSpec, variant: TaskVariant, adapter_cls: type = ALEAdapter):
        # The generator only needs the seed, skip and simulator kwargs of the
        # variant; the stored init_actions are deliberately left out.
        bare = variant.model_copy(update={"init_actions": [], "init_source": None})
        self.task = TaskSpec(env=env_spec, variant=bare)
        self.adapter: ALEAdapter = adapter_cls(self.task)
        self.spec = env_spec
        self.adapter.reset(variant.seed)
        for _ in range(variant.initial_skip):
            self.adapter.act(env_spec.noop)
        self.ale = self.adapter.ale

    def ram(self) -> np.ndarray:
        return self.ale.getRAM()

    def clone(self) -> Any:
        return self.ale.cloneState()

    def restore(self, state: Any) -> None:
        self.ale.restoreState(state)

    def step(self, name: str) -> Outcome:
        """One canonical decision, as the core applies it."""
        native = self.spec.actions[name]
        reward = 0.0
        lives0 = self.ale.lives()
        for slot in range(self.spec.frame_skip):
            tick = self.adapter.act(native if slot < self.spec.action_steps else self.spec.noop)
            reward += tick.reward
            if tick.terminated:
                return Outcome(reward, True, self.ale.lives() < lives0)
            if self.ale.lives() < lives0:
                return Outcome(reward, False, True)
        return Outcome(reward, False, False)

    def run(self, names: Sequence[str]) -> tuple[float, bool]:
        """Apply several decisions; returns (reward, survived without end or life loss)."""
        total = 0.0
        for n in names:
            o = self.step(n)
            total += o.reward
            if o.ended or o.life_lost:
                return total, False
        return total, True


def lookahead_policy(
    sim: DecisionSim,
    actions: Sequence[str],
    horizon: int,
    value: Callable[[DecisionSim, float, bool], float],
    rollout: Callable[[int], Sequence[str]] | None = None,
) -> str:
    """Pick the action whose short rollout scores best; ties go to the earlier action.

    For each candidate action the emulator is cloned, the action is taken and
    followed by ``horizon - 1`` decisions of ``rollout(i)`` (default: repeat the
    candidate), then ``value(sim, reward, survived)`` rates the end state. The
    emulator is restored before returning.
    """
    root = sim.clone()
    best_name, best_val = actions[0], -float("inf")
    for name in actions:
        sim.restore(root)
        plan = [name, *(rollout(horizon - 1) if rollout else [name] * (horizon - 1))]
        reward, alive = sim.run(plan)
        v = value(sim, reward, alive)
        if v > best_val:
            best_name, best_val = name, v
    sim.restore(root)
    return best_name


def paper_sourced(variant: TaskVariant) -> bool:
    """True when the variant replays a sequence the paper spells out (``init_source: 'paper: ...'``).

    Such sequences are data, not generator output: the generators leave them
    alone and do not produce them.
    """
    return (variant.init_source or "").startswith("paper:")


def human_init_variants(env_spec: EnvSpec) -> list[TaskVariant]:
    """The human-init variants whose sequences a generator makes, in file order.

    Variants that replay a sequence from the paper (:func:`paper_sourced`) are left out.
    """
    return [t for t in env_spec.tasks if t.kind == "human-init" and not paper_sourced(t)]


def play_without_dying(
    sim: DecisionSim,
    policy: Callable[[DecisionSim, random.Random], str],
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
        o = sim.step(name)
        if o.ended or o.life_lost:
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
    adapter_cls: type,
    lengths: dict[str, int],
    policy: Callable[[DecisionSim, random.Random], str],
    seed: int,
) -> dict[str, list[str]]:
    """Human-init sequences as prefixes of a few long deathless plays.

    Variants that share a start (seed, initial skip, simulator kwargs) share
    one play of :func:`play_without_dying`, as long as the longest of them
    needs; each variant stores the first ``lengths[variant]`` decisions, so
    longer prefixes reach later stages of the game (progress bands).
    """
    groups: dict[tuple, list[TaskVariant]] = {}
    for v in human_init_variants(env_spec):
        key = (v.seed, v.initial_skip, tuple(sorted(v.env_kwargs.items())))
        groups.setdefault(key, []).append(v)
    out: dict[str, list[str]] = {}
    for i, (_key, vs) in enumerate(groups.items()):
        sim = DecisionSim(env_spec, vs[0], adapter_cls)
        n = max(lengths[v.variant] for v in vs)
        stream = play_without_dying(sim, policy, n, seed=seed * 1000 + i)
        for v in vs:
            out[v.variant] = stream[: lengths[v.variant]]
    return out


def chunk_search(
    sim: DecisionSim,
    policy: Callable[[DecisionSim, random.Random], str],
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
    of the follow-up chunk (shots still in flight) among the survivors is kept. Falls back to the best non-surviving candidate when none survives.
    """
    rng = random.Random(seed)
    actions: list[str] = []
    while len(actions) < n:
        root = sim.clone()
        best: tuple[float, list[str]] | None = None
        for _ in range(candidates):
            sim.restore(root)
            plan = [policy(sim, rng) for _ in range(1)]
            total, alive = 0.0, True
            for i in range(min(chunk, n - len(actions))):
                if i:
                    plan.append(policy(sim, rng))
                o = sim.step(plan[-1])
                total += o.reward
                if o.ended or o.life_lost:
                    alive = False
                    break
            v = value(sim, total) if value and alive else total
            if alive:
                later, safe = sim.run([policy(sim, rng) for _ in range(chunk)])
                v += 0.5 * later
                alive = safe
            rating = v + (0.0 if alive else -1e6)
            if best is None or rating > best[0]:
                best = (rating, plan)
        sim.restore(root)
        assert best is not None
        sim.run(best[1])
        actions.extend(best[1])
    return actions[:n]
