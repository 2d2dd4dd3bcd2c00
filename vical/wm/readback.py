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
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from vical.envs import make_env
from vical.wm.sim import task_by_id
from vical.wm.state import (
    breakout_facts,
    minigrid_object,
    taxi_facts,
    tetris_facts,
)

Facts = dict[str, Any]


def read_back(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    """The facts ``frame`` shows for a case of task ``task_id``.

    ``hint`` is the context state's facts: the Toy Text search starts from it, and
    the other readers take the layout's size from it.
    """
    env_key = task_id.partition("/")[0]
    reader = _READERS.get(env_key) or _READERS.get(task_by_id(task_id).env.family)
    if reader is None:
        raise ValueError(f"{task_id}: its family has no exact read-back")
    frame = np.asarray(frame)
    if frame.ndim != 3 or frame.shape[2] != 3:
        return None
    return reader(task_id, frame.astype(np.uint8, copy=False), hint)


def _dist(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sum((a.astype(np.int32) - b.astype(np.int32)) ** 2))


# -- Toy Text ---------------------------------------------------------------------
@cache
def _renderer(task_id: str) -> Any:
    """A private simulator of the task used only to draw candidate states."""
    env = make_env(task_id)
    env.reset()
    return env.adapter


def _draw_taxi(task_id: str, row: int, col: int, p: int, d: int, heading: int) -> np.ndarray:
    adapter = _renderer(task_id)
    e = adapter.env
    e.s = e.encode(row, col, p, d)
    e.lastaction = None  # keeps taxi_orientation as set
    e.taxi_orientation = heading
    adapter._frame = None
    return np.asarray(adapter.frame())


def _search(
    draw: Callable[..., np.ndarray], frame: np.ndarray, start: list[int], domains: list[range]
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


def _taxi(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    from vical.wm.state import HEADINGS, TAXI_STANDS

    stands = [*TAXI_STANDS, "in taxi"]
    # the taxi's cell and heading form one variable (100 drawings): searched apart, a
    # taxi drawn facing the wrong way can look closer in another cell than in its own
    start = [
        (int(hint["taxi row"]) * 5 + int(hint["taxi column"])) * 4
        + HEADINGS.index(hint["taxi faces"]),
        stands.index(hint["passenger"]),
        TAXI_STANDS.index(hint["destination"]),
    ]

    def draw(taxi: int, p: int, d: int) -> np.ndarray:
        cell, heading = divmod(taxi, 4)
        return _draw_taxi(task_id, cell // 5, cell % 5, p, d, heading)

    found = _search(draw, frame, start, [range(100), range(5), range(4)])
    if found is None:
        return None
    cell, heading = divmod(found[0], 4)
    return taxi_facts(cell // 5, cell % 5, found[1], found[2], heading)


@cache
def _cliff_drawings(task_id: str) -> np.ndarray:
    adapter = _renderer(task_id)
    out = []
    for s in range(48):
        adapter.env.s = s
        adapter._frame = None
        out.append(np.asarray(adapter.frame()).copy())
    return np.stack(out)


def _cliff(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    drawings = _cliff_drawings(task_id)
    if drawings.shape[1:] != frame.shape:
        return None
    d = ((drawings.astype(np.int32) - frame.astype(np.int32)) ** 2).sum(axis=(1, 2, 3))
    row, col = divmod(int(np.argmin(d)), 12)
    return {"row": row, "column": col}


# -- MiniGrid ---------------------------------------------------------------------
@cache
def _minigrid_objects() -> list[Any]:
    """Every object a MiniGrid tile of these games may show: empty, wall, lava, goal, and
    keys, balls, boxes and doors (in their three states) of every colour."""
    from minigrid.core.constants import COLOR_NAMES
    from minigrid.core.world_object import Ball, Box, Door, Goal, Key, Lava, Wall

    objs: dict[str, Any] = {"empty": None, "wall": Wall(), "lava": Lava(), "goal": Goal()}
    for color in COLOR_NAMES:
        for obj in (Key(color), Ball(color), Box(color)):
            objs[minigrid_object(obj)] = obj
        for state in ("open", "closed", "locked"):
            door = Door(color, is_open=state == "open", is_locked=state == "locked")
            objs[minigrid_object(door)] = door
    return [objs[k] for k in sorted(objs)]


@cache
def _minigrid_bank(tile: int) -> tuple[list[tuple[str, int | None]], np.ndarray]:
    """Labels and drawings of every tile: unseen, then each object without and with the agent."""
    from minigrid.core.grid import Grid

    labels: list[tuple[str, int | None]] = [("unseen", None)]
    tiles = [np.zeros((tile, tile, 3), dtype=np.uint8)]
    for obj in _minigrid_objects():
        for direction in (None, 0, 1, 2, 3):
            if direction is not None and obj is not None and not obj.can_overlap():
                continue
            labels.append((minigrid_object(obj), direction))
            tiles.append(Grid.render_tile(obj, agent_dir=direction, highlight=True, tile_size=tile))
    return labels, np.stack(tiles).astype(np.int32)


def _minigrid(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    from minigrid.core.grid import Grid

    adapter = _renderer(task_id)
    width = max(int(k.split()[1].split(",")[0]) for k in hint if k.startswith("cell ")) + 1
    height = max(int(k.split()[1].split(",")[1]) for k in hint if k.startswith("cell ")) + 1
    tile = int(adapter.tile)
    strip = "carrying" in hint
    want = (height * tile + (tile + 8 if strip else 0), width * tile, 3)
    if frame.shape != want:
        return None
    objs = _minigrid_objects()
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
        facts["carrying"] = "nothing" if carried[k] is None else minigrid_object(carried[k])
    facts.update(cell_facts)
    return facts


# -- Tetris -----------------------------------------------------------------------
@cache
def _tetris_palette(task_id: str) -> tuple[np.ndarray, int]:
    e = _renderer(task_id).env
    palette = np.array([p.color_rgb for p in e.pixels], dtype=np.int32)
    return palette, int(e.render_scaling_factor)


def _tetris(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    palette, scale = _tetris_palette(task_id)
    rows = len([k for k in hint if k.startswith("row ")])
    cols = len(next(v for k, v in hint.items() if k.startswith("row ")))
    if frame.shape != (rows * scale, cols * scale, 3):
        return None
    centres = frame[scale // 2 :: scale, scale // 2 :: scale].astype(np.int32)
    d = ((centres[:, :, None, :] - palette[None, None]) ** 2).sum(axis=3)
    return tetris_facts(d.argmin(axis=2))


# -- Breakout ---------------------------------------------------------------------
def _breakout(task_id: str, frame: np.ndarray, hint: Facts) -> Facts | None:
    from vical.envs import breakout as b

    if frame.shape != (b.HEIGHT * b.SCALE, b.WIDTH * b.SCALE, 3):
        return None
    img = frame[:: b.SCALE, :: b.SCALE].astype(np.int32)

    def near(color: tuple[int, int, int]) -> np.ndarray:
        return np.abs(img - np.array(color)).sum(axis=2) <= 24

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
    game = _renderer(task_id).game
    bricks = []
    background = np.abs(img - np.array(b.BACKGROUND)).sum(axis=2) <= 24
    for i in range(n):
        lo, hi = game.brick_span(i)
        region = background[b.BRICK_TOP : b.BRICK_BOTTOM, lo + (i > 0) : hi]
        bricks.append(bool(region.mean() < 0.5))
    return breakout_facts(paddle_x, ball, bricks)


_READERS: dict[str, Callable[[str, np.ndarray, Facts], Facts | None]] = {
    "taxi": _taxi,
    "cliffwalking": _cliff,
    "minigrid": _minigrid,
    "tetris": _tetris,
    "breakout": _breakout,
}
