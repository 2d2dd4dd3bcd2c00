"""CustomBreakout's adapter: bricks-broken score, one life (the game itself, simulated on
integers and drawn with numpy: :mod:`vical.envs.breakout`)."""

from __future__ import annotations

from typing import Any

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


# the environment's adapter (vical.envs.make_adapter)
Adapter = BreakoutAdapter
