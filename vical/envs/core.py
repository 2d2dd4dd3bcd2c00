"""The one interface every environment family implements.

A family module provides an :class:`Adapter` subclass: it owns the simulator,
knows how to take one primitive step with a native action, draws the frame and
keeps the environment-specific progress that its score and pass rule read.

:class:`VicalEnv` wraps an adapter with everything that is common to all
families: the start state (seed, initial skipped frames and human-init replay,
all outside the decision budget), the canonical action vocabulary, frame skip
with NOOP fill, life-loss termination, the max-steps cap, score clamping, and a
sha256 of every frame. The decision step (:meth:`VicalEnv.decide`) is written
once, here: the runtime, the human-init replay and the authoring tools' search
simulators all go through it. :meth:`VicalEnv.snapshot` / :meth:`VicalEnv.restore`
save and restore the whole environment (adapters supply the simulator part)
and :meth:`VicalEnv.replay` plays a list of decisions from the start.

Start states are played once per simulator instance: a reset plays the seed,
the initial skip and the human-init actions and, when the adapter's snapshot
proves exact there, saves that state (before the scoring state begins) with its
frame; every later reset of that adapter restores it instead of replaying
(:func:`start_state`). A simulator saves at its second reset, because proving
the snapshot exact costs about three replays of the start: a simulator reset
once (one episode per task and process, the common case in tests and small runs)
pays nothing extra. ``VICAL_REPLAY_STARTS=1`` turns this off.

Three ways to reach the start (``starts=`` of :class:`VicalEnv` and
:func:`vical.envs.make_env`): ``checked`` (the default, above), ``trusted``
(the snapshot is saved at the simulator's first reset without the check, for a
caller that re-checks any surprising result on replayed starts, as
verification does: a bundle's claims either match or are replayed again the
slow way before a verdict), and ``replayed`` (every start replayed, the path
``VICAL_REPLAY_STARTS=1`` forces everywhere). A trusted start may also resume
from a simulator state the adapter saved on the way to another task's start in
the same process (:meth:`Adapter.seed_and_skip`: ALE keeps the seeded emulator
and points of the initial skip, so the tasks of a game load its ROM once and
play their longest initial skip once); checked starts always play from the seed.
"""

from __future__ import annotations

import copy
import hashlib
import os
import random
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
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


@dataclass(frozen=True)
class Snapshot:
    """A saved :class:`VicalEnv`: the adapter's state (None: restore by replay) and the env's own."""

    native: Any
    fields: dict[str, Any]


@dataclass(frozen=True)
class StartState:
    """An adapter's saved start state: its native snapshot, taken after the seed, the
    initial skip and the human-init actions and after the start frame was drawn,
    before ``begin``; and that frame (a restored emulator need not redraw its screen)."""

    native: Any
    frame: Frame


# What each adapter instance knows of its start: absent before its first reset;
# _PLAYED after one replayed start; a StartState once a saving reset proved the
# snapshot exact there; _REPLAY when it did not (those adapters replay every
# start). Weak keys: a dropped adapter takes its start with it.
_PLAYED = "played"
_REPLAY = "replay"
_PLAYED_NOW = "played now"  # reset() only: this call has just played the start
_STARTS: weakref.WeakKeyDictionary[Adapter, StartState | str] = weakref.WeakKeyDictionary()
# Start states saved without the check, for ``starts="trusted"`` environments only.
_TRUSTED: weakref.WeakKeyDictionary[Adapter, StartState] = weakref.WeakKeyDictionary()
STARTS = ("checked", "trusted", "replayed")

# set to 1 to replay every start (the path taken before start snapshots existed)
REPLAY_STARTS_VAR = "VICAL_REPLAY_STARTS"


def start_snapshots_enabled() -> bool:
    """False when ``$VICAL_REPLAY_STARTS`` asks for every start to be replayed."""
    return os.environ.get(REPLAY_STARTS_VAR, "").strip().lower() not in ("1", "true", "yes")


def start_state(adapter: Adapter) -> StartState | None:
    """The adapter's saved start state, None while it has none."""
    known = _STARTS.get(adapter)
    return known if isinstance(known, StartState) else None


def reusable(adapter: Adapter) -> bool:
    """Whether a later reset brings the adapter back to its start whatever it went through:
    it has a saved start state or has played one start and not failed the snapshot check."""
    known = _STARTS.get(adapter)
    return isinstance(known, StartState) or known == _PLAYED or adapter in _TRUSTED


