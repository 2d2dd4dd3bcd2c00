"""Simulator state as flat, JSON-able facts: what a case's specification is written from.

:func:`sim_state` reads one environment's state into a mapping of named facts
(``"taxi row": 3``, ``"cell 4,2": "door-yellow-locked"``, ``"row 07": "..22.."``).
A case's required change is the facts that differ between the context state and
the state after the intervention; its protected state is the facts that do not.

For the families whose renderer is known exactly (:data:`EXACT_FAMILIES`: Toy
Text, MiniGrid, Tetris and the custom Breakout) the facts are exactly what the
frame shows, so :mod:`vical.wm.readback` can read the same facts back from a
frame and the specification can be checked on a predicted frame. For the other
families the facts come from the scoring state (``progress``), the lives counter
and, for classic control, the physical state vector; they describe the case,
and its checks are made on pixels (:mod:`vical.wm.score`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from vical.envs import VicalEnv

if TYPE_CHECKING:
    from vical.envs.minigrid import MiniGridAdapter

EXACT_FAMILIES = frozenset({"toytext", "minigrid", "tetris", "breakout"})

TAXI_STANDS = ("red", "green", "yellow", "blue")
HEADINGS = ("down", "up", "right", "left")  # Taxi's taxi_orientation 0-3 (its move actions)


def sim_state(env: VicalEnv) -> dict[str, Any]:
    """The environment's current state as named facts (see the module docstring)."""
    family = env.task.env.family
    reader = _READERS.get(env.task.env.env) or _READERS.get(family)
    if reader is not None:
        return reader(env)
    return _generic(env)


def _taxi(env: VicalEnv) -> dict[str, Any]:
    e = env.adapter.env  # type: ignore[attr-defined]
    row, col, p, d = (int(v) for v in e.decode(int(e.s)))
    return taxi_facts(row, col, p, d, int(e.taxi_orientation))


def taxi_facts(row: int, col: int, p: int, d: int, heading: int) -> dict[str, Any]:
    """Taxi's facts from its decoded state and the way the taxi faces."""
    return {
        "taxi row": row,
        "taxi column": col,
        "taxi faces": HEADINGS[heading],
        "passenger": "in taxi" if p == 4 else TAXI_STANDS[p],
        "destination": TAXI_STANDS[d],
    }


def _cliff(env: VicalEnv) -> dict[str, Any]:
    row, col = divmod(int(env.adapter.env.s), 12)  # type: ignore[attr-defined]
    return {"row": row, "column": col}


def minigrid_object(obj: Any) -> str:
    """A MiniGrid cell's content as text: ``empty``, ``wall``, ``door-yellow-locked``..."""
    if obj is None:
        return "empty"
    name = f"{obj.type}-{obj.color}" if obj.type not in ("wall", "lava", "goal") else obj.type
    if obj.type == "door":
        name += "-locked" if obj.is_locked else ("-open" if obj.is_open else "-closed")
    return str(name)


def _minigrid(env: VicalEnv) -> dict[str, Any]:
    ad = cast("MiniGridAdapter", env.adapter)
    e = ad.grid_env
    mask = ad.visible
    facts: dict[str, Any] = {}
    ax, ay = (int(v) for v in e.agent_pos)
    facts["agent x"] = ax
    facts["agent y"] = ay
    facts["agent dir"] = int(e.agent_dir)
    if ad.carry_strip:
        facts["carrying"] = minigrid_object(e.carrying) if e.carrying is not None else "nothing"
    for j in range(e.height):
        for i in range(e.width):
            key = f"cell {i},{j}"
            facts[key] = minigrid_object(e.grid.get(i, j)) if mask[i, j] else "unseen"
    return facts


def tetris_ids(env: Any) -> np.ndarray:
    """The grid of pixel ids the Tetris renderer colours: the board with the falling
    piece, then the queue, padding and holder beside it (tetris-gymnasium's layout)."""
    obs = env._get_obs()
    board, holder, queue = obs["board"], obs["holder"], obs["queue"]
    size = holder.shape[0]
    width = max(holder.shape[1], queue.shape[1])
    holder = np.hstack((holder, np.ones((size, width - holder.shape[1]))))
    queue = np.hstack((queue, np.ones((size, width - queue.shape[1]))))
    pad = np.ones((board.shape[0] - 2 * size, width))
    return np.hstack((board, np.vstack((queue, pad, holder)))).astype(np.int64)


def tetris_facts(ids: np.ndarray) -> dict[str, Any]:
    """One fact per row of the id grid: its ids as a string (``0`` empty, ``1`` wall)."""
    return {f"row {r:02d}": "".join(str(int(v)) for v in ids[r]) for r in range(ids.shape[0])}


def _tetris(env: VicalEnv) -> dict[str, Any]:
    return tetris_facts(tetris_ids(env.adapter.env))  # type: ignore[attr-defined]


def breakout_facts(
    paddle_x: int, ball: tuple[int, int] | None, bricks: list[bool]
) -> dict[str, Any]:
    """Breakout's facts: paddle column, ball corner (None once lost), each brick's presence."""
    facts: dict[str, Any] = {
        "paddle x": int(paddle_x),
        "ball": None if ball is None else [int(ball[0]), int(ball[1])],
    }
    for i, alive in enumerate(bricks):
        facts[f"brick {i}"] = bool(alive)
    return facts


def _breakout(env: VicalEnv) -> dict[str, Any]:
    g = env.adapter.game  # type: ignore[attr-defined]
    ball = None if g.lost else (int(g.ball_x), int(g.ball_y))
    return breakout_facts(int(g.paddle_x), ball, [bool(b) for b in g.bricks])


def _round(v: Any) -> Any:
    if isinstance(v, float | np.floating):
        return round(float(v), 3)
    if isinstance(v, np.integer | np.bool_):
        return v.item()
    if isinstance(v, list | tuple):
        return [_round(x) for x in v]
    return v


_CLASSIC_NAMES = {
    "cartpole": ("cart position", "cart velocity", "pole angle", "pole angular velocity"),
    "mountaincar": ("car position", "car velocity"),
    "acrobot": ("joint 1 angle", "joint 2 angle", "joint 1 velocity", "joint 2 velocity"),
}


def _generic(env: VicalEnv) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    names = _CLASSIC_NAMES.get(env.task.env.env)
    sim = getattr(env.adapter, "env", None)
    if names is not None and sim is not None:
        for name, value in zip(names, np.asarray(sim.state).ravel(), strict=False):
            facts[name] = _round(value)
    lives = env.adapter.lives()
    if lives is not None:
        facts["lives"] = int(lives)
    for k, v in sorted(env.adapter.progress().items()):
        if isinstance(v, dict):
            continue
        facts[str(k)] = _round(v)
    return facts


_READERS = {
    "taxi": _taxi,
    "cliffwalking": _cliff,
    "minigrid": _minigrid,
    "tetris": _tetris,
    "breakout": _breakout,
}
