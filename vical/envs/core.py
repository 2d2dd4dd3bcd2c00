"""The one interface every environment family implements.

A family module provides an :class:`Adapter` subclass: it owns the simulator,
knows how to take one primitive step with a native action, draws the frame and
keeps the environment-specific progress that its score and pass rule read.
This module also holds the values a decision produces (:class:`Tick` for one
primitive step, :class:`Outcome` and :class:`Step` for one decision) and the
frame hash (:func:`frame_sha256`).

What every family gets on top of its adapter (the start state, the canonical
actions, frame skip, the step cap, snapshots of the whole environment) is
:class:`vical.envs.environment.VicalEnv`.
"""

from __future__ import annotations

import copy
import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from vical.envs.states import Facts, NativeState, SimState, StateKindError, fact_value
from vical.spec import TaskSpec, TaskSpecError

Frame = npt.NDArray[np.uint8]
"""An RGB frame: (height, width, 3) uint8."""


class InvalidActionError(ValueError):
    """An action name outside the task's canonical vocabulary."""


class EpisodeOverError(RuntimeError):
    """``step`` was called after the episode ended."""


@dataclass(frozen=True)
class Tick:
    """The result of one primitive simulator step."""

    reward: float = 0.0
    terminated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """The result of one decision (one canonical action)."""

    index: int
    action: str
    frame: Frame
    terminated: bool
    truncated: bool
    outcome: str | None
    score: float
    passed: bool

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @cached_property
    def frame_sha256(self) -> str:
        """sha256 of the frame (:func:`frame_sha256`), computed on first access.

        Runs, verification and the Gymnasium wrapper read it for every decision;
        callers that only play (searches, experts, benchmarks of the simulator)
        never pay for hashing a frame they do not record.
        """
        return frame_sha256(self.frame)


@dataclass(frozen=True)
class Outcome:
    """What one decision did to the simulator.

    ``reward`` is the raw reward summed over the slots played; ``ended`` is the
    simulator's own game over; ``life_lost`` a drop in the lives counter (when
    lives are watched); ``ending`` the outcome label when the decision ends the
    episode (a native end, an adapter's ending rule once started, or a life lost
    under life-loss termination), else None.
    """

    reward: float
    ended: bool
    life_lost: bool
    ending: str | None = None

    @property
    def bad(self) -> bool:
        """The decision ended the game or cost a life."""
        return self.ended or self.life_lost


def frame_sha256(frame: npt.NDArray[Any]) -> str:
    """sha256 of a frame's shape, dtype and pixel bytes."""
    arr = np.ascontiguousarray(frame)
    h = hashlib.sha256(f"{arr.shape}|{arr.dtype}|".encode())
    h.update(arr.data)  # the buffer itself: no copy of the pixels
    return h.hexdigest()


