"""Reading a frame back into the facts of :mod:`vical.wm.state`, for the exactly rendered families.

Each reader takes any RGB frame (a true one or a model's prediction) and
returns the facts the frame shows, in the form :func:`vical.wm.state.sim_state`
gives them for the simulator, or None when the frame cannot be read (wrong
size). A true frame reads back to exactly the simulator's facts
(``tests/test_wm_readback.py`` holds this for every case); a predicted frame
reads back to the nearest state the renderer can draw:

- Toy Text: the frame is compared with the simulator's own renderer drawing
  candidate states, one variable at a time (taxi cell, passenger, destination,
  heading; the walker's cell), starting from the case's context state, until no
  single change brings the drawing closer to the frame;
- MiniGrid: each map tile is matched to the nearest of the tiles the renderer
  draws for every MiniGrid object of these games in every colour (with or
  without the agent, in its four directions, or unseen), and the
  carried-object slot likewise;
- Tetris: each cell's colour is matched to the nearest colour of the palette;
- Breakout: the paddle, ball and bricks are found by their exact colours.

The readers reach a simulator only through its adapter's public methods: the Toy
Text games' states are set (:meth:`vical.envs.core.Adapter.set_state`) to draw
candidates, and the renderers' tables (MiniGrid's objects and tile size, Tetris's
palette, Breakout's geometry) come from the family modules of :mod:`vical.envs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from vical.envs import Adapter, make_env
from vical.envs.core import Frame
from vical.envs.states import Facts
from vical.wm.sim import task_by_id

Reader = Callable[[str, Frame, Facts], Facts | None]
A = TypeVar("A", bound=Adapter)


def read_back(task_id: str, frame: npt.ArrayLike, hint: Facts) -> Facts | None:
    """The facts ``frame`` shows for a case of task ``task_id``.

    ``hint`` is the context state's facts: the Toy Text search starts from it, and
    the other readers take the layout's size from it.
    """
    env_key = task_id.partition("/")[0]
    reader = _READERS.get(env_key) or _READERS.get(task_by_id(task_id).env.family)
    if reader is None:
        raise ValueError(f"{task_id}: its family has no exact read-back")
    pixels = np.asarray(frame)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        return None
    return reader(task_id, pixels.astype(np.uint8, copy=False), hint)


def _dist(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> float:
    return float(np.sum((a.astype(np.int32) - b.astype(np.int32)) ** 2))


@cache
def _renderer(task_id: str) -> Adapter:
    """A private simulator of the task used only to draw candidate states."""
    env = make_env(task_id)
    env.reset()
    return env.adapter


def _renderer_as(task_id: str, kind: type[A]) -> A:
    adapter = _renderer(task_id)
    if not isinstance(adapter, kind):
        raise TypeError(
            f"{task_id}: its adapter is a {type(adapter).__name__}, not a {kind.__name__}"
        )
    return adapter


# -- Toy Text ---------------------------------------------------------------------
def _draw_taxi(task_id: str, row: int, col: int, p: int, d: int, heading: int) -> Frame:
    from vical.envs.games.taxi import TaxiAdapter, TaxiState

    adapter = _renderer_as(task_id, TaxiAdapter)
    adapter.set_state(TaxiState(row, col, p, d, heading))
    return np.asarray(adapter.frame())


def _search(
    draw: Callable[..., Frame], frame: Frame, start: list[int], domains: list[range]
) -> list[int] | None:
    """Coordinate search: change one variable at a time while the drawing gets closer."""
    cur = list(start)
    probe = draw(*cur)
    if probe.shape != frame.shape:
        return None
    best = _dist(probe, frame)
    improved = True
    while improved and best > 0:
        improved = False
        for k, dom in enumerate(domains):
            for v in dom:
                if v == cur[k]:
                    continue
                cand = [*cur[:k], v, *cur[k + 1 :]]
                dd = _dist(draw(*cand), frame)
                if dd < best:
                    best, cur, improved = dd, cand, True
    return cur


def _taxi(task_id: str, frame: Frame, hint: Facts) -> Facts | None:
    from vical.envs.games.taxi import TAXI_HEADINGS, TAXI_STANDS, TaxiState

    stands = [*TAXI_STANDS, "in taxi"]
    # the taxi's cell and heading form one variable (100 drawings): searched apart, a
    # taxi drawn facing the wrong way can look closer in another cell than in its own
    start = [
        (int(hint["taxi row"]) * 5 + int(hint["taxi column"])) * 4
        + TAXI_HEADINGS.index(hint["taxi faces"]),
        stands.index(hint["passenger"]),
        TAXI_STANDS.index(hint["destination"]),
    ]

    def draw(taxi: int, p: int, d: int) -> Frame:
        cell, heading = divmod(taxi, 4)
        return _draw_taxi(task_id, cell // 5, cell % 5, p, d, heading)

    found = _search(draw, frame, start, [range(100), range(5), range(4)])
    if found is None:
        return None
    cell, heading = divmod(found[0], 4)
    return TaxiState(cell // 5, cell % 5, found[1], found[2], heading).facts()


@cache
def _cliff_drawings(task_id: str) -> Frame:
    from vical.envs.games.cliffwalking import CLIFF_COLS, CLIFF_ROWS, CliffWalkingAdapter

    adapter = _renderer_as(task_id, CliffWalkingAdapter)
    base = adapter.read_state()  # the walker keeps the renderer's facing in every drawing
    out = []
    for s in range(CLIFF_ROWS * CLIFF_COLS):
        row, col = divmod(s, CLIFF_COLS)
        adapter.set_state(replace(base, row=row, column=col))
        out.append(np.asarray(adapter.frame()).copy())
    return np.stack(out)


def _cliff(task_id: str, frame: Frame, hint: Facts) -> Facts | None:
    from vical.envs.games.cliffwalking import CLIFF_COLS, CliffState

    drawings = _cliff_drawings(task_id)
    if drawings.shape[1:] != frame.shape:
        return None
    d = ((drawings.astype(np.int32) - frame.astype(np.int32)) ** 2).sum(axis=(1, 2, 3))
    row, col = divmod(int(np.argmin(d)), CLIFF_COLS)
    return CliffState(row, col, None).facts()


# -- MiniGrid ---------------------------------------------------------------------
@cache
def _minigrid_bank(tile: int) -> tuple[list[tuple[str, int | None]], npt.NDArray[np.int32]]:
    """Labels and drawings of every tile: unseen, then each object without and with the agent."""
    from minigrid.core.grid import Grid

    from vical.envs.minigrid import drawable_objects, object_name

    labels: list[tuple[str, int | None]] = [("unseen", None)]
    tiles = [np.zeros((tile, tile, 3), dtype=np.uint8)]
    for obj in drawable_objects():
        for direction in (None, 0, 1, 2, 3):
            if direction is not None and obj is not None and not obj.can_overlap():
                continue
            labels.append((object_name(obj), direction))
            tiles.append(Grid.render_tile(obj, agent_dir=direction, highlight=True, tile_size=tile))
    return labels, np.stack(tiles).astype(np.int32)


def _minigrid(task_id: str, frame: Frame, hint: Facts) -> Facts | None:
    from minigrid.core.grid import Grid

    from vical.envs.minigrid import MiniGridAdapter, drawable_objects, object_name

    adapter = _renderer(task_id)
    if not isinstance(adapter, MiniGridAdapter):
        raise TypeError(f"{task_id}: its adapter is a {type(adapter).__name__}")
    width = max(int(k.split()[1].split(",")[0]) for k in hint if k.startswith("cell ")) + 1
    height = max(int(k.split()[1].split(",")[1]) for k in hint if k.startswith("cell ")) + 1
    tile = int(adapter.tile)
    strip = "carrying" in hint
    want = (height * tile + (tile + 8 if strip else 0), width * tile, 3)
    if frame.shape != want:
        return None
    objs = drawable_objects()
    labels, bank = _minigrid_bank(tile)  # bank: (n, tile, tile, 3)
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


# -- Tetris -----------------------------------------------------------------------
@cache
def _tetris_palette(task_id: str) -> tuple[npt.NDArray[np.int32], int]:
    from vical.envs.games.tetris import TetrisAdapter

    adapter = _renderer_as(task_id, TetrisAdapter)
    return adapter.palette(), adapter.cell_pixels


def _tetris(task_id: str, frame: Frame, hint: Facts) -> Facts | None:
    from vical.envs.games.tetris import tetris_facts

    palette, scale = _tetris_palette(task_id)
    rows = len([k for k in hint if k.startswith("row ")])
    cols = len(next(v for k, v in hint.items() if k.startswith("row ")))
    if frame.shape != (rows * scale, cols * scale, 3):
        return None
    centres = frame[scale // 2 :: scale, scale // 2 :: scale].astype(np.int32)
    d = ((centres[:, :, None, :] - palette[None, None]) ** 2).sum(axis=3)
    return tetris_facts(d.argmin(axis=2))


# -- Breakout ---------------------------------------------------------------------
def _breakout(task_id: str, frame: Frame, hint: Facts) -> Facts | None:
    from vical.envs import breakout as b
    from vical.envs.games.breakout import BreakoutAdapter, breakout_facts

    if frame.shape != (b.HEIGHT * b.SCALE, b.WIDTH * b.SCALE, 3):
        return None
    img = frame[:: b.SCALE, :: b.SCALE].astype(np.int32)

    def near(color: tuple[int, int, int]) -> npt.NDArray[np.bool_]:
        return np.asarray(np.abs(img - np.array(color)).sum(axis=2) <= 24, dtype=np.bool_)

    paddle_rows = near(b.PADDLE_COLOR)[b.PADDLE_TOP : b.PADDLE_TOP + b.PADDLE_H]
    cols = np.flatnonzero(paddle_rows.any(axis=0))
    if cols.size == 0:
        paddle_x = int(hint["paddle x"])
    elif int(cols[-1]) - int(cols[0]) + 1 >= b.PADDLE_W:
        paddle_x = int(cols[0])
    else:
        # the ball hides one end of the paddle: measure from the end that shows
        left_hidden = bool(
            near(b.BALL_COLOR)[b.PADDLE_TOP : b.PADDLE_TOP + b.PADDLE_H, : cols[0]].any()
        )
        paddle_x = int(cols[-1]) - b.PADDLE_W + 1 if left_hidden else int(cols[0])
    ys, xs = np.nonzero(near(b.BALL_COLOR))
    ball = None if ys.size == 0 else (int(xs.min()), int(ys.min()))
    if ball is not None and xs.max() - xs.min() + 1 < b.BALL and xs.min() == 0:
        ball = (int(xs.max()) - b.BALL + 1, ball[1])
    if ball is not None and ys.max() - ys.min() + 1 < b.BALL and ys.min() == 0:
        ball = (ball[0], int(ys.max()) - b.BALL + 1)
    n = len([k for k in hint if k.startswith("brick ")])
    game = _renderer_as(task_id, BreakoutAdapter).game
    bricks = []
    background = np.abs(img - np.array(b.BACKGROUND)).sum(axis=2) <= 24
    for i in range(n):
        lo, hi = game.brick_span(i)
        region = background[b.BRICK_TOP : b.BRICK_BOTTOM, lo + (i > 0) : hi]
        bricks.append(bool(region.mean() < 0.5))
    return breakout_facts(paddle_x, ball, bricks)


_READERS: dict[str, Reader] = {
    "taxi": _taxi,
    "cliffwalking": _cliff,
    "minigrid": _minigrid,
    "tetris": _tetris,
    "breakout": _breakout,
}
