"""MiniGrid-derived custom environments: what LavaCrossing, MultiRoom and UnlockPickup share.

Each game (an environment of the task data with ``family: minigrid``) has its game
module ``vical/envs/games/<env>.py``:
its simulator class on ``minigrid`` 3.2.0, registered with Gymnasium under its
paper id (``CustomLavaCrossing-v0``, ``CustomMultiRoom-v0``,
``CustomUnlockPickup-v0``) when the module is imported, so researchers can
``gymnasium.make`` them directly, and its ``Adapter``. :data:`SIM_IDS` (or
:func:`register_envs`) imports the three and so registers them all.

The seven actions keep minigrid's order: Left and Right turn in place, Forward
moves one cell, Pickup, Drop, Toggle act on the cell in front, Done does
nothing.

Rendering (partial observation)
-------------------------------
The frame is the whole map, drawn north-up at a fixed scale, but only the cells
the agent sees *right now* are drawn: minigrid's 7 x 7 view square in front of the
agent, with walls and closed doors occluding what lies behind them. Every other
cell, including cells seen earlier, is drawn as flat unlit black without grid
lines. The agent is a red triangle pointing along its heading.

We chose this over the two alternatives the issue named:

* *fog of war that keeps every cell ever seen* turns the frame into the
  agent's memory - in MultiRoom a single frame would show the route explored so
  far and the task would no longer need memory;
* *minigrid's egocentric view* always points the agent up, so the frame loses
  the absolute heading and the agent's place on the map.

Showing only the current view on the fixed full-map canvas keeps the heading
and absolute position visible while forcing the agent to remember what it saw
before (MultiRoom: rooms behind it, doors it passed). An adapter with
``carry_strip`` (UnlockPickup) adds a strip under the map showing the object the
agent is carrying, since the map itself draws only the agent.

Planning and scoring
--------------------
The exact model of the dynamics and the breadth-first search live in
:mod:`vical.envs.minigrid_model`; the adapters score with its distances, and
:func:`plan` returns a shortest action sequence (the tests' planner and the demo
expert).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from minigrid.core.constants import COLOR_NAMES
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Box, Door, Goal, Key, Lava, Wall, WorldObj
from minigrid.minigrid_env import MiniGridEnv

from vical.envs import find_module, game_module, game_packages
from vical.envs.core import Adapter, Frame, Tick, no_adapter
from vical.envs.gymbase import GymAdapter
from vical.envs.minigrid_model import (
    DIR_VEC,
    Goal_,
    GridModel,
    State,
    at_goal,
    bfs,
    picked_target,
)
from vical.envs.scoring import clamp, path_efficiency
from vical.envs.states import Facts
from vical.spec import TaskSpec, read_env_file, task_files

# The simulator's own step limit is irrelevant: vical's max-steps cap ends the
# episode (GymAdapter ignores truncation); a large limit keeps minigrid quiet.
SIM_MAX_STEPS = 100_000


# ---------------------------------------------------------------------------
# Simulators: each game module registers its own
# ---------------------------------------------------------------------------
# sim id -> simulator class, filled in by :func:`register` as game modules are imported
_SIMULATORS: dict[str, type[MiniGridEnv]] = {}


def register(sim_id: str, simulator: type[MiniGridEnv]) -> None:
    """Register a game module's simulator under ``sim_id``, here and with Gymnasium (idempotent)."""
    _SIMULATORS[sim_id] = simulator
    if sim_id not in gym.registry:
        gym.register(id=sim_id, entry_point=f"{simulator.__module__}:{simulator.__name__}")


@cache
def _game_keys(files: tuple[tuple[str, Path], ...]) -> tuple[str, ...]:
    """The env keys whose task file names this family (the files read raw: the task-file
    checks ask for :data:`SIM_IDS` while files load)."""
    return tuple(key for key, path in files if read_env_file(path).get("family") == "minigrid")


def register_envs() -> None:
    """Import the game module of every MiniGrid environment of the task data (built in or
    added by ``$VICAL_TASKS_DIR``, found as :func:`vical.envs.game_module` finds it); each
    registers its simulator (idempotent)."""
    for key in _game_keys(tuple(task_files().items())):
        for package in game_packages():
            if find_module(f"{package}.{key}") is not None:
                break