class Adapter(ABC):
    """A simulator behind the vical contract. One subclass per family (or per env).

    Life cycle: ``reset(seed)``; any number of ``act`` calls for initial skipped
    frames and the human-init replay; ``begin()`` once the start state is
    reached; then ``act`` calls for the agent's decisions. ``score``, ``passed``
    and ``ending`` read progress accumulated since ``begin``.

    State API (:mod:`vical.envs.states`), the only way code outside
    :mod:`vical.envs` reads or changes a simulator's state:
    ``read_state() -> SimState`` (a value), ``set_state(state)`` (the next
    ``frame()`` draws it) and ``state_facts() -> Facts`` (the state as named,
    JSON-able facts). Each game's reader and writer lives with its adapter.
    """

    def __init__(self, task: TaskSpec):
        self.task = task

    @abstractmethod
    def reset(self, seed: int) -> None:
        """Reset the simulator with the task's seed."""

    @abstractmethod
    def act(self, native: Any) -> Tick:
        """Advance one primitive step (one outer frame-skip slot) with a native action."""

    @abstractmethod
    def frame(self) -> Frame:
        """The current RGB uint8 frame (H, W, 3)."""

    def seed_and_skip(self, seed: int, skip: int, noop: Any, shared: bool, stepped: bool) -> None:
        """Reset with ``seed`` and play ``skip`` primitive steps of ``noop`` (the initial skip).

        ``shared``: the caller trusts simulator states shared between the tasks of this
        process (trusted starts), so an adapter may resume from one it saved on the way
        to another task's start instead of playing from the seed. ``stepped``: more
        steps follow before the start frame is read (human-init actions), so a
        restored state need not come with its drawn screen. The default plays it all.
        """
        self.reset(seed)
        self.play_skip(0, skip, noop)

    def play_skip(self, first: int, stop: int, noop: Any) -> None:
        """Play the initial skip's steps ``first`` to ``stop`` - 1 with ``noop``."""
        for i in range(first, stop):
            if self.act(noop).terminated:
                raise RuntimeError(f"{self.task.id}: episode ended during initial skip {i}")

    def begin(self) -> None:  # noqa: B027 - optional hook
        """Called once at the start state; snapshot what scoring measures from."""

    @abstractmethod
    def score(self) -> float:
        """Progress on the 0-100 scale (the core clamps it)."""

    @abstractmethod
    def passed(self) -> bool:
        """The task's success condition, independent of the score."""

    def ending(self, native_terminated: bool) -> str | None:
        """Outcome label if the episode ends now, else None.

        The default ends on native termination, labelled Victory when the pass
        rule holds and Terminated otherwise. Families override it to add their
        own ending rules (a cliff fall, three pipes passed, a crossing made).
        """
        if native_terminated:
            return "Victory" if self.passed() else "Terminated"
        return None

    def lives(self) -> int | None:
        """Remaining lives when the game has them (for life-loss termination)."""
        return None

    def death_cap(self) -> float | None:
        """The most of its score an episode keeps now, or None when no cap applies.

        Appendix 2.2: "selected environments additionally cap the retained score
        after death". Games whose task file sets ``cap_after_death`` return, once the
        episode has died, the most an episode that keeps its life but does not pass
        can score (see :func:`vical.envs.scoring.cap_after_death`); None otherwise.
        """
        return None

    def progress(self) -> dict[str, Any]:
        """Small JSON-able summary of the scoring state, for logs."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator resources."""

    # True when :meth:`close` hands the simulator on to the next adapter of the same
    # environment instead of releasing it (ALE keeps its emulator: a ROM load saved);
    # :func:`vical.envs.make_env` then closes an idle adapter of another task of that
    # environment before it builds one, so the new adapter can take its simulator.
    hands_on_simulator: bool = False

    # -- snapshots ---------------------------------------------------------
    # Keys of the adapter's attributes never copied by the default snapshot: the
    # task (read only) and what an adapter subclass names in ``_SHARED``.
    _SHARED: frozenset[str] = frozenset({"task"})

    def snapshot(self) -> Any:
        """The simulator's full state, restorable any number of times by :meth:`restore`.

        The default deep-copies the adapter's attributes, sharing pygame render
        resources and static tables; adapters whose simulator has a native
        save/restore (ALE, Procgen) override both methods. :class:`VicalEnv`
        checks once per environment that a snapshot reproduces play exactly and
        otherwise falls back to replaying the decisions from reset.
        """
        return _deepcopy_shared({k: v for k, v in vars(self).items() if k not in self._SHARED})

    def restore(self, state: Any) -> None:
        """Return to a state taken by :meth:`snapshot`."""
        vars(self).update(_deepcopy_shared(state))

    # -- the state API (:mod:`vical.envs.states`) ----------------------------
    def read_state(self) -> SimState:
        """The simulator's state now, a value :meth:`set_state` returns to.

        The default is the adapter's whole :meth:`snapshot` (a
        :class:`~vical.envs.states.NativeState`); a game whose state is a few named
        values returns a state class of its own, which a caller may also build.
        """
        return NativeState(self.snapshot())

    def set_state(self, state: SimState) -> None:
        """Put the simulator in ``state``: the next :meth:`frame` draws it.

        A :class:`~vical.envs.states.NativeState` brings back everything it holds,
        scoring progress included; a game's own state class sets the game only and
        leaves the scoring progress as it is. Raises
        :class:`~vical.envs.states.StateKindError` for a state of another kind.
        """
        if not isinstance(state, NativeState):
            raise StateKindError(
                f"{self.task.id}: {type(self).__name__} sets a NativeState, "
                f"not a {type(state).__name__}"
            )
        self.restore(state.native)

    def state_facts(self) -> Facts:
        """The simulator's state now as named facts (:data:`~vical.envs.states.Facts`).

        The default: the lives counter where the game has one, then the scalar
        entries of :meth:`progress` by name, floats to 3 decimals. Games whose
        renderer is known exactly override it with what their frame shows.
        """
        facts: Facts = {}
        lives = self.lives()
        if lives is not None:
            facts["lives"] = int(lives)
        for k, v in sorted(self.progress().items()):
            if isinstance(v, dict):
                continue
            facts[str(k)] = fact_value(v)
        return facts


# attributes that never change during an episode: shared by snapshots, not copied
_STATIC_ATTRS = frozenset({"P", "task", "dist", "locs"})


def _share_memo(
    obj: Any, memo: dict[int, Any], depth: int = 0, seen: set[int] | None = None
) -> None:
    """Pre-fill a deepcopy memo so render resources (pygame) and static tables are shared."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 5:
        return
    seen.add(id(obj))
    # pygame objects and subclasses of them (highway-env's WorldSurface) are shared
    if any((c.__module__ or "").startswith("pygame") for c in type(obj).__mro__):
        memo[id(obj)] = obj
        return
    if isinstance(obj, list | tuple | set | frozenset):
        for x in obj:
            _share_memo(x, memo, depth + 1, seen)
    elif isinstance(obj, dict):
        for x in obj.values():
            _share_memo(x, memo, depth + 1, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for k, v in vars(obj).items():
            if k in _STATIC_ATTRS:
                memo[id(v)] = v
            else:
                _share_memo(v, memo, depth + 1, seen)


def _deepcopy_shared(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of an attribute dict that shares render resources and static tables."""
    memo: dict[int, Any] = {}
    for k, v in state.items():
        if k in _STATIC_ATTRS:
            memo[id(v)] = v
        else:
            _share_memo(v, memo, 1)
    return copy.deepcopy(state, memo)


def no_adapter(task: TaskSpec, family: str, base: str | None = None) -> TaskSpecError:
    """The one-line error of a family asked for a game that has no game module ``Adapter``
    (``base``: the class the family needs it to extend, named in the message)."""
    what = f"an Adapter class ({base})" if base else "an Adapter class"
    return TaskSpecError(
        f"{task.id}: {family} environment {task.env.env!r} has no adapter: "
        f"add vical/envs/games/{task.env.env}.py with {what}"
    )
