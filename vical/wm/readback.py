"""Reading a frame back into the facts of :mod:`vical.wm.state`, for the exactly rendered families.

:func:`read_back` takes any RGB frame (a true one or a model's prediction) and
returns the facts the frame shows, in the form :func:`vical.wm.state.sim_state`
gives them for the simulator, or None when the frame cannot be read (wrong
size). A true frame reads back to exactly the simulator's facts
(``tests/test_wm_readback.py`` holds this for every case); a predicted frame
reads back to the nearest state the renderer can draw.

The readers live with their games: each game module of :mod:`vical.envs` whose
frame can be read back exactly has a public
``read_frame(renderer, frame, hint) -> Facts | None`` (Taxi and Cliff Walking
draw candidate states through the adapter's ``set_state``; the MiniGrid games
share :func:`vical.envs.minigrid.read_frame`, which matches tiles; Tetris
matches palette colours; Breakout finds its objects by their colours). This
module only finds the task's game module (:func:`vical.envs.game_module`) and
calls its reader with a renderer: a private simulator of the task, made once
per task and used only to draw, so the readers reach a simulator only through
its adapter's public methods.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np
import numpy.typing as npt

from vical.envs import Adapter, game_module, make_env
from vical.envs.core import Frame
from vical.envs.states import Facts
from vical.wm.sim import task_by_id

FrameReader = Callable[[Adapter, Frame, Facts], Facts | None]


def read_back(task_id: str, frame: npt.ArrayLike, hint: Facts) -> Facts | None:
    """The facts ``frame`` shows for a case of task ``task_id``.

    ``hint`` is the context state's facts: the Toy Text search starts from it, and
    the other readers take the layout's size from it.
    """
    reader = _reader(task_id)
    if reader is None:
        raise ValueError(f"{task_id}: its family has no exact read-back")
    pixels = np.asarray(frame)
    if pixels.ndim != 3 or pixels.shape[2] != 3:
        return None
    return reader(_renderer(task_id), pixels.astype(np.uint8, copy=False), hint)


def _reader(task_id: str) -> FrameReader | None:
    """The ``read_frame`` of the task's game module, if it has one."""
    game = game_module(task_by_id(task_id).env)
    reader: FrameReader | None = getattr(game, "read_frame", None)
    return reader


@cache
def _renderer(task_id: str) -> Adapter:
    """A private simulator of the task used only to draw candidate states."""
    env = make_env(task_id)
    env.reset()
    return env.adapter