class _SimIds(Mapping[str, type[MiniGridEnv]]):
    """sim id -> simulator class of every registered game; a use imports the family's
    game modules (they import this module, so it cannot import them at import time)."""

    def _all(self) -> dict[str, type[MiniGridEnv]]:
        register_envs()
        return _SIMULATORS

    def __getitem__(self, sim_id: str) -> type[MiniGridEnv]:
        return self._all()[sim_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __repr__(self) -> str:
        return f"SIM_IDS({self._all()!r})"


# the registered simulators by sim id (read by the task-file checks)
SIM_IDS: Mapping[str, type[MiniGridEnv]] = _SimIds()


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------
# cells outside the current view are black: a new frame starts as zeros (filling a
# frame with a colour, pixel by pixel, cost more than drawing all its visible tiles)
_STRIP_BG = np.array([40, 40, 40], dtype=np.uint8)


def visible_cells(env: MiniGridEnv) -> npt.NDArray[np.bool_]:
    """Boolean (width, height) mask of the cells in the agent's current view.

    The same computation as ``MiniGridEnv.get_full_render``: the 7 x 7 square
    in front of the agent, with minigrid's occlusion (walls and closed doors hide
    what is behind them), mapped to world coordinates.
    """
    gen_obs_grid = cast(Callable[[], tuple[Any, npt.NDArray[np.bool_]]], env.gen_obs_grid)
    _, vis = gen_obs_grid()
    fx, fy = (int(v) for v in DIR_VEC[env.agent_dir])
    rx, ry = -fy, fx
    n = env.agent_view_size
    px, py = (int(v) for v in env.agent_pos)
    left, top = px + fx * (n - 1) - rx * (n // 2), py + fy * (n - 1) - ry * (n // 2)
    vi, vj = np.nonzero(vis)  # view cell (vi, vj) -> world cell top-left - f*vj + r*vi
    ai, aj = left - fx * vj + rx * vi, top - fy * vj + ry * vi
    inside = (ai >= 0) & (ai < env.width) & (aj >= 0) & (aj < env.height)
    mask = np.zeros((env.width, env.height), dtype=bool)
    mask[ai[inside], aj[inside]] = True
    return mask


def tile_size_for(width: int, height: int, target_px: int = 400) -> int:
    """A tile size that makes the map about ``target_px`` on its longer side."""
    return int(max(12, min(36, target_px // max(width, height))))


def render_view(
    env: MiniGridEnv, mask: npt.NDArray[np.bool_], tile: int, carry_strip: bool = False
) -> Frame:
    """The full map north-up with only the currently visible cells drawn (see module docstring)."""
    img = np.zeros((env.height * tile, env.width * tile, 3), dtype=np.uint8)
    ax, ay = (int(v) for v in env.agent_pos)
    for i, j in zip(*np.nonzero(mask), strict=True):
        here = i == ax and j == ay
        img[j * tile : (j + 1) * tile, i * tile : (i + 1) * tile] = Grid.render_tile(
            env.grid.get(int(i), int(j)),
            agent_dir=env.agent_dir if here else None,
            highlight=True,
            tile_size=tile,
        )
    if not carry_strip:
        return img
    strip = np.empty((tile + 8, img.shape[1], 3), dtype=np.uint8)
    strip[:] = _STRIP_BG
    # a framed slot holding the carried object (empty slot: nothing carried)
    slot = Grid.render_tile(env.carrying, tile_size=tile)
    strip[4 : 4 + tile, 4 : 4 + tile] = slot
    strip[2:4, 2 : 6 + tile] = 200
    strip[4 + tile : 6 + tile, 2 : 6 + tile] = 200
    strip[2 : 6 + tile, 2:4] = 200
    strip[2 : 6 + tile, 4 + tile : 6 + tile] = 200
    return np.ascontiguousarray(np.concatenate([img, strip], axis=0))


def object_name(obj: WorldObj | None) -> str:
    """A cell's content as text: ``empty``, ``wall``, ``lava``, ``goal``, or the type and
    colour of the object (``key-yellow``), a door's with its state (``door-yellow-locked``)."""
    if obj is None:
        return "empty"
    name = f"{obj.type}-{obj.color}" if obj.type not in ("wall", "lava", "goal") else obj.type
    if isinstance(obj, Door):
        name += "-locked" if obj.is_locked else ("-open" if obj.is_open else "-closed")
    return str(name)


@cache
def drawable_objects() -> list[WorldObj | None]:
    """Every object a tile of these games may show, in the order of their names: empty
    (None), wall, lava, goal, and keys, balls, boxes and doors (open, closed, locked) of
    every colour. Shared: callers draw them, never change them."""
    objs: dict[str, WorldObj | None] = {
        "empty": None,
        "wall": Wall(),
        "lava": _new(Lava),
        "goal": Goal(),
    }
    for color in COLOR_NAMES:
        for obj in (Key(color), _new(Ball, color), Box(color)):
            objs[object_name(obj)] = obj
        for state in ("open", "closed", "locked"):
            door = Door(color, is_open=state == "open", is_locked=state == "locked")
            objs[object_name(door)] = door
    return [objs[k] for k in sorted(objs)]


def _new(cls: type[WorldObj], *args: Any) -> WorldObj:
    """``cls(*args)`` for the minigrid classes whose constructor is not annotated."""
    make = cast(Callable[..., WorldObj], cls)
    return make(*args)


# ---------------------------------------------------------------------------
# Adapters
# ---------------------------------------------------------------------------
class MiniGridAdapter(GymAdapter):
    """Common part: the custom simulator, the partial-view frame, the model and seen cells."""

    carry_strip = False
    # The sub-goal distance memo is a pure function of (sub-goal, state) for the
    # layout built at reset: snapshots share it instead of copying it, so restores
    # (every reset after the first, searches) keep what earlier play computed.
    _SHARED = GymAdapter._SHARED | {"_dist_cache"}

    def make_env(self) -> gym.Env:
        cls = SIM_IDS[self.task.env.sim_id]
        env: gym.Env[Any, Any] = cls(**self.task.env_kwargs)
        return env

    @property
    def grid_env(self) -> MiniGridEnv:
        return self.env  # type: ignore[return-value]

    def reset(self, seed: int) -> None:
        super().reset(seed)
        e = self.grid_env
        self.tile = tile_size_for(e.width, e.height)
        self.model = GridModel(e)
        self._mask = visible_cells(e)
        self._dist_cache: dict[tuple[str, State], int | None] = {}

    def act(self, native: Any) -> Tick:
        tick = super().act(native)
        self._mask = visible_cells(self.grid_env)
        return tick

    @property
    def visible(self) -> npt.NDArray[np.bool_]:
        """The cells in the agent's view now: a read-only boolean (width, height) mask,
        indexed ``[x, y]``, the cells the frame draws (see :func:`visible_cells`)."""
        view = self._mask.view()
        view.flags.writeable = False
        return view

    def frame(self) -> Frame:
        if self._frame is None:
            self._frame = render_view(self.grid_env, self._mask, self.tile, self.carry_strip)
        return self._frame

    def state(self) -> State:
        return self.model.state_of(self.grid_env)

    def state_facts(self) -> Facts:
        """What the frame shows: the agent's cell and heading (0-3, :data:`~vical.envs.minigrid_model.HEADINGS`),
        what it carries where the frame has the carried-object strip, and each cell's
        content (:func:`object_name`), ``unseen`` outside the agent's view."""
        e = self.grid_env
        mask = self._mask
        facts: Facts = {}
        ax, ay = (int(v) for v in e.agent_pos)
        facts["agent x"] = ax
        facts["agent y"] = ay
        facts["agent dir"] = int(e.agent_dir)
        if self.carry_strip:
            facts["carrying"] = object_name(e.carrying) if e.carrying is not None else "nothing"
        for j in range(e.height):
            for i in range(e.width):
                facts[f"cell {i},{j}"] = object_name(e.grid.get(i, j)) if mask[i, j] else "unseen"
        return facts

    def distance(self, name: str, reached: Goal_, state: State | None = None) -> int | None:
        """Fewest actions from ``state`` (default: now) to a sub-goal, memoised per state."""
        s = self.state() if state is None else state
        key = (name, s)
        if key not in self._dist_cache:
            path = bfs(self.model, s, reached)
            self._dist_cache[key] = None if path is None else len(path)
        return self._dist_cache[key]

    def open_cells(self) -> npt.NDArray[np.bool_]:
        """Mask of the cells exploration counts: every non-wall cell connected to the
        agent's start (through doors, lava and objects alike). In MultiRoom this
        leaves out the empty space outside the rooms, which can never be seen."""
        m = self.model
        x0, y0 = (int(v) for v in self.grid_env.agent_pos)
        mask = np.zeros((m.width, m.height), dtype=bool)
        mask[x0, y0] = True
        todo = [(x0, y0)]
        while todo:
            x, y = todo.pop()
            for dx, dy in DIR_VEC:
                nx, ny = x + dx, y + dy
                if (
                    0 <= nx < m.width
                    and 0 <= ny < m.height
                    and not mask[nx, ny]
                    and m.static.get((nx, ny)) != "wall"
                ):
                    mask[nx, ny] = True
                    todo.append((nx, ny))
        return mask


class NavigationAdapter(MiniGridAdapter):
    """LavaCrossing and MultiRoom: reach the green goal square.

    Score terms (weights under ``scoring.targets``):

    * exploration - share of the open cells (non-wall, connected to the start)
      unseen at the start that the agent has since had in view, times
      ``explore_weight``;
    * progress - share of the start's shortest-route length (in decisions,
      turns and door toggles included) closed at the best state reached,
      times ``progress_weight``;
    * goal and efficiency - reaching the goal gives ``explore_weight +
      progress_weight`` plus the rest times optimal decisions / decisions used
      (the shortest route scores 100);
    * death - stepping into lava ends the episode and multiplies the score
      reached so far by ``death_factor``.

    Pass: the goal is reached.
    """

    def start(self) -> None:
        self.w_explore = self.task.target("explore_weight")
        self.w_progress = self.task.target("progress_weight")
        self.death_factor = self.task.target("death_factor")
        s0 = self.state()
        d0 = self.distance("goal", at_goal, s0)
        if d0 is None:
            raise RuntimeError(f"{self.task.id}: the goal cannot be reached from the start")
        self.start_d = self.best_d = self.optimal = d0
        self.moves = 0
        self.reached = self.died = False
        self.open = self.open_cells()
        self.seen0 = self._mask & self.open
        self.seen = self.seen0.copy()
        self.unseen0 = int(self.open.sum() - self.seen0.sum())

    def on_tick(self, tick: Tick) -> None:
        self.moves += 1
        e = self.grid_env
        cell = e.grid.get(*e.agent_pos)
        if tick.terminated:
            self.reached = isinstance(cell, Goal)
            self.died = isinstance(cell, Lava)
        if not self.died:
            self.seen |= self._mask & self.open
            if not self.reached:
                d = self.distance("goal", at_goal)
                if d is not None:
                    self.best_d = min(self.best_d, d)
            else:
                self.best_d = 0

    def explored(self) -> float:
        if self.unseen0 <= 0:
            return 1.0
        return float((self.seen & ~self.seen0).sum()) / self.unseen0

    def score(self) -> float:
        goal_weight = self.w_explore + self.w_progress
        if self.reached:
            return path_efficiency(
                self.start_d, 0, True, self.moves, self.optimal, progress_weight=goal_weight
            )
        s = self.w_explore * self.explored() + path_efficiency(
            self.start_d, self.best_d, False, self.moves, self.optimal, self.w_progress
        )
        if self.died:
            s *= self.death_factor
        return clamp(s)

    def passed(self) -> bool:
        return self.reached

    def ending(self, native_terminated: bool) -> str | None:
        if native_terminated:
            return "Victory" if self.reached else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "start_distance": self.start_d,
            "best_distance": self.best_d,
            "optimal_steps": self.optimal,
            "explored": round(self.explored(), 4),
            "reached": self.reached,
            "died": self.died,
            "moves": self.moves,
        }


def make_adapter(task: TaskSpec) -> MiniGridAdapter:
    """The adapter of the task's game module (``vical/envs/games/<env>.py``: ``Adapter``)."""
    game = game_module(task.env)
    cls = getattr(game, "Adapter", None)
    if not (isinstance(cls, type) and issubclass(cls, MiniGridAdapter)):
        raise no_adapter(task, "MiniGrid", "a MiniGridAdapter")
    return cls(task)


# ---------------------------------------------------------------------------
# The world-model track's frame reader (each game module exposes it as read_frame)
# ---------------------------------------------------------------------------
@cache
def _tile_bank(tile: int) -> tuple[list[tuple[str, int | None]], npt.NDArray[np.int32]]:
    """Labels and drawings of every tile: unseen, then each object without and with the agent."""
    labels: list[tuple[str, int | None]] = [("unseen", None)]
    tiles = [np.zeros((tile, tile, 3), dtype=np.uint8)]
    for obj in drawable_objects():
        for direction in (None, 0, 1, 2, 3):
            if direction is not None and obj is not None and not obj.can_overlap():
                continue
            labels.append((object_name(obj), direction))
            tiles.append(Grid.render_tile(obj, agent_dir=direction, highlight=True, tile_size=tile))
    return labels, np.stack(tiles).astype(np.int32)


def read_frame(renderer: Adapter, frame: Frame, hint: Facts) -> Facts | None:
    """The facts an RGB ``frame`` shows (a true one or a model's prediction), or None.

    ``renderer`` is a MiniGrid adapter of the same task (its tile size); ``hint``,
    the context state's facts, gives the map's size and whether the frame has the
    carried-object strip. Each map tile is matched to the nearest of the tiles the
    renderer draws for every MiniGrid object of these games in every colour (with
    or without the agent, in its four directions, or unseen), and the
    carried-object slot likewise.
    """
    if not isinstance(renderer, MiniGridAdapter):
        raise TypeError(f"{renderer.task.id}: its adapter is a {type(renderer).__name__}")
    width = max(int(k.split()[1].split(",")[0]) for k in hint if k.startswith("cell ")) + 1
    height = max(int(k.split()[1].split(",")[1]) for k in hint if k.startswith("cell ")) + 1
    tile = int(renderer.tile)
    strip = "carrying" in hint
    want = (height * tile + (tile + 8 if strip else 0), width * tile, 3)
    if frame.shape != want:
        return None
    objs = drawable_objects()
    labels, bank = _tile_bank(tile)  # bank: (n, tile, tile, 3)
    grid = frame[: height * tile].astype(np.int32)
    cells = grid.reshape(height, tile, width, tile, 3).transpose(0, 2, 1, 3, 4)
    d = ((cells[:, :, None] - bank[None, None]) ** 2).sum(axis=(3, 4, 5))  # (h, w, n)
    best = d.argmin(axis=2)
    facts: Facts = {}
    agent: tuple[int, int, int] | None = None
    cell_facts: Facts = {}
    for j in range(height):
        for i in range(width):
            name, direction = labels[int(best[j, i])]
            cell_facts[f"cell {i},{j}"] = name
            if direction is not None and agent is None:
                agent = (i, j, direction)
    facts["agent x"] = None if agent is None else agent[0]
    facts["agent y"] = None if agent is None else agent[1]
    facts["agent dir"] = None if agent is None else agent[2]
    if strip:
        slot = frame[height * tile + 4 : height * tile + 4 + tile, 4 : 4 + tile].astype(np.int32)
        carried = [o for o in objs if o is None or o.can_pickup()]
        drawn = [Grid.render_tile(o, tile_size=tile).astype(np.int32) for o in carried]
        k = int(np.argmin([((slot - t) ** 2).sum() for t in drawn]))
        facts["carrying"] = "nothing" if carried[k] is None else object_name(carried[k])
    facts.update(cell_facts)
    return facts


# ---------------------------------------------------------------------------
# Planner (tests and demo expert)
# ---------------------------------------------------------------------------
def plan(env: Any) -> list[str]:
    """A shortest action sequence (canonical names) from the env's current state to success.

    ``env`` is a :class:`vical.envs.environment.VicalEnv` of a MiniGrid task (after
    ``reset``) or its adapter. Success is the goal square (LavaCrossing,
    MultiRoom) or picking up the box (UnlockPickup). Raises RuntimeError when
    success is unreachable.
    """
    adapter: MiniGridAdapter = getattr(env, "adapter", env)
    reached = picked_target if adapter.model.target >= 0 else at_goal
    path = bfs(adapter.model, adapter.state(), reached)
    if path is None:
        raise RuntimeError(f"{adapter.task.id}: no route to success from the current state")
    names = {native: name for name, native in adapter.task.env.actions.items()}
    return [names[a] for a in path]
