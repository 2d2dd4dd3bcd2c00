"""A task's start state driven decision by decision, with snapshots.

:class:`DecisionSim` is what the search strategies of :mod:`vical.authoring.search`
drive. It is a :class:`~vical.envs.environment.VicalEnv` reset WITHOUT starting the
scoring state (seed, initial skip, and any init actions of the task given), so
only the simulator's own game over ends play and every lost life is reported;
decisions are the runtime's own (:meth:`VicalEnv.decide`), so an action list a
search finds replays exactly through ``make_env``. Snapshots are the
environment's (:meth:`VicalEnv.snapshot`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from vical.envs.core import Outcome, frame_sha256
from vical.envs.environment import Snapshot, VicalEnv
from vical.spec import EnvSpec, TaskSpec, TaskVariant

if TYPE_CHECKING:
    from vical.envs.ale import ALEAdapter


def task_without_init(env_spec: EnvSpec, variant: TaskVariant) -> TaskSpec:
    """The task of ``variant`` with its stored sequence removed (a generator's starting point)."""
    bare = variant.model_copy(update={"init_actions": [], "init_source": None})
    return TaskSpec(env=env_spec, variant=bare)


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


class DecisionSim:
    """One task's start and canonical decisions on it, with clone/restore.

    ``DecisionSim(env_spec, variant)`` stands at the variant's seed and initial
    skip (its stored init actions left out); :meth:`at` stands where the task
    itself starts (init actions played). ``adapter_cls`` overrides the adapter
    the environment's family would build.
    """

    def __init__(
        self,
        env_spec: EnvSpec,
        variant: TaskVariant,
        adapter_cls: type | None = None,
    ):
        from vical.envs import make_adapter

        self.task = task_without_init(env_spec, variant)
        self.spec = env_spec
        self.actions: dict[str, Any] = dict(env_spec.actions)
        self.adapter = adapter_cls(self.task) if adapter_cls else make_adapter(self.task)
        self.env = VicalEnv(self.task, self.adapter)
        self.env.reset(begin=False)

    @classmethod
    def at(cls, task: TaskSpec, adapter_cls: type | None = None) -> DecisionSim:
        """A sim where ``task`` starts: its seed, initial skip, then its init actions played
        as sim decisions (a lost life does not stop the sequence)."""
        sim = cls(task.env, task.variant, adapter_cls)
        for a in task.variant.init_actions:
            sim.step(a)
        return sim

    # -- decisions ---------------------------------------------------------
    def step(self, name: str) -> Outcome:
        """One canonical decision, exactly as the runtime applies it (lives always watched)."""
        return self.env.decide(name, started=False, watch_lives=True)

    def run(self, names: Sequence[str]) -> Outcome:
        """Several decisions; stops at the first that ends the game or costs a life.

        The outcome sums the rewards of the decisions played.
        """
        total = 0.0
        for n in names:
            o = self.step(n)
            total += o.reward
            if o.bad:
                return Outcome(total, o.ended, o.life_lost, o.ending)
        return Outcome(total, False, False, None)

    def counted(self, reward: float) -> float:
        """The part of a decision's raw reward the task's score counts (the adapter's filter)."""
        if not reward:
            return 0.0
        filt = getattr(self.adapter, "reward_filter", None)
        return filt(reward) if filt is not None else reward

    # -- state -------------------------------------------------------------
    def clone(self) -> Snapshot:
        return self.env.snapshot()

    def restore(self, state: Snapshot) -> None:
        self.env.restore(state)

    def ram(self) -> npt.NDArray[np.uint8]:
        return cast("ALEAdapter", self.adapter).ram()

    @property
    def ale(self) -> Any:
        return cast("ALEAdapter", self.adapter).ale

    def frame_hash(self) -> str:
        return frame_sha256(self.adapter.frame())

    def close(self) -> None:
        self.env.close()
