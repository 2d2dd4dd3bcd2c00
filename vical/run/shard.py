"""Shards: one run's episodes split into N deterministic slices, one per machine.

A run's *episode set* is every (task, run index) pair it plays: each selected
task times ``--runs``. ``vical eval --shard I/N`` plays slice ``I`` of ``N``
(``I`` counts from 0, as a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX``
does) and writes an ordinary run folder whose manifest records the shard: its
index, the number of shards, the size of the whole episode set and a digest
of it. ``vical merge`` (:mod:`vical.run.merge`) reads those records to check
that the shards it is given are the pieces of one run, with no gap and no
overlap.

How the slices are made: each episode has an expected cost, the number of
simulator frames it may play (its task's decision budget times the frame
skip). Episodes are taken from the most to the least expensive, ties broken
by episode name, and each goes to the slice whose total is lowest so far (ties
to the lowest index): greedy longest-first bin packing. The result depends on
the episode set, ``I`` and ``N`` only, never on the order in which ``--tasks``
listed the tasks, so every machine of a cluster computes the same slices on
its own.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from vical.outcomes import episode_name

if TYPE_CHECKING:
    from vical.spec import TaskSpec


@dataclass(frozen=True)
class Shard:
    """Slice ``index`` (from 0) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"shard {self}: the number of shards must be at least 1")
        if not 0 <= self.index < self.count:
            raise ValueError(
                f"shard {self}: the index counts from 0, so with {self.count} shard(s) it is "
                f"one of 0..{self.count - 1} (e.g. 0/{self.count})"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` as a :class:`Shard` (ValueError naming the text and the form)."""
        index, sep, count = text.strip().partition("/")
        try:
            if not sep:
                raise ValueError
            i, n = int(index), int(count)
        except ValueError:
            raise ValueError(
                f"shard {text!r} is not of the form I/N (two whole numbers, e.g. 0/4 for the "
                "first of four)"
            ) from None
        return cls(i, n)


class ShardInfo(BaseModel):
    """What a shard's ``manifest.json`` records under ``shard``."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    count: int = Field(ge=1)
    episodes: int = Field(ge=0, description="size of the whole run's episode set")
    episodes_digest: str = Field(description="sha256 of the whole episode set (episodes_digest)")

    @property
    def shard(self) -> Shard:
        return Shard(self.index, self.count)


class MergedShard(BaseModel):
    """Provenance of one shard in a merged run's manifest (``merged_from``)."""

    model_config = ConfigDict(frozen=True)

    shard: str
    run_id: str
    created_at: str
    command: list[str] = Field(default_factory=list)
    image: dict[str, str] | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    doctor: dict[str, Any] | None = None  # the shard's self-check and machine, if recorded
    machine: dict[str, Any] | None = None


def episode_cost(task: TaskSpec) -> int:
    """Expected cost of one episode of ``task``: the simulator frames it may play."""
    return task.max_steps * task.env.frame_skip


def episodes_digest(names: Iterable[str]) -> str:
    """sha256 of a set of episode names, whatever their order."""
    h = hashlib.sha256()
    for name in sorted(set(names)):
        h.update(name.encode() + b"\n")
    return h.hexdigest()


def assign(costs: Mapping[str, int], count: int) -> list[list[str]]:
    """Split the items of ``costs`` (name -> cost) into ``count`` slices of near-equal total.

    Greedy longest-first: items by decreasing cost then name, each to the slice with
    the lowest total so far (then the lowest index). Each slice comes back sorted by
    name.
    """
    if count < 1:
        raise ValueError(f"cannot split into {count} slices")
    heap = [(0, i) for i in range(count)]
    slices: list[list[str]] = [[] for _ in range(count)]
    for name in sorted(costs, key=lambda n: (-costs[n], n)):
        load, i = heapq.heappop(heap)
        slices[i].append(name)
        heapq.heappush(heap, (load + costs[name], i))
    return [sorted(s) for s in slices]


def episode_set(tasks: Sequence[TaskSpec], runs: int) -> dict[str, tuple[str, int]]:
    """Every episode of ``tasks`` x ``runs``: episode name -> (task id, run index)."""
    return {episode_name(t.id, k): (t.id, k) for t in tasks for k in range(runs)}


def select_shard(
    tasks: Sequence[TaskSpec], runs: int, shard: Shard
) -> tuple[list[tuple[str, int]], ShardInfo]:
    """The episodes of ``shard`` (in task-list then run order) and the record of it."""
    every = episode_set(tasks, runs)
    cost = {t.id: episode_cost(t) for t in tasks}
    mine = set(assign({n: cost[tid] for n, (tid, _) in every.items()}, shard.count)[shard.index])
    info = ShardInfo(
        index=shard.index,
        count=shard.count,
        episodes=len(every),
        episodes_digest=episodes_digest(every),
    )
    return [ep for n, ep in every.items() if n in mine], info


def shard_mismatch(old: ShardInfo | None, new: ShardInfo | None) -> str | None:
    """Why a run folder holding ``old`` cannot be resumed as ``new`` (None when it can)."""
    if old == new:
        return None

    def what(s: ShardInfo | None) -> str:
        if s is None:
            return "a whole run (no --shard)"
        return (
            f"shard {s.index}/{s.count} of {s.episodes} episode(s) (set {s.episodes_digest[:12]})"
        )

    fix = (
        "drop --shard"
        if old is None
        else f"pass --shard {old.index}/{old.count} with the same --tasks and --runs"
    )
    return (
        f"it holds {what(old)}, this command asks for {what(new)}: {fix}, or choose another --out"
    )


class Played(Protocol):
    """What :func:`select_results` reads of an episode's result (an
    :class:`~vical.run.results.EvalResult`, which imports this module)."""

    @property
    def task_id(self) -> str: ...
    @property
    def run_index(self) -> int: ...
    @property
    def actions(self) -> list[str]: ...


_R = TypeVar("_R", bound=Played)


def select_results(results: Sequence[_R], shard: Shard) -> list[_R]:
    """The results of ``shard`` for a replay, in their given order.

    Here the cost of an episode is known: the actions it logged times its task's
    frame skip (the frames a replay plays). The slices are a pure function of the
    results, so every machine verifying one bundle cuts them the same way.
    """
    from vical.spec import get_task

    skip = {r.task_id: get_task(r.task_id).env.frame_skip for r in results}
    costs = {
        episode_name(r.task_id, r.run_index): len(r.actions) * skip[r.task_id] for r in results
    }
    mine = set(assign(costs, shard.count)[shard.index])
    return [r for r in results if episode_name(r.task_id, r.run_index) in mine]
