"""CliffWalking (Gymnasium Toy Text, ``CliffWalking-v1``): a 4 x 12 grid whose bottom row
between start and goal is the cliff."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, cast

import numpy as np
from gymnasium.envs.toy_text.cliffwalking import CliffWalkingEnv

from vical.envs import core
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import path_efficiency
from vical.envs.states import Facts, SimState, StateKindError
from vical.spec import TaskSpec

CLIFF_ROWS, CLIFF_COLS = 4, 12
CLIFF_GOAL = (3, 11)
CLIFF_FALL_REWARD = -100
_MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # Up, Right, Down, Left (native 0-3)


def _is_cliff(r: int, c: int) -> bool:
    return r == 3 and 1 <= c <= 10


def cliff_distances() -> dict[tuple[int, int], int]:
    """Shortest safe-path distance from every non-cliff cell to the goal (BFS)."""
    dist = {CLIFF_GOAL: 0}
    q = deque([CLIFF_GOAL])
    while q:
        r, c = q.popleft()
        for dr, dc in _MOVES:
            nr, nc = r + dr, c + dc
            inside = 0 <= nr < CLIFF_ROWS and 0 <= nc < CLIFF_COLS
            if inside and not _is_cliff(nr, nc) and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                q.append((nr, nc))
    return dist


@dataclass(frozen=True)
class CliffState(SimState):
    """CliffWalking's state: the walker's cell and the way it faces (the last move,
    native 0-3, or None before the first: the renderer then draws it facing down)."""

    row: int
    column: int
    facing: int | None

    def facts(self) -> Facts:
        """What the frame shows of it: the walker's row and column."""
        return {"row": self.row, "column": self.column}


class CliffWalkingAdapter(GymAdapter):
    """No step cost; a cliff fall ends the episode; forward progress and goal scored.

    Score (path efficiency): 80 x the share of the start's shortest safe-path
    distance closed (best so far) until the goal; at the goal 80 + 20 x
    (optimal steps / steps used). Pass: the goal is reached.
    """

    def __init__(self, task: TaskSpec):
        super().__init__(task)
        self.dist = cliff_distances()

    def pos(self) -> tuple[int, int]:
        return divmod(int(cast(CliffWalkingEnv, self.env.unwrapped).s), CLIFF_COLS)

    def read_state(self) -> CliffState:
        e = cast(CliffWalkingEnv, self.env.unwrapped)
        row, col = self.pos()
        return CliffState(row, col, None if e.lastaction is None else int(e.lastaction))

    def set_state(self, state: SimState) -> None:
        """Put the walker on ``state``'s cell, facing its way (scoring progress untouched)."""
        if not isinstance(state, CliffState):
            raise StateKindError(f"{self.task.id}: CliffWalking sets a CliffState")
        e = cast(CliffWalkingEnv, self.env.unwrapped)
        e.s = state.row * CLIFF_COLS + state.column
        e.lastaction = state.facing
        self.obs = int(e.s)
        self._frame = None

    def state_facts(self) -> Facts:
        return self.read_state().facts()

    def start(self) -> None:
        self.start_d = self.dist[self.pos()]
        self.best_d = self.start_d
        self.moves = 0
        self.fell = False
        self.reached = False

    def on_tick(self, tick: Tick) -> None:
        self.moves += 1
        if tick.reward <= CLIFF_FALL_REWARD:
            self.fell = True
            return
        self.best_d = min(self.best_d, self.dist[self.pos()])
        self.reached = self.reached or tick.terminated

    def ending(self, native_terminated: bool) -> str | None:
        if self.tracking and self.fell:
            return "Terminated"
        if native_terminated:
            return "Victory"
        return None

    def score(self) -> float:
        return path_efficiency(
            self.start_d,
            self.best_d,
            self.reached,
            self.moves,
            self.start_d,
            progress_weight=float(self.task.params.get("progress_weight", 80.0)),
        )

    def passed(self) -> bool:
        return self.reached

    def progress(self) -> dict[str, Any]:
        return {
            "start_distance": self.start_d,
            "best_distance": self.best_d,
            "fell": self.fell,
            "reached": self.reached,
        }


# -- the world-model track's frame reader -----------------------------------------
@cache
def _drawings(renderer: CliffWalkingAdapter) -> Frame:
    """The renderer's frame with the walker on each cell, in cell order."""
    base = renderer.read_state()  # the walker keeps the renderer's facing in every drawing
    out = []
    for s in range(CLIFF_ROWS * CLIFF_COLS):
        row, col = divmod(s, CLIFF_COLS)
        renderer.set_state(replace(base, row=row, column=col))
        out.append(np.asarray(renderer.frame()).copy())
    return np.stack(out)


def read_frame(renderer: core.Adapter, frame: Frame, hint: Facts) -> Facts | None:
    """The facts an RGB ``frame`` shows (a true one or a model's prediction), or None.

    ``renderer`` is a Cliff Walking adapter of the same task: the frame is compared
    with its drawing of the walker on every cell (drawn once per renderer), and
    the nearest drawing gives the walker's cell. ``hint`` is not needed.
    """
    if not isinstance(renderer, CliffWalkingAdapter):
        raise TypeError(
            f"{renderer.task.id}: its adapter is a {type(renderer).__name__}, "
            "not a CliffWalkingAdapter"
        )
    drawings = _drawings(renderer)
    if drawings.shape[1:] != frame.shape:
        return None
    d = ((drawings.astype(np.int32) - frame.astype(np.int32)) ** 2).sum(axis=(1, 2, 3))
    row, col = divmod(int(np.argmin(d)), CLIFF_COLS)
    return CliffState(row, col, None).facts()


# the environment's adapter (vical.envs.make_adapter)
Adapter = CliffWalkingAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("grid-navigation", 2)
