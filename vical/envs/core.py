"""The one interface every environment family implements.

A family module provides an :class:`Adapter` subclass: it owns the simulator,
knows how to take one primitive step with a native action, draws the frame and
keeps the environment-specific progress that its score and pass rule read.

:class:`VicalEnv` wraps an adapter with everything that is common to all
families: the start state (seed, initial skipped frames and human-init replay,
all outside the decision budget), the canonical action vocabulary, frame skip
with NOOP fill, life-loss termination, the max-steps cap, score clamping, and a
sha256 of every frame.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vical.spec import TaskSpec


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
    frame: np.ndarray
    frame_sha256: str
    terminated: bool
    truncated: bool
    outcome: str | None
    score: float
    passed: bool

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def frame_sha256(frame: np.ndarray) -> str:
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
    def frame(self) -> np.ndarray:
        """The current RGB uint8 frame (H, W, 3)."""

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

    def progress(self) -> dict[str, Any]:
        """Small JSON-able summary of the scoring state, for logs."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator resources."""


class VicalEnv:
    """A vical task as an environment: canonical actions in, frames out."""

    def __init__(self, task: TaskSpec, adapter: Adapter):
        self.task = task
        self.adapter = adapter
        spec = task.env
        self.actions: dict[str, Any] = dict(spec.actions)
        self.noop = spec.noop
        self.frame_skip = spec.frame_skip
        self.action_steps = spec.action_steps
        self.max_steps = task.max_steps
        self.life_loss_terminates = spec.life_loss_terminates
        self.steps = 0
        self.done = True
        self.outcome: str | None = None
        self._frame: np.ndarray | None = None

    @property
    def action_names(self) -> list[str]:
        return list(self.actions)

    # -- start state -------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Bring the simulator to the task's start state and return its frame."""
        v = self.task.variant
        self.adapter.reset(v.seed)
        for i in range(v.initial_skip):
            tick = self.adapter.act(self.noop)
            if tick.terminated:
                raise RuntimeError(f"{self.task.id}: episode ended during initial skip {i}")
        for j, name in enumerate(v.init_actions):
            ended, _ = self._decision(name, started=False)
            if ended:
                raise RuntimeError(
                    f"{self.task.id}: episode ended during human-init action {j} ({name})"
                )
        self.adapter.begin()
        self.steps = 0
        self.done = False
        self.outcome = None
        self._frame = self._checked_frame()
        return self._frame

    # -- decisions ---------------------------------------------------------
    def _decision(self, name: str, started: bool = True) -> tuple[str | None, bool]:
        """Apply one canonical action with frame skip and NOOP fill.

        The action is held for the first ``action_steps`` of ``frame_skip``
        slots; the remaining slots take the NOOP action. Returns the ending
        outcome (or None) and whether a life was lost.
        """
        if name not in self.actions:
            raise InvalidActionError(
                f"{name!r} is not an action of {self.task.id}; legal actions: "
                f"{', '.join(self.actions)}"
            )
        native = self.actions[name]
        for slot in range(self.frame_skip):
            lives_before = self.adapter.lives() if self.life_loss_terminates else None
            tick = self.adapter.act(native if slot < self.action_steps else self.noop)
            # Before the start state (human-init replay) the adapter's scoring state does
            # not exist yet: only native termination ends the replay there.
            ending = self.adapter.ending(tick.terminated) if started else None
            if ending is None and tick.terminated:
                ending = "Terminated"
            if ending is not None:
                return ending, False
            if lives_before is not None:
                after = self.adapter.lives()
                if after is not None and after < lives_before:
                    return "Terminated", True
        return None, False

    def step(self, action: str) -> Step:
        """Take one decision. Raises :class:`InvalidActionError` for a name outside the vocabulary."""
        if self.done:
            raise EpisodeOverError(f"{self.task.id}: the episode is over; call reset()")
        ending, _ = self._decision(action)
        self.steps += 1
        terminated = ending is not None
        truncated = not terminated and self.steps >= self.max_steps
        if truncated:
            ending = "Time Out"
        self.done = terminated or truncated
        self.outcome = ending
        self._frame = self._checked_frame()
        return Step(
            index=self.steps,
            action=action,
            frame=self._frame,
            frame_sha256=frame_sha256(self._frame),
            terminated=terminated,
            truncated=truncated,
            outcome=ending,
            score=self.score(),
            passed=self.passed(),
        )

    # -- reading -----------------------------------------------------------
    def _checked_frame(self) -> np.ndarray:
        f = self.adapter.frame()
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
            raise TypeError(
                f"{self.task.id}: frame must be RGB uint8 (H, W, 3), got {f.dtype} {f.shape}"
            )
        return f

    @property
    def frame(self) -> np.ndarray:
        if self._frame is None:
            raise RuntimeError("call reset() first")
        return self._frame

    def score(self) -> float:
        """Score on [0, 100], floored and capped."""
        s = float(self.adapter.score())
        if not np.isfinite(s):
            s = 0.0
        return round(min(max(s, 0.0), 100.0), 6)

    def passed(self) -> bool:
        return bool(self.adapter.passed())

    def progress(self) -> dict[str, Any]:
        return self.adapter.progress()

    def close(self) -> None:
        self.adapter.close()

    def __enter__(self) -> VicalEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