# one decision as recorded for replay: (action, started, lives watched, frame drawn after it).
# Drawing is part of the record because some simulators' renderers keep state
# (Flappy Bird's wing animation advances per drawn frame).
_Decision = tuple[str, bool, bool | None, bool]


class VicalEnv:
    """A vical task as an environment: canonical actions in, frames out."""

    def __init__(
        self,
        task: TaskSpec,
        adapter: Adapter,
        release: Callable[[Adapter], None] | None = None,
        save_first_start: bool = False,
        starts: str = "checked",
    ):
        """``release``: called with the adapter by :meth:`close` instead of closing it
        (:func:`vical.envs.make_env` hands its adapters back to a per-process pool).
        ``save_first_start``: save the start state at the simulator's first reset
        rather than its second (worth it when the simulator will be reset again).
        ``starts``: ``checked``, ``trusted`` or ``replayed`` (module docstring)."""
        if starts not in STARTS:
            raise ValueError(f"starts={starts!r}: expected one of {', '.join(STARTS)}")
        self._starts = starts
        self.task = task
        self.adapter = adapter
        self._release = release
        self._save_first_start = save_first_start
        self._closed = False
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
        self._frame: Frame | None = None
        self._begun = True
        self._history: list[_Decision] = []  # decisions since reset, for replay restores
        self._snapshot_exact: bool | None = None  # checked on the first snapshot

    @property
    def action_names(self) -> list[str]:
        return list(self.actions)

    # -- start state -------------------------------------------------------
    def reset(self, begin: bool = True) -> Frame:
        """Bring the simulator to the task's start state and return its frame.

        With ``begin=False`` the adapter's scoring state is not started: the
        environment stands after the seed, the initial skip and the init actions,
        and decisions are taken with :meth:`decide` (``started=False``), as the
        authoring tools' search simulators do.
        """
        if self._closed and self._release is not None:
            raise RuntimeError(
                f"{self.task.id}: this environment was closed and its simulator handed on; "
                "make a new one with vical.envs.make_env"
            )
        replay = self._starts == "replayed" or not start_snapshots_enabled()
        known: StartState | str | None = _REPLAY if replay else _STARTS.get(self.adapter)
        frame: Frame | None = None
        if self._starts == "trusted" and not isinstance(known, StartState) and known != _REPLAY:
            known = _TRUSTED.get(self.adapter)
            if known is None:
                # the first start of this simulator: played (from a state shared with
                # another task's start where the adapter has one), then saved unchecked
                self._play_start(shared=True)
                frame = self._checked_frame()
                try:
                    _TRUSTED[self.adapter] = StartState(self.adapter.snapshot(), frame.copy())
                except Exception:  # no snapshot here: this simulator replays its starts
                    _STARTS[self.adapter] = _REPLAY
                known = _PLAYED_NOW
        if known == _PLAYED_NOW:
            pass
        elif isinstance(known, StartState):
            # a saved start: the simulator state as the replay left it, its frame drawn
            self.adapter.restore(known.native)
            frame = known.frame.copy()
        elif known == _PLAYED or (known is None and self._save_first_start):
            # replay the start and save it if the snapshot proves exact there
            self._play_start()
            frame = self._checked_frame()
            native = self._start_snapshot()
            _STARTS[self.adapter] = _REPLAY if native is None else StartState(native, frame.copy())
        else:
            self._play_start()
            if known is None:
                _STARTS[self.adapter] = _PLAYED
        if begin:
            self.adapter.begin()
        self._begun = begin
        self._history = []
        self.steps = 0
        self.done = False
        self.outcome = None
        self._frame = self._checked_frame() if frame is None else frame
        return self._frame

    def _play_start(self, shared: bool = False) -> None:
        """Seed the simulator, skip the initial frames and replay the human-init actions
        (``shared``: from a state shared with other tasks, where the adapter has one)."""
        v = self.task.variant
        self.adapter.seed_and_skip(
            v.seed, v.initial_skip, self.noop, shared=shared, stepped=bool(v.init_actions)
        )
        for j, name in enumerate(v.init_actions):
            if self.decide(name, started=False, record=False).ending is not None:
                raise RuntimeError(
                    f"{self.task.id}: episode ended during human-init action {j} ({name})"
                )

    # -- decisions ---------------------------------------------------------
    def decide(
        self,
        name: str,
        started: bool = True,
        watch_lives: bool | None = None,
        record: bool = True,
    ) -> Outcome:
        """Apply one canonical action with frame skip and NOOP fill: THE decision step.

        The action is held for the first ``action_steps`` of ``frame_skip``
        slots; the remaining slots take the NOOP action. The decision stops at
        the first slot that ends the episode or costs a life. ``started``: the
        adapter's ending rules apply (before the start state only native
        termination ends play). ``watch_lives`` (default: the task's life-loss
        termination) checks the lives counter after every slot; a life lost ends
        the episode only under life-loss termination. This neither counts a step
        nor updates the frame: :meth:`step` does that for the agent's decisions.
        """
        if name not in self.actions:
            raise InvalidActionError(
                f"{name!r} is not an action of {self.task.id}; legal actions: "
                f"{', '.join(self.actions)}"
            )
        if record:
            self._history.append((name, started, watch_lives, False))
        watch = self.life_loss_terminates if watch_lives is None else watch_lives
        native = self.actions[name]
        lives0 = self.adapter.lives() if watch else None
        reward = 0.0
        for slot in range(self.frame_skip):
            lives_before = self.adapter.lives() if watch else None
            tick = self.adapter.act(native if slot < self.action_steps else self.noop)
            reward += tick.reward
            # Before the start state (human-init replay) the adapter's scoring state does
            # not exist yet: only native termination ends the replay there.
            ending = self.adapter.ending(tick.terminated) if started else None
            if ending is None and tick.terminated:
                ending = "Terminated"
            if ending is not None:
                after = self.adapter.lives() if lives0 is not None else None
                lost = after is not None and lives0 is not None and after < lives0
                return Outcome(reward, bool(tick.terminated), lost, ending)
            if lives_before is not None:
                after = self.adapter.lives()
                if after is not None and after < lives_before:
                    ending = "Terminated" if self.life_loss_terminates else None
                    return Outcome(reward, False, True, ending)
        return Outcome(reward, False, False, None)

    def step(self, action: str) -> Step:
        """Take one decision. Raises :class:`InvalidActionError` for a name outside the vocabulary."""
        if self.done:
            raise EpisodeOverError(f"{self.task.id}: the episode is over; call reset()")
        ending = self.decide(action, record=False).ending
        self._history.append((action, True, None, True))
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
            terminated=terminated,
            truncated=truncated,
            outcome=ending,
            score=self.score(),
            passed=self.passed(),
        )

    def replay(self, actions: Sequence[str]) -> list[Step]:
        """Reset to the start state and take ``actions``, stopping early if the episode ends."""
        self.reset()
        out: list[Step] = []
        for a in actions:
            if self.done:
                break
            out.append(self.step(a))
        return out

    # -- snapshots ---------------------------------------------------------
    _FIELDS = ("steps", "done", "outcome", "_frame", "_begun")

    @property
    def snapshot_exact(self) -> bool | None:
        """Whether the adapter's snapshot passed its check (None: not checked yet)."""
        return self._snapshot_exact

    def snapshot(self) -> Snapshot:
        """The environment's full state (simulator, step count, outcome, frame)."""
        if self._snapshot_exact is None and not self.done:
            self._snapshot_exact = self._check_snapshot()
        exact = self._snapshot_exact is not False
        fields = {k: getattr(self, k) for k in self._FIELDS}
        fields["_history"] = list(self._history)
        return Snapshot(self.adapter.snapshot() if exact else None, fields)

    def restore(self, snap: Snapshot) -> None:
        """Return to a state taken by :meth:`snapshot` (any number of times)."""
        if snap.native is None:
            self._replay_history(snap.fields["_begun"], snap.fields["_history"])
        else:
            self.adapter.restore(snap.native)
        for k, v in snap.fields.items():
            setattr(self, k, list(v) if k == "_history" else v)

    def _replay_history(self, begun: bool, history: list[_Decision]) -> None:
        self.reset(begin=begun)
        for name, started, watch, drawn in history:
            self.decide(name, started, watch, record=False)
            if drawn:
                self.adapter.frame()
        self._history = list(history)

    def _check_snapshot(self) -> bool:
        """Whether the adapter's snapshot reproduces a few seeded decisions exactly.

        Three runs of the same six decisions from the current state, separated by
        restores of one snapshot, must see the same frames, rewards and endings;
        on failure the state is rebuilt by replay, which serves from then on.
        """
        begun, history = self._begun, list(self._history)
        fields = {k: getattr(self, k) for k in self._FIELDS}
        rng = random.Random(12345)
        names = list(self.actions)
        probe = [rng.choice(names) for _ in range(6)]
        started = bool(history[-1][1]) if history else begun
        watch = history[-1][2] if history else None

        def run() -> list[tuple[Any, ...]]:
            out = []
            for a in probe:
                o = self.decide(a, started, watch, record=False)
                out.append((frame_sha256(self.adapter.frame()), o))
                if o.ending is not None or o.life_lost:
                    break
            return out

        try:
            native = self.adapter.snapshot()
            first = run()
            self.adapter.restore(native)
            second = run()
            self.adapter.restore(native)
            third = run()
            ok = first == second == third
        except Exception:  # a snapshot that cannot run here is simply not used
            ok = False
        if ok:
            self.adapter.restore(native)
        else:
            self._replay_history(begun, history)
        for k, v in fields.items():
            setattr(self, k, v)
        self._history = history
        return ok

    def _start_snapshot(self) -> Any:
        """The adapter's snapshot of the start state just played and drawn, if it proves
        exact there, else None; either way the simulator is then left in that state
        (restored from the snapshot that just proved exact, else replayed).

        Two seeded probes of eight decisions (taken as the human-init replay takes
        them) must each see the same frames, rewards and endings twice: the first
        from the live state and from the restored snapshot, the second from the
        restored snapshot and from a replayed start. A restore that missed part of
        the state would have to leave both probes unchanged to pass.
        """
        rng = random.Random(f"start|{self.task.id}")
        names = list(self.actions)
        probes = [[rng.choice(names) for _ in range(8)] for _ in range(2)]

        def run(probe: list[str]) -> list[tuple[Any, ...]]:
            out = []
            for a in probe:
                o = self.decide(a, started=False, record=False)
                out.append((frame_sha256(self.adapter.frame()), o))
                if o.ending is not None or o.life_lost:
                    break
            return out

        def replayed() -> None:
            self._play_start()
            self.adapter.frame()  # the start state includes its drawn frame

        native: Any = None
        try:
            native = self.adapter.snapshot()
            live = run(probes[0])
            self.adapter.restore(native)
            ok = run(probes[0]) == live
            if ok:
                self.adapter.restore(native)
                restored = run(probes[1])
                replayed()
                ok = run(probes[1]) == restored
        except Exception:  # a snapshot that cannot run here is simply not used
            ok = False
        if ok:
            self.adapter.restore(native)
        else:
            replayed()
        return native if ok else None

    # -- reading -----------------------------------------------------------
    def _checked_frame(self) -> Frame:
        f = self.adapter.frame()
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
            raise TypeError(
                f"{self.task.id}: frame must be RGB uint8 (H, W, 3), got {f.dtype} {f.shape}"
            )
        return f

    @property
    def frame(self) -> Frame:
        if self._frame is None:
            raise RuntimeError("call reset() first")
        return self._frame

    def score(self) -> float:
        """Score on [0, 100], floored and capped."""
        s = float(self.adapter.score())
        if not np.isfinite(s):
            s = 0.0
        cap = self.adapter.death_cap()
        if cap is not None:
            s = min(s, cap)
        return round(min(max(s, 0.0), 100.0), 6)

    def passed(self) -> bool:
        return bool(self.adapter.passed())

    def progress(self) -> dict[str, Any]:
        return self.adapter.progress()

    def close(self) -> None:
        """Close the simulator, or hand it to the ``release`` callback given at construction."""
        if self._closed:
            return
        self._closed = True
        self.done = True
        if self._release is not None:
            self._release(self.adapter)
        else:
            self.adapter.close()

    def __enter__(self) -> VicalEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def no_adapter(task: TaskSpec, family: str, base: str | None = None) -> TaskSpecError:
    """The one-line error of a family asked for a game that has no game module ``Adapter``
    (``base``: the class the family needs it to extend, named in the message)."""
    what = f"an Adapter class ({base})" if base else "an Adapter class"
    return TaskSpecError(
        f"{task.id}: {family} environment {task.env.env!r} has no adapter: "
        f"add vical/envs/games/{task.env.env}.py with {what}"
    )
