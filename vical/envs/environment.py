""":class:`VicalEnv`: a task as an environment, one adapter inside.

It wraps an adapter (:class:`vical.envs.core.Adapter`) with everything that is
common to all families: the start state (seed, initial skipped frames and human-init replay,
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
the same process (:meth:`~vical.envs.core.Adapter.seed_and_skip`: ALE keeps the seeded emulator
and points of the initial skip, so the tasks of a game load its ROM once and
play their longest initial skip once); checked starts always play from the seed.

A snapshot that does not prove exact (it raises, or a restored state plays
differently) is not used: that environment replays decisions from the start
instead, which is correct but slow. Each such fallback is counted per
environment key (:func:`snapshot_fallbacks`, for this process) and the first one
of each environment key is logged as a warning on the ``vical.envs`` logger,
naming the task and the reason, so an adapter whose snapshot broke (an upstream
change, a new game) shows up instead of only slowing runs and searches down.
"""

from __future__ import annotations

import logging
import os
import random
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vical.envs.core import (
    Adapter,
    EpisodeOverError,
    Frame,
    InvalidActionError,
    Outcome,
    Step,
    frame_sha256,
)
from vical.spec import TaskSpec


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

logger = logging.getLogger("vical.envs")
# environment key -> snapshot fallbacks to replay in this process; the keys warned about
_FALLBACKS: Counter[str] = Counter()
_WARNED: set[str] = set()


def snapshot_fallbacks() -> dict[str, int]:
    """How many times, in this process, a snapshot that did not prove exact sent an
    environment back to replaying decisions, by environment key (module docstring)."""
    return dict(_FALLBACKS)


def _fell_back(task: TaskSpec, where: str, reason: str) -> None:
    """Count one snapshot fallback of ``task``'s environment; warn on its first."""
    key = task.env.env
    _FALLBACKS[key] += 1
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning(
            "%s: the %s snapshot is not used (%s); environment %r replays decisions from "
            "the start instead (slow). Counted in vical.envs.environment.snapshot_fallbacks().",
            task.id,
            where,
            reason,
            key,
        )


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


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
                except Exception as e:  # no snapshot here: this simulator replays its starts
                    _STARTS[self.adapter] = _REPLAY
                    _fell_back(self.task, "start state's", f"snapshot() raised {_failure(e)}")
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

    def _probe(
        self, actions: list[str], started: bool, watch: bool | None
    ) -> list[tuple[str, Outcome]]:
        """Take ``actions`` unrecorded, up to the first that ends the episode or costs a
        life: each one's frame hash and outcome (what a snapshot check compares)."""
        out = []
        for a in actions:
            o = self.decide(a, started, watch, record=False)
            out.append((frame_sha256(self.adapter.frame()), o))
            if o.ending is not None or o.life_lost:
                break
        return out

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

        def run() -> list[tuple[str, Outcome]]:
            return self._probe(probe, started, watch)

        native: Any = None
        reason = "a restored snapshot played six probe decisions differently"
        try:
            native = self.adapter.snapshot()
            first = run()
            self.adapter.restore(native)
            second = run()
            self.adapter.restore(native)
            third = run()
            ok = first == second == third
        except Exception as e:  # a snapshot that cannot run here is not used
            ok, reason = False, _failure(e)
        self._keep_or_replay(
            ok, native, "episode's", reason, lambda: self._replay_history(begun, history)
        )
        for k, v in fields.items():
            setattr(self, k, v)
        self._history = history
        return ok

    def _keep_or_replay(
        self, ok: bool, native: Any, where: str, reason: str, replay: Callable[[], None]
    ) -> None:
        """After a snapshot check: restore ``native`` if it proved exact (``ok``), else
        count and warn of the fallback (:func:`snapshot_fallbacks`) and rebuild the
        state by ``replay``."""
        if ok:
            self.adapter.restore(native)
        else:
            _fell_back(self.task, where, reason)
            replay()

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

        def run(probe: list[str]) -> list[tuple[str, Outcome]]:
            return self._probe(probe, started=False, watch=None)

        def replayed() -> None:
            self._play_start()
            self.adapter.frame()  # the start state includes its drawn frame

        native: Any = None
        reason = "a restored snapshot played probe decisions differently"
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
                reason = "a restored start played probe decisions unlike a replayed start"
        except Exception as e:  # a snapshot that cannot run here is not used
            ok, reason = False, _failure(e)
        self._keep_or_replay(ok, native, "start state's", reason, replayed)
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
