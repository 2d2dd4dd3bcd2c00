"""CustomBreakout: a small Breakout of our own, simulated on integers and drawn with numpy.

The game is built for short, fully visible episodes: one life, one row of two
or three bricks, a ball that always moves 5 units per step, and explicit
endings (all bricks broken: Victory; ball lost below the paddle: Terminated).

Geometry (logical units; every unit is drawn as ``SCALE`` x ``SCALE`` pixels):

* the field is ``WIDTH`` x ``HEIGHT``; grey walls of ``WALL`` units close the
  left, right and top sides; the bottom is open;
* the brick row spans the inner width between ``BRICK_TOP`` and
  ``BRICK_BOTTOM``, split into ``columns`` equal bricks;
* the paddle (``PADDLE_W`` x ``PADDLE_H``) slides along ``PADDLE_TOP``,
  ``PADDLE_SPEED`` units per step;
* the ball is ``BALL`` x ``BALL``. Its velocity is always one of
  (+-3, -+4) or (+-4, -+3): length exactly 5, so "ball speed 5" holds on
  every step without rounding. Walls mirror it; the paddle sends it back up at
  an angle chosen by where it lands on the paddle (outer quarters: the flat
  (4, 3) angle, inner half: the steep (3, 4) angle, toward the side hit);
  breaking a brick reverses its vertical direction.

Collisions are swept along the step (the ball cannot tunnel through the
paddle or a brick), and a brick is hit when the ball's centre column is under
(or over) it as it crosses the brick row's edge.

Native actions: 0 NOOP, 1 FIRE, 2 RIGHT, 3 LEFT. The ball waits on the
paddle until FIRE. A task offers a subset of them through its YAML
``actions`` map; when FIRE is not in the subset the ball is served
automatically on the first step.

Human-init variants replay an opening produced by :func:`scripted_opening`, a
deterministic paddle-tracking player (see its docstring); the YAML stores the
resulting action names and ``tests/test_breakout.py`` checks they still match.

The adapter (bricks-broken score, one life) lives in the game module,
:mod:`vical.envs.games.breakout` (found by :func:`vical.envs.game_module`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vical.envs.core import Adapter, Frame, no_adapter
from vical.spec import TaskSpec

NOOP, FIRE, RIGHT, LEFT = 0, 1, 2, 3
NATIVE_NAMES = {NOOP: "NOOP", FIRE: "Fire", RIGHT: "Right", LEFT: "Left"}

WIDTH, HEIGHT, WALL = 72, 66, 3
BRICK_TOP, BRICK_BOTTOM = 12, 18
PADDLE_W, PADDLE_H, PADDLE_TOP, PADDLE_SPEED = 14, 2, 58, 6
BALL = 3
SPEED = 5
SCALE = 4

BACKGROUND = (0, 0, 0)
WALL_COLOR = (142, 142, 142)
BRICK_COLORS = ((200, 72, 72), (198, 108, 58), (180, 122, 48))
PADDLE_COLOR = (66, 114, 194)
BALL_COLOR = (236, 236, 236)


@dataclass
class BreakoutGame:
    """The whole game state; :meth:`step` advances it by one frame."""

    columns: int = 3
    auto_serve: bool = False
    paddle_x: int = 0
    ball_x: int = 0
    ball_y: int = 0
    vx: int = 0
    vy: int = 0
    served: bool = False
    lost: bool = False
    bricks: list[bool] = field(default_factory=list)
    serve_dir: int = 1

    def reset(self, seed: int) -> None:
        if self.columns not in (2, 3):
            raise ValueError(f"CustomBreakout has 2 or 3 brick columns, got {self.columns}")
        rng = np.random.default_rng(seed)
        span = WIDTH - 2 * WALL - PADDLE_W
        self.paddle_x = WALL + int(rng.integers(span // 4, 3 * span // 4 + 1))
        self.serve_dir = 1 if rng.integers(2) else -1
        self.bricks = [True] * self.columns
        self.served = False
        self.lost = False
        self.vx = self.vy = 0
        self._hold_ball()

    # -- geometry -------------------------------------------------------------
    def brick_span(self, i: int) -> tuple[int, int]:
        inner = WIDTH - 2 * WALL
        return WALL + inner * i // self.columns, WALL + inner * (i + 1) // self.columns

    def _brick_at(self, cx: float) -> int | None:
        for i in range(self.columns):
            lo, hi = self.brick_span(i)
            if lo <= cx < hi:
                return i
        return None

    def _hold_ball(self) -> None:
        self.ball_x = self.paddle_x + (PADDLE_W - BALL) // 2
        self.ball_y = PADDLE_TOP - BALL

    @property
    def bricks_left(self) -> int:
        return sum(self.bricks)

    @property
    def won(self) -> bool:
        return self.bricks_left == 0

    @property
    def over(self) -> bool:
        return self.lost or self.won

    # -- dynamics -------------------------------------------------------------
    def step(self, action: int) -> int:
        """Advance one frame; returns the number of bricks broken."""
        if self.over:
            return 0
        if action == RIGHT:
            self.paddle_x = min(self.paddle_x + PADDLE_SPEED, WIDTH - WALL - PADDLE_W)
        elif action == LEFT:
            self.paddle_x = max(self.paddle_x - PADDLE_SPEED, WALL)
        if not self.served:
            self._hold_ball()
            if action == FIRE or self.auto_serve:
                self.served = True
                self.vx, self.vy = 3 * self.serve_dir, -4
            return 0
        return self._move_ball()

    def _move_ball(self) -> int:
        broken = 0
        x0, y0 = self.ball_x, self.ball_y
        x, y = x0 + self.vx, y0 + self.vy
        # side walls
        if x < WALL:
            x, self.vx = 2 * WALL - x, -self.vx
        elif x + BALL > WIDTH - WALL:
            x, self.vx = 2 * (WIDTH - WALL - BALL) - x, -self.vx
        # top wall
        if y < WALL:
            y, self.vy = 2 * WALL - y, -self.vy

        def x_at(edge_from: float, edge_to: float, line: float) -> float:
            t = (line - edge_from) / (edge_to - edge_from)
            return x0 + t * (x - x0) + BALL / 2

        if self.vy < 0 and y0 >= BRICK_BOTTOM > y:  # top edge rises through the row's bottom
            i = self._brick_at(x_at(y0, y, BRICK_BOTTOM))
            if i is not None and self.bricks[i]:
                self.bricks[i] = False
                broken += 1
                y, self.vy = 2 * BRICK_BOTTOM - y, -self.vy
        elif self.vy > 0 and y0 + BALL <= BRICK_TOP < y + BALL:  # falls onto the row's top
            i = self._brick_at(x_at(y0 + BALL, y + BALL, BRICK_TOP))
            if i is not None and self.bricks[i]:
                self.bricks[i] = False
                broken += 1
                y, self.vy = 2 * (BRICK_TOP - BALL) - y, -self.vy
        elif self.vy > 0 and y0 + BALL <= PADDLE_TOP < y + BALL:  # reaches the paddle line
            cx = x_at(y0 + BALL, y + BALL, PADDLE_TOP)
            if self.paddle_x - BALL / 2 <= cx <= self.paddle_x + PADDLE_W + BALL / 2:
                offset = (cx - (self.paddle_x + PADDLE_W / 2)) / (PADDLE_W / 2 + BALL / 2)
                side = -1 if offset < 0 else 1
                self.vx, self.vy = (4 * side, -3) if abs(offset) >= 0.5 else (3 * side, -4)
                y = 2 * (PADDLE_TOP - BALL) - y
        self.ball_x, self.ball_y = x, y
        if self.ball_y >= HEIGHT:
            self.lost = True
        return broken

    # -- drawing --------------------------------------------------------------
    def render(self) -> Frame:
        img = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        img[:] = BACKGROUND
        img[:, :WALL] = WALL_COLOR
        img[:, WIDTH - WALL :] = WALL_COLOR
        img[:WALL, :] = WALL_COLOR
        for i, alive in enumerate(self.bricks):
            if alive:
                lo, hi = self.brick_span(i)
                img[BRICK_TOP:BRICK_BOTTOM, lo + (i > 0) : hi] = BRICK_COLORS[i % 3]
        img[PADDLE_TOP : PADDLE_TOP + PADDLE_H, self.paddle_x : self.paddle_x + PADDLE_W] = (
            PADDLE_COLOR
        )
        if not self.lost:
            by, bx = self.ball_y, self.ball_x
            img[max(by, 0) : min(by + BALL, HEIGHT), max(bx, 0) : min(bx + BALL, WIDTH)] = (
                BALL_COLOR
            )
        return np.kron(img, np.ones((SCALE, SCALE, 1), dtype=np.uint8))


def track_ball(game: BreakoutGame, aim: int = 0) -> int:
    """Native action of a paddle that follows the ball's column plus ``aim`` units."""
    if not game.served:
        return FIRE
    target = game.ball_x + BALL // 2 + aim - PADDLE_W // 2
    if target > game.paddle_x + PADDLE_SPEED // 2:
        return RIGHT
    if target < game.paddle_x - PADDLE_SPEED // 2:
        return LEFT
    return NOOP


def scripted_opening(seed: int, columns: int, steps: int, aim: int = 0, wait: int = 0) -> list[str]:
    """The deterministic opening replayed by a human-init variant, as canonical names.

    A scripted player waits ``wait`` frames (NOOP), fires, then keeps the
    paddle under the ball with an ``aim`` offset (units; the side of the paddle
    the ball lands on sets its rebound angle) for a total of ``steps``
    actions, on a fresh game with the given seed and brick columns. The
    variants in ``vical/tasks/breakout.yaml`` store the output of this
    function; re-running it reproduces them exactly.
    """
    game = BreakoutGame(columns=columns)
    game.reset(seed)
    names = []
    for t in range(steps):
        action = NOOP if t < wait else track_ball(game, aim)
        game.step(action)
        if game.over:
            raise ValueError("the opening must not end the game")
        names.append(NATIVE_NAMES[action])
    return names


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a CustomBreakout environment without a game module ``Adapter``."""
    raise no_adapter(task, "CustomBreakout")
