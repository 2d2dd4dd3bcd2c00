"""Atari 2600 games through ``ale-py`` (the ROMs ship inside its wheel).

One adapter serves every game through data: ``env_kwargs`` in the task YAML
carries the ALE game name, mode, difficulty and native frame skip; the
vocabulary maps canonical names to ALE joystick actions (``UPFIRE``...). The
full 18-action set is always opened, so any reduced vocabulary is just a
subset of names. Sticky actions are off (``repeat_action_probability=0``).

Game-specific rules (reward filters, RAM-based progress, variant RAM setup,
pass and ending rules) live in the game's module (``vical/envs/games/<env>.py``,
found by :func:`vical.envs.game_module`) as a subclass of :class:`ALEAdapter`
named ``Adapter``; games without such a module use the default capped-ratio
score on cumulative reward.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, cast

import ale_py
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from ale_py.env import AtariEnv

from vical.envs.core import Adapter, Tick
from vical.envs.scoring import cap_after_death, capped_ratio
from vical.envs.states import NativeState, SimState, StateKindError
from vical.spec import TaskSpec

# The emulator's start-up banners ("A.L.E: ...", "[Powered by Stella]") would be
# printed for every game made; keep only its errors.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

gym.register_envs(ale_py)

# pybind11 enum: iterable at run time, though its stub declares no ``__iter__``
_ACTION_INDEX = {a.name: int(a.value) for a in cast("Iterable[ale_py.Action]", ale_py.Action)}

# The eight joystick directions in canonical names, in the order the games' move lists use.
JOYSTICK = ("Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left", "Down+Right")


# Emulators of closed adapters, by (game, construction settings), for the next adapter
# of that game in this process; at most IDLE_EMULATORS each.
_IDLE_EMULATORS: dict[tuple[str, tuple[tuple[str, Any], ...]], list[AtariEnv]] = {}
IDLE_EMULATORS = 2

# Emulator states met on the way to trusted starts (``seed_and_skip`` with ``shared``),
# for the next task of the same game in this process: the state right after a seeded
# reset, by (game, construction settings, seed), and points of the initial skip, by
# (game, construction settings, digest of the emulator state the skip started from).
# Every task of a game shares one seed, so one ROM load serves them all and the longest
# initial skip is played once. States carry the emulator's random generator.
_SEEDED: dict[tuple[Any, ...], ale_py.ALEState] = {}
_SKIPPED: dict[tuple[Any, ...], dict[int, ale_py.ALEState]] = {}
SKIP_CHECKPOINT = 50  # initial-skip steps between two saved points


def plays_own_start(cls: type[ALEAdapter]) -> bool:
    """A game that keeps counts of its own play (its own ``reset``, ``act`` or
    ``on_unit_step``) plays its whole start instead of resuming a shared state."""
    return (
        cls.reset is not ALEAdapter.reset
        or cls.act is not ALEAdapter.act
        or cls.on_unit_step is not ALEAdapter.on_unit_step
    )


class ALEAdapter(Adapter):
    """Generic ALE game: reward since the start state against a calibrated target.

    ``env_kwargs``: ``game`` (ALE id suffix such as ``Pong``), optional
    ``mode`` and ``difficulty``, ``frameskip`` (native skip per primitive step,
    default 4) and ``unit_steps`` (primitive steps per outer slot, each of
    native skip ``frameskip``; Tennis uses 4 unit-frame steps).

    Default scoring: capped ratio of cumulative reward to target ``reward``;
    pass when cumulative reward reaches target ``pass_reward``.
    """

    def __init__(self, task: TaskSpec):
        super().__init__(task)
        kw = dict(task.env_kwargs)
        self.game = kw.pop("game")
        self.unit_steps = int(kw.pop("unit_steps", 1))
        kw.setdefault("frameskip", 4)
        self._emulator_key = (self.game, tuple(sorted(kw.items(), key=lambda item: item[0])))
        idle = _IDLE_EMULATORS.get(self._emulator_key)
        if idle:
            self.env = idle.pop()  # its ROM is loaded again by the seeded reset below
        else:
            self.env = cast(
                AtariEnv,
                gym.make(
                    f"ALE/{self.game}-v5",
                    repeat_action_probability=0.0,
                    full_action_space=True,
                    render_mode="rgb_array",
                    max_num_frames_per_episode=None,
                    **kw,
                ).unwrapped,
            )
        self.ale = self.env.ale
        self.tracking = False
        self.total = 0.0
        self.game_over = False

    # -- simulator --------------------------------------------------------
    @staticmethod
    def native_index(native: Any) -> int:
        if isinstance(native, int):
            return native
        try:
            return _ACTION_INDEX[str(native)]
        except KeyError:
            raise ValueError(
                f"unknown ALE action {native!r}; known: {', '.join(_ACTION_INDEX)}"
            ) from None

    def reset(self, seed: int) -> None:
        self.env.reset(seed=seed)  # seeds the emulator: reloads the ROM
        self._seeded()

    def _seeded(self) -> None:
        """The Python side of a reset, once the emulator stands after its seeded reset."""
        self._shown = None
        self.tracking = False
        self.total = 0.0
        self.game_over = False
        self.prepare()

    def prepare(self) -> None:
        """Game-specific setup right after reset (RAM-selected variants...)."""

    def seed_and_skip(self, seed: int, skip: int, noop: Any, shared: bool, stepped: bool) -> None:
        """With ``shared``, start from states saved by earlier trusted starts of this game.

        A restored emulator keeps the screen it last drew, so a saved state is used
        only when at least one emulator step follows it before the start frame is
        read. Games with their own ``reset``, ``act`` or ``on_unit_step`` (they keep
        counts of their own play) play the whole start.
        """
        own = plays_own_start(type(self))
        if not shared or own or not (skip or stepped):
            super().seed_and_skip(seed, skip, noop, shared, stepped)
            return
        seeded = _SEEDED.get((*self._emulator_key, seed))
        if seeded is None:
            self.env.reset(seed=seed)
            _SEEDED[(*self._emulator_key, seed)] = self.ale.cloneState(include_rng=True)
        else:
            self.ale.restoreState(seeded)
        self._seeded()
        if skip == 0:
            return
        base = self.ale.cloneState(include_rng=True)
        key = (*self._emulator_key, hashlib.sha256(base.serialize()).hexdigest())
        points = _SKIPPED.setdefault(key, {})
        done = max((k for k in points if k < skip or (stepped and k == skip)), default=0)
        if done:
            self.ale.restoreState(points[done])
        while done < skip:
            step = min(skip, (done // SKIP_CHECKPOINT + 1) * SKIP_CHECKPOINT)
            self.play_skip(done, step, noop)
            done = step
            points.setdefault(done, self.ale.cloneState(include_rng=True))

    def act(self, native: Any) -> Tick:
        self._shown = None
        idx = self.native_index(native if native is not None else "NOOP")
        reward = 0.0
        terminated = False
        info: dict[str, Any] = {}
        for _ in range(self.unit_steps):
            _obs, r, terminated, _trunc, step_info = self.env.step(idx)
            info = cast("dict[str, Any]", step_info)
            reward += float(r)
            self.on_unit_step(float(r))
            if terminated:
                break
        self.game_over = bool(terminated)
        tick = Tick(reward=reward, terminated=bool(terminated), info=info)
        if self.tracking:
            self.on_tick(tick)
        return tick

    def on_unit_step(self, reward: float) -> None:
        """Called after every primitive ALE step, for games that watch the RAM at that
        resolution (Tennis's ball-direction reversals); nothing by default."""

    def frame(self) -> npt.NDArray[np.uint8]:
        if self._shown is not None:
            return self._shown.copy()
        return np.ascontiguousarray(self.ale.getScreenRGB(), dtype=np.uint8)

    def ram(self) -> npt.NDArray[np.uint8]:
        return self.ale.getRAM()

    def lives(self) -> int | None:
        return int(self.ale.lives())

    hands_on_simulator = True

    def close(self) -> None:
        """Keep the emulator for the next adapter of the same game and settings.

        Every :meth:`reset` seeds the emulator, which reloads the ROM and sets mode
        and difficulty again, so nothing of this adapter's episode reaches the next
        one; what is saved is the emulator's construction (a ROM load of its own).
        """
        idle = _IDLE_EMULATORS.setdefault(self._emulator_key, [])
        if len(idle) < IDLE_EMULATORS:
            idle.append(self.env)
        else:
            self.env.close()

    # -- snapshots: the emulator's own save/restore plus the Python-side state --
    _SHARED = frozenset({"task", "env", "ale"})

    def snapshot(self) -> Any:
        return self.ale.cloneState(), super().snapshot()

    def restore(self, state: Any) -> None:
        emulator, attrs = state
        self.ale.restoreState(emulator)
        self._shown = None
        super().restore(attrs)

    # -- the state API: an emulator state holds no screen, so the screen goes with it --
    # The screen a set_state brought back, shown until the next emulator step.
    _shown: npt.NDArray[np.uint8] | None = None

    def read_state(self) -> NativeState:
        return NativeState((self.snapshot(), self.frame().copy()))

    def set_state(self, state: SimState) -> None:
        if not isinstance(state, NativeState):
            raise StateKindError(f"{self.task.id}: an ALE game sets a NativeState")
        snapshot, screen = state.native
        self.restore(snapshot)
        self._shown = screen

    # -- scoring (defaults; games override) -------------------------------
    # A game sets this where a pass needs the life kept to the end of the episode: the
    # games whose life loss ends the episode (Table 7, "life-loss termination") and in
    # which the paper saw no early success (Table 28, ES 0%). Their points threshold
    # then counts only for a player still alive when the episode ends, so reaching it
    # and then dying is a failure, as in Table 28's early deaths. This is our reading
    # of the two tables (a pass kept through a death would be an early success), not
    # a rule the paper states.
    pass_needs_life: bool = False

    def begin(self) -> None:
        self.total = 0.0
        self.start_lives = self.last_lives = self.lives()
        self.died = False
        self.start()
        self.tracking = True

    def start(self) -> None:
        """Snapshot game-specific start state."""

    def reward_filter(self, reward: float) -> float:
        """The part of a primitive step's reward that counts toward the score."""
        return reward

    def on_tick(self, tick: Tick) -> None:
        self.total += self.reward_filter(tick.reward)
        if self.pass_needs_life and not self.died:
            # against the last count, as the core's life-loss check reads it: a bonus
            # life won on the way must not hide a later loss
            lives, last = self.lives(), self.last_lives
            if tick.terminated or (lives is not None and last is not None and lives < last):
                self.died = True
            self.last_lives = lives

    def score(self) -> float:
        return capped_ratio(self.total, self.task.target("reward"))

    def passed(self) -> bool:
        if self.pass_needs_life and self.died:
            return False
        return self.total >= self.task.target("pass_reward")

    def death_cap(self) -> float | None:
        """Appendix 2.2's cap after death, where the task file selects it."""
        died = self.tracking and bool(getattr(self, "died", False))
        return cap_after_death(self.task.params, died, self.non_pass_ceiling)

    def non_pass_ceiling(self) -> float:
        """The most an episode that keeps its life but does not pass can score.

        Default: the score of the points threshold (``pass_reward`` against
        ``reward``), since a live player at or above it passes.
        """
        return capped_ratio(self.task.target("pass_reward"), self.task.target("reward"))

    def won(self) -> bool:
        """The game's own early win (the episode then ends as a Victory); none by default."""
        return False

    def ending(self, native_terminated: bool) -> str | None:
        """Victory once :meth:`won` holds after the start state; Terminated when the game ends."""
        if self.tracking and self.won():
            return "Victory"
        if native_terminated:
            return "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {"reward": self.total}


class FirstEventAdapter(ALEAdapter):
    """An ALE game scored by when something first happens after the start state.

    ``slots`` counts the outer slots since the start state; ``event_at`` is the
    decision (1-based, ``frame_skip`` slots each) during which :meth:`event` first
    held, None before that.
    """

    def start(self) -> None:
        self.slots = 0
        self.event_at: int | None = None

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        self.slots += 1
        if self.event_at is None and self.event(tick):
            self.event_at = -(-self.slots // self.task.env.frame_skip)

    def event(self, tick: Tick) -> bool:
        """The event, checked after every slot once the slot's reward is counted."""
        return False


def make_adapter(task: TaskSpec) -> Adapter:
    """The generic ALE adapter; a game's own ``Adapter`` (in its game module, found by
    :func:`vical.envs.game_module`) takes its place where there is one."""
    return ALEAdapter(task)


@cache
def rom_md5s() -> dict[str, str]:
    """md5 of every ROM file shipped with ale-py, for the environment fingerprint."""
    roms = Path(ale_py.__file__).parent / "roms"
    return {p.stem: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(roms.glob("*.bin"))}
