"""CustomBreakout's adapter: bricks-broken score, one life (the game itself, simulated on
integers and drawn with numpy: :mod:`vical.envs.breakout`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from vical.envs import breakout as b
from vical.envs import core
from vical.envs.breakout import FIRE, NATIVE_NAMES, BreakoutGame
from vical.envs.core import Frame, Tick
from vical.envs.scoring import EventCounter
from vical.envs.states import Facts
from vical.spec import TaskSpec


class BreakoutAdapter(core.Adapter):
    """CustomBreakout behind the vical contract: bricks-broken score, one life."""

    def __init__(self, task: TaskSpec):
        super().__init__(task)
        kw = dict(task.env_kwargs)
        natives = set(task.env.actions.values())
        unknown = natives - set(NATIVE_NAMES)
        if unknown:
            raise ValueError(f"{task.id}: unknown CustomBreakout native actions {unknown}")
        self.game = BreakoutGame(columns=int(kw.get("columns", 3)), auto_serve=FIRE not in natives)
        self.tracking = False
        self._frame: Frame | None = None

    def reset(self, seed: int) -> None:
        self.game.reset(seed)
        self.tracking = False
        self._frame = None

    def begin(self) -> None:
        self.bricks = EventCounter(target=float(self.game.bricks_left))
        self.tracking = True

    def act(self, native: Any) -> Tick:
        broken = self.game.step(int(native))
        self._frame = None
        if self.tracking:
            self.bricks.add(broken)
        info = {"bricks_left": self.game.bricks_left, "lost": self.game.lost}
        return Tick(reward=float(broken), terminated=self.game.over, info=info)

    def frame(self) -> Frame:
        if self._frame is None:
            self._frame = self.game.render()
        return self._frame

    def score(self) -> float:
        return self.bricks.score()

    def passed(self) -> bool:
        return self.game.won

    def ending(self, native_terminated: bool) -> str | None:
        if self.game.won:
            return "Victory"
        if self.game.lost:
            return "Terminated"
        return None

    def lives(self) -> int | None:
        return 0 if self.game.lost else 1

    def doctor_state(self) -> dict[str, float]:
        """Ball and paddle positions, for ``vical doctor``."""
        g = self.game
        return {"ball_x": float(g.ball_x), "ball_y": float(g.ball_y), "paddle_x": float(g.paddle_x)}

    def state_facts(self) -> Facts:
        """What the frame shows: the paddle's column, the ball's top-left corner (None once
        the ball is lost) and whether each brick is still there."""
        g = self.game
        ball = None if g.lost else (int(g.ball_x), int(g.ball_y))
        return breakout_facts(int(g.paddle_x), ball, [bool(b) for b in g.bricks])

    def progress(self) -> dict[str, Any]:
        g = self.game
        return {
            "bricks_broken": int(self.bricks.count) if self.tracking else 0,
            "bricks_left": g.bricks_left,
            "ball": [g.ball_x, g.ball_y],
            "paddle_x": g.paddle_x,
            "lost": g.lost,
        }


def breakout_facts(paddle_x: int, ball: tuple[int, int] | None, bricks: list[bool]) -> Facts:
    """Breakout's facts from its paddle column, ball corner (None once lost) and bricks."""
    facts: Facts = {
        "paddle x": int(paddle_x),
        "ball": None if ball is None else [int(ball[0]), int(ball[1])],
    }
    for i, alive in enumerate(bricks):
        facts[f"brick {i}"] = bool(alive)
    return facts


def read_frame(renderer: core.Adapter, frame: Frame, hint: Facts) -> Facts | None:
    """The facts an RGB ``frame`` shows (a true one or a model's prediction), or None.

    ``renderer`` is a Breakout adapter of the same task (its bricks' spans);
    ``hint``, the context state's facts, gives the number of bricks and the paddle
    when the frame shows none. The paddle, ball and bricks are found by their
    exact colours.
    """
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
    if not isinstance(renderer, BreakoutAdapter):
        raise TypeError(
            f"{renderer.task.id}: its adapter is a {type(renderer).__name__}, not a BreakoutAdapter"
        )
    game = renderer.game
    bricks = []
    background = np.abs(img - np.array(b.BACKGROUND)).sum(axis=2) <= 24
    for i in range(n):
        lo, hi = game.brick_span(i)
        region = background[b.BRICK_TOP : b.BRICK_BOTTOM, lo + (i > 0) : hi]
        bricks.append(bool(region.mean() < 0.5))
    return breakout_facts(paddle_x, ball, bricks)


# the environment's adapter (vical.envs.make_adapter)
Adapter = BreakoutAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("arcade", 3)
