"""Procgen (``procgen2`` 0.10.7, gym3 API): what its seven games share.

The games are bigfish, bossfight, caveflyer, dodgeball, heist, leaper and ninja.
Each game's adapter (``Adapter``, subclassing :class:`RewardTargetAdapter`,
:class:`CompletionAdapter` or :class:`ProcgenAdapter`) and the entity ids it
reads live in its game module ``vical/envs/games/<env>.py``.

Every task is one fixed level: ``num_levels=1`` and ``start_level`` = the task
seed (paper Table 8), with a pinned ``rand_seed`` and ``num_threads=0`` so the
C++ game runs in the calling thread. Inside a level Procgen draws all its
randomness (spawns, enemy moves) from a generator seeded with the level seed at
every episode reset, so an action list fully determines every frame.

Frames are the 512x512 RGB image Procgen renders for people
(``render_mode="rgb_array"``, read from ``info["rgb"]``); the 64x64 agent
observation of the original benchmark is too small to read. Procgen restarts
the level inside the same step that ends an episode, so the frame of a
terminating step would show the fresh level; the adapter keeps the last frame
of the ended episode instead.

Scores read the game's reward and, where the paper's rule needs more than the
reward (heist keys and doors, ninja horizontal progress), the game state that
Procgen serialises for ``get_state`` (parsed by :func:`parse_state`). The same
state save/restore drives :func:`vical.authoring.search.procgen_beam`, the search used to
calibrate the per-seed targets in the task files and to find the test trajectories.
"""

from __future__ import annotations

import contextlib
import io
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vical.envs import game_module
from vical.envs.compat import procgen as compat
from vical.envs.core import Adapter, Frame, Tick, no_adapter
from vical.envs.scoring import cap_after_death, capped_ratio
from vical.spec import TaskSpec

# Procgen's own native action indices (gym3 combos, in this order).
NATIVE = {
    "DOWN_LEFT": 0,
    "LEFT": 1,
    "UP_LEFT": 2,
    "DOWN": 3,
    "NOOP": 4,
    "UP": 5,
    "DOWN_RIGHT": 6,
    "RIGHT": 7,
    "UP_RIGHT": 8,
    "D": 9,
    "A": 10,
    "W": 11,
    "S": 12,
    "Q": 13,
    "E": 14,
}
NOOP = NATIVE["NOOP"]

# The player's entity type id inside the serialised state (procgen's object-ids.h);
# each game module names the ids of its own entities.
PLAYER = 0


def _procgen_env_class() -> Any:
    """Import ``ProcgenGym3Env`` without gym's "unmaintained" notice on stderr.

    Importing ``procgen`` registers its old-gym ids, which imports ``gym``
    0.26, which prints a notice about gym being unmaintained. vical never uses
    the gym registration (it drives the gym3 env directly), so the notice is
    noise in every log.
    """
    with contextlib.redirect_stderr(io.StringIO()):
        from procgen import ProcgenGym3Env
    return ProcgenGym3Env


# -- the serialised game state ------------------------------------------------


@dataclass
class Entity:
    x: float
    y: float
    vx: float
    vy: float
    rx: float
    ry: float
    type: int
    theme: int
    health: float
    rotation: float


@dataclass
class GameState:
    """The parts of Procgen's serialised state the scores and the search read."""

    name: str
    cur_time: int
    level_seed: int
    entities: list[Entity]
    width: int
    height: int
    grid: npt.NDArray[np.int32]  # (height, width) object ids, row 0 at the bottom
    extra: bytes = field(repr=False, default=b"")

    @property
    def agent(self) -> Entity:
        return next(e for e in self.entities if e.type == PLAYER)

    def of_type(self, t: int) -> list[Entity]:
        return [e for e in self.entities if e.type == t]


