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


def human_init_variants(env_spec: EnvSpec) -> list[TaskVariant]:
    """The human-init variants of an environment file, in file order."""
    return [t for t in env_spec.tasks if t.kind == "human-init"]


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
