"""Tetris (``tetris_gymnasium/Tetris``, simulator notes in :mod:`vical.envs.tetris`).

The simulator's reward (one point per locked piece plus a line bonus) is
ignored. Progress is counted in cleared rows only (the ``lines_cleared`` the
simulator reports after each step): the score is the capped ratio of rows
cleared since the start state to ``rows_target`` (2), the task passes after
one cleared row and ends as a Victory after two. Topping out (a new piece
cannot spawn) ends the episode as Terminated.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from vical.envs import (
    core,
    tetris,  # noqa: F401  (registers tetris_gymnasium/Tetris)
)
from vical.envs.compat import tetris as compat
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import EventCounter
from vical.envs.states import Facts

if TYPE_CHECKING:
    from tetris_gymnasium.envs.tetris import Tetris


class TetrisAdapter(GymAdapter):
    """Row-clearing score; the piece-drop reward of the simulator is never read."""

    env: Tetris

    # the upstream simulator keeps state across reset() (vical.envs.tetris); a fresh
    # one for every reset but the first costs 0.2 ms
    rebuild_on_reset = True

    def frame(self) -> Frame:
        # tetris-gymnasium 0.3.0 casts with ``astype(np.integer)`` while drawing,
        # which numpy 1.26 flags as deprecated on every frame; the result is exact.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return super().frame()

    def pixel_ids(self) -> npt.NDArray[np.int64]:
        """The grid of pixel ids the renderer colours, one per cell: the board with the
        falling piece, then the queue, padding and holder beside it (tetris-gymnasium's
        layout); ``0`` empty, ``1`` wall, then the pieces' ids."""
        obs = compat.observation(self.env)
        board, holder, queue = obs["board"], obs["holder"], obs["queue"]
        size = holder.shape[0]
        width = max(holder.shape[1], queue.shape[1])
        holder = np.hstack((holder, np.ones((size, width - holder.shape[1]))))
        queue = np.hstack((queue, np.ones((size, width - queue.shape[1]))))
        pad = np.ones((board.shape[0] - 2 * size, width))
        return np.hstack((board, np.vstack((queue, pad, holder)))).astype(np.int64)

    def palette(self) -> npt.NDArray[np.int32]:
        """The renderer's colour of each pixel id: an (ids, 3) RGB table."""
        return np.array([p.color_rgb for p in self.env.pixels], dtype=np.int32)

    @property
    def cell_pixels(self) -> int:
        """The side of one cell in the frame, in pixels."""
        return int(self.env.render_scaling_factor)

    def state_facts(self) -> Facts:
        """What the frame shows: one fact per row of :meth:`pixel_ids` (:func:`tetris_facts`)."""
        return tetris_facts(self.pixel_ids())

    def start(self) -> None:
        self.rows = EventCounter(target=self.task.target("rows_target"))
        self.topped_out = False

    def on_tick(self, tick: Tick) -> None:
        self.rows.add(int(tick.info.get("lines_cleared", 0)))
        self.topped_out = self.topped_out or tick.terminated

    def score(self) -> float:
        return self.rows.score()

    def passed(self) -> bool:
        return self.rows.count >= int(self.task.params.get("pass_rows", 1))

    def ending(self, native_terminated: bool) -> str | None:
        if self.rows.count >= self.task.target("rows_target"):
            return "Victory"
        if native_terminated:
            return "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {"rows_cleared": int(self.rows.count), "topped_out": self.topped_out}


def tetris_facts(ids: npt.NDArray[np.integer[Any]]) -> Facts:
    """One fact per row of a pixel-id grid: its ids as a string (``row 07``: ``"1002201"``)."""
    return {f"row {r:02d}": "".join(str(int(v)) for v in ids[r]) for r in range(ids.shape[0])}


def read_frame(renderer: core.Adapter, frame: Frame, hint: Facts) -> Facts | None:
    """The facts an RGB ``frame`` shows (a true one or a model's prediction), or None.

    ``renderer`` is a Tetris adapter of the same task (its palette and cell size);
    ``hint``, the context state's facts, gives the board's size. Each cell's
    centre colour is matched to the nearest colour of the palette.
    """
    if not isinstance(renderer, TetrisAdapter):
        raise TypeError(
            f"{renderer.task.id}: its adapter is a {type(renderer).__name__}, not a TetrisAdapter"
        )
    palette, scale = renderer.palette(), renderer.cell_pixels
    rows = len([k for k in hint if k.startswith("row ")])
    cols = len(next(v for k, v in hint.items() if k.startswith("row ")))
    if frame.shape != (rows * scale, cols * scale, 3):
        return None
    centres = frame[scale // 2 :: scale, scale // 2 :: scale].astype(np.int32)
    d = ((centres[:, :, None, :] - palette[None, None]) ** 2).sum(axis=3)
    return tetris_facts(d.argmin(axis=2))


# the environment's adapter (vical.envs.make_adapter)
Adapter = TetrisAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("arcade", 1)