class Reader:
    """Little-endian reader over a Procgen state's serialised bytes."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def i(self) -> int:
        v: int
        (v,) = struct.unpack_from("<i", self.data, self.pos)
        self.pos += 4
        return v

    def f(self) -> float:
        v: float
        (v,) = struct.unpack_from("<f", self.data, self.pos)
        self.pos += 4
        return v

    def s(self) -> bytes:
        n = self.i()
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def skip(self, fmt: str) -> None:
        self.pos += struct.calcsize("<" + fmt)


# One entity: position, velocity, radii (6 floats); type, image type, theme,
# render z, will-erase, collides (6 ints); collision margin, rotation, vrot;
# reflected, fire/spawn/life/expire times, abs coords (6 ints); friction;
# smart step, avoids collisions, auto erase; alpha, health, theta, grow rate,
# alpha decay, climber spawn x.
_ENTITY = struct.Struct("<6f6i3f6if3i6f")


def parse_state(data: bytes) -> GameState:
    """Decode the state bytes of one Procgen game (``get_state()[i]``).

    The layout follows procgen's ``Game::serialize`` then
    ``BasicAbstractGame::serialize``; ``extra`` holds the game's own fields.
    """
    r = Reader(data)
    r.i()  # format version
    name = r.s().decode()
    r.skip("12i")  # options
    r.skip("5i")  # grid step, level seed range, game type, game index
    for _ in range(2):  # level-seed and in-level random generators
        r.i()
        r.s()
    r.skip("f2i")  # step reward, done, level complete
    r.skip("2i")  # action, timeout
    level_seed = r.i()
    r.skip("4i")  # previous seed, episodes remaining, episode done, reward timer
    r.skip("f2i")  # last reward, default action, asset seed
    cur_time = r.i()
    r.i()  # waiting for step
    r.i()  # grid size
    entities = []
    for _ in range(r.i()):
        v = _ENTITY.unpack_from(data, r.pos)
        r.pos += _ENTITY.size
        entities.append(Entity(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[8], v[26], v[13]))
    r.skip("2i2ff3i3f3f2f3i")  # background, char dim, actions, speeds, view centre, flags
    r.i()  # asset generator
    r.s()
    width, height = r.i(), r.i()
    r.i()  # out-of-bounds object
    r.skip("6f")  # unit, view dim, offsets, visibility
    gw, gh = r.i(), r.i()
    n = r.i()
    grid = np.frombuffer(data, dtype="<i4", count=n, offset=r.pos).reshape(gh, gw)
    r.pos += 4 * n
    return GameState(name, cur_time, level_seed, entities, width, height, grid, data[r.pos :])


def grid_distances(
    passable: npt.NDArray[np.bool_], goal: tuple[int, int]
) -> npt.NDArray[np.float64]:
    """Breadth-first step distances (4-neighbour) from ``goal`` = (x, y) over passable cells."""
    h, w = passable.shape
    dist = np.full((h, w), np.inf)
    gx, gy = goal
    if not (0 <= gx < w and 0 <= gy < h):
        return dist
    dist[gy, gx] = 0
    q = deque([(gx, gy)])
    while q:
        x, y = q.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < w and 0 <= ny < h and passable[ny, nx] and dist[ny, nx] == np.inf:
                dist[ny, nx] = dist[y, x] + 1
                q.append((nx, ny))
    return dist


# -- the adapter ----------------------------------------------------------------


class ProcgenAdapter(Adapter):
    """One Procgen level behind the vical contract; games override the scoring hooks.

    Progress kept from :meth:`begin`: ``reward`` (native reward summed over the
    agent's decisions), ``completed`` (Procgen reported the level complete) and
    ``died`` (the episode ended without completing the level: a collision, a
    fall, a drowning).
    """

    def __init__(self, task: TaskSpec, render: bool = True):
        super().__init__(task)
        self.render = render
        self.env: Any = None
        self._frame: Frame | None = None
        self.tracking = False
        self.reward = 0.0
        self.completed = False
        self.died = False

    # -- simulator ----------------------------------------------------------
    def make_env(self, seed: int) -> Any:
        kwargs = dict(self.task.env_kwargs)
        env_cls = _procgen_env_class()
        return env_cls(
            num=1,
            env_name=self.task.env.sim_id,
            num_levels=1,
            start_level=int(seed),
            rand_seed=int(kwargs.pop("rand_seed")),
            num_threads=0,
            render_mode="rgb_array" if self.render else None,
            **kwargs,
        )

    def reset(self, seed: int) -> None:
        self.close()
        self.env = self.make_env(seed)
        self.tracking = False
        self.reward = 0.0
        self.completed = False
        self.died = False
        self._frame = self._read_frame()

    def _read_frame(self) -> Frame:
        if not self.render:  # the search expert's fast twin: the 64x64 observation
            return np.array(self.env.observe()[1]["rgb"][0], dtype=np.uint8, copy=True)
        return np.array(self.env.get_info()[0]["rgb"], dtype=np.uint8, copy=True)

    def _observed_info(self) -> dict[str, Any]:
        """The info the last ``observe()`` filled in, read without observing again.

        gym3's ``get_info()`` runs the C observe a second time, and Procgen draws
        its 512x512 frame on every observe: reading the info buffers the
        ``observe()`` in :meth:`act` has just filled halves the drawing per step.
        tests/test_procgen.py checks frames and level-complete flags against
        ``get_info()`` over played episodes.
        """
        return compat.observed_info(self.env)

    def state(self) -> GameState:
        return parse_state(self.env.get_state()[0])

    def act(self, native: Any) -> Tick:
        self.env.act(np.array([int(native)], dtype=np.int32))
        rew, _, first = self.env.observe()
        reward = float(rew[0])
        ended = bool(first[0])
        # Only an ending step can complete a level; reading info costs a 512x512 copy.
        info = self._observed_info() if (ended or self.render) else {}
        complete = bool(info.get("prev_level_complete", 0))
        if not ended and self.render:
            # A terminating step has already restarted the level: keep the last frame.
            self._frame = np.array(info["rgb"], dtype=np.uint8, copy=True)
        if self.tracking:
            self.reward += reward
            if ended:
                self.completed = self.completed or complete
                self.died = not complete
            self.on_tick(reward, ended)
        return Tick(reward=reward, terminated=ended, info={"level_complete": complete})

    def frame(self) -> Frame:
        assert self._frame is not None, "reset() first"
        return self._frame

    def begin(self) -> None:
        self.tracking = True
        self.start()

    def close(self) -> None:
        if self.env is not None:
            with contextlib.suppress(Exception):
                self.env.close()
            self.env = None

    # -- snapshots for the search expert ------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return (self.env.get_state(), self._frame, dict(self.__dict__))

    def restore(self, snap: tuple[Any, ...]) -> None:
        states, frame, attrs = snap
        env = self.env
        self.__dict__.update({k: v for k, v in attrs.items() if k != "env"})
        self.__dict__["env"] = env
        self.env.set_state(states)
        self._frame = frame

    # -- game hooks ----------------------------------------------------------
    def start(self) -> None:
        """Snapshot what progress is measured from (game-specific)."""

    def on_tick(self, reward: float, ended: bool) -> None:
        """Update game-specific progress after one primitive step."""

    def reached_target(self) -> bool:
        """An early successful end (a reward target reached) besides level completion."""
        return False

    def death_cap(self) -> float | None:
        """Appendix 2.2's cap after death, where the task file selects it."""
        return cap_after_death(self.task.params, self.tracking and self.died, self.non_pass_ceiling)

    def non_pass_ceiling(self) -> float:
        """The most an episode that keeps its life but does not pass can score (a game
        whose task file selects the cap after death says what that is)."""
        raise NotImplementedError(f"{self.task.id}: no cap after death is defined for this game")

    def ending(self, native_terminated: bool) -> str | None:
        if native_terminated:
            return "Victory" if self.completed else "Terminated"
        if self.reached_target():
            return "Victory"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "reward": round(self.reward, 6),
            "completed": self.completed,
            "died": self.died,
        }

    def search_key(self) -> tuple[Any, ...]:
        """States the search treats as the same: rounded agent position, velocity, heading."""
        a = self.state().agent
        return (
            round(a.x * 2),
            round(a.y * 2),
            round(a.vx * 4),
            round(a.vy * 4),
            round(a.rotation * 4),
        )

    def heuristic(self) -> float:
        """Search guidance: larger is closer to the goal (used by :func:`vical.authoring.search.procgen_beam` only)."""
        return 0.0


