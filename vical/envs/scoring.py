"""Score families (paper Appendix 2.2) as small reusable pieces.

Every function returns a value on the 0-100 scale, floored at 0 and capped at
100. Family adapters keep the raw quantities (reward sums, event counts,
distances, milestones reached) and call these to map them onto the scale;
the targets they use come from the task YAML with their provenance.

Which environments use which family:

* :func:`capped_ratio` - cumulative-reward tasks: most ALE games, Procgen,
  highway speed, and the dense classic-control scores (Acrobot height gain,
  MountainCar position progress).
* :class:`EventCounter` - event-driven tasks with monotonic counts: pipes
  passed (Flappy Bird), rows cleared (Tetris), bricks (Breakout), ALE events.
* :func:`horizon_ratio` - survival tasks: CartPole; crash-free driving.
* :func:`path_efficiency` - navigation: CliffWalking, the MiniGrid mazes.
* :class:`Milestones` - structured progress: Taxi (pickup, delivery progress,
  efficient drop-off), UnlockPickup (key, door, object), BattleZone.

The cap after death (:func:`cap_after_death`): "selected environments
additionally cap the retained score after death" (Appendix 2.2). The task file
selects an environment with the scoring parameter ``cap_after_death: true``;
its adapter then says what the cap is (the most an episode that keeps its life
but does not pass can score) and the core keeps a dying episode's score at or
below it. Which environments and why: ``docs/random-row.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CAP_AFTER_DEATH = "cap_after_death"  # the task file's switch (a scoring parameter)


def clamp(score: float) -> float:
    """Floor at 0 and cap at 100."""
    return min(max(float(score), 0.0), 100.0)


def capped_ratio(value: float, target: float) -> float:
    """100 * min(max(value, 0) / target, 1): cumulative reward against a reference."""
    if target <= 0:
        raise ValueError(f"capped_ratio target must be positive, got {target}")
    return 100.0 * min(max(float(value), 0.0) / float(target), 1.0)


def cap_after_death(
    params: Mapping[str, Any], died: bool, non_pass_ceiling: Callable[[], float]
) -> float | None:
    """The most a dying episode keeps of its score, or None when no cap applies.

    A cap applies when the task's parameters switch it on (``cap_after_death:
    true``) and the episode has died; it is ``non_pass_ceiling()``: the highest
    score an episode that keeps its life and still fails can reach, so a death
    never keeps more than a non-pass is worth (for a points threshold, the score
    of the threshold itself).
    """
    switch = params.get(CAP_AFTER_DEATH, False)
    if not isinstance(switch, bool):
        raise ValueError(f"{CAP_AFTER_DEATH} must be true or false, got {switch!r}")
    if not switch or not died:
        return None
    return clamp(non_pass_ceiling())


def horizon_ratio(survived: int, horizon: int) -> float:
    """Share of the decision horizon survived, on 0-100."""
    if horizon <= 0:
        raise ValueError(f"horizon must be positive, got {horizon}")
    return clamp(100.0 * survived / horizon)


def path_efficiency(
    start_distance: float,
    best_distance: float,
    reached: bool,
    steps_used: int,
    optimal_steps: int,
    progress_weight: float = 80.0,
) -> float:
    """Navigation score from shortest-path distances.

    Before the goal is reached the score is ``progress_weight`` times the share
    of the start's shortest-path distance that has been closed (best distance
    ever reached, so a retreat never lowers it). Reaching the goal gives the
    progress weight plus the rest in proportion to path efficiency
    (optimal steps / steps used), so the shortest route scores 100.
    """
    if reached:
        eff = 1.0 if steps_used <= 0 else min(1.0, optimal_steps / steps_used)
        return clamp(progress_weight + (100.0 - progress_weight) * eff)
    if start_distance <= 0:
        return 0.0
    closed = max(0.0, start_distance - best_distance) / start_distance
    return clamp(progress_weight * min(closed, 1.0))


@dataclass
class EventCounter:
    """A monotonic count of events, capped at ``target`` for the score.

    ``add`` ignores negative increments: the count never goes down (it stays
    monotonic across life loss when the objective is cumulative).
    """

    target: float
    count: float = 0.0

    def add(self, n: float = 1.0) -> None:
        if n > 0:
            self.count += n

    def score(self) -> float:
        return capped_ratio(self.count, self.target)


@dataclass
class Milestones:
    """Ordered milestones with weights; the score is the sum of those reached plus partial credit.

    ``weights`` maps each milestone to its share of 100. ``partial`` holds a
    fraction in [0, 1] of the next unreached milestone's weight (for example
    the share of the distance to the destination already covered).
    """

    weights: dict[str, float]
    reached: set[str] = field(default_factory=set)
    partial: float = 0.0

    def __post_init__(self) -> None:
        total = sum(self.weights.values())
        if abs(total - 100.0) > 1e-6:
            raise ValueError(f"milestone weights must sum to 100, got {total}")

    def hit(self, name: str) -> None:
        if name not in self.weights:
            raise KeyError(f"unknown milestone {name!r}; known: {list(self.weights)}")
        self.reached.add(name)

    def hit_all(self, names: Iterable[str]) -> None:
        for n in names:
            self.hit(n)

    def score(self) -> float:
        done = sum(w for k, w in self.weights.items() if k in self.reached)
        nxt = next((w for k, w in self.weights.items() if k not in self.reached), 0.0)
        return clamp(done + nxt * min(max(self.partial, 0.0), 1.0))