class RewardTargetAdapter(ProcgenAdapter):
    """Cumulative native reward against a per-seed target; reaching it ends in Victory.

    Used by bigfish (the paper's two-point target), bossfight and dodgeball
    (per-seed targets). Death fails the task whatever was collected before.
    """

    def target(self) -> float:
        return self.task.target("reward_target")

    def score(self) -> float:
        return capped_ratio(self.reward, self.target())

    def reached_target(self) -> bool:
        return not self.died and self.reward >= self.target() - 1e-6

    def passed(self) -> bool:
        return not self.died and (self.completed or self.reward >= self.target() - 1e-6)

    def heuristic(self) -> float:
        return 0.0


class CompletionAdapter(ProcgenAdapter):
    """Reward normalised to one by the level's completion bonus; only completion passes.

    Caveflyer (targets shot give partial reward) and leaper (reward only at the
    finish line). Termination without completing the level is failure.
    """

    def score(self) -> float:
        return capped_ratio(self.reward, self.task.target("completion_reward"))

    def passed(self) -> bool:
        return self.completed


def make_adapter(task: TaskSpec, render: bool = True) -> ProcgenAdapter:
    """The adapter of a Procgen task, its game module's ``Adapter`` (``vical/envs/games/<env>.py``);
    ``render=False`` skips the 512x512 frame (search only)."""
    game = game_module(task.env)
    cls = getattr(game, "Adapter", None)
    if not (isinstance(cls, type) and issubclass(cls, ProcgenAdapter)):
        raise no_adapter(task, "Procgen", "a ProcgenAdapter")
    return cls(task, render=render)
