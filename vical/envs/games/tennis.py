"""Tennis: return the ball in the rally in progress.

Table 7 (ALE/Tennis-v5): "Execute four unit-frame ALE steps to detect
ball-direction reversals; auto-swing before evaluation and terminate on life
loss." As implemented here:

* Four unit-frame ALE steps per outer slot (``frameskip: 1, unit_steps: 4`` in
  the YAML); the ball's position along the court is read from RAM after every
  one of them (:meth:`Adapter.on_unit_step`), so a reversal is seen at
  unit-frame resolution.
* Auto-swing before evaluation: in ``prepare`` the agent's player serves (FIRE
  held for four unit frames) so every task starts with the ball in play; during
  the rally the racket swings by itself whenever the ball is in reach, so the
  agent's job is positioning.
* Life loss: the first point the opponent wins counts as the lost life
  (``lives`` drops from 1 to 0) and ends the episode.

A return is a reversal of the ball from "toward the agent" to "away from the
agent" on a unit frame where no point is decided (the racket met the ball). The
pass is the first return (``pass_returns`` in the task file), kept when the point
is lost later: Table 28's Tennis row has every episode end before the budget,
40% as early successes, so the pass comes during the rally while the episode
runs on to the point's end. A point won by the agent also passes and ends the
episode as a Victory. Score: 100 once the point is won; before that, the returns
as an event count against the calibrated ``returns`` target (Appendix 2.2:
"capped monotonic counts, such as balls returned").
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import EventCounter

BALL_DEPTH = 15  # ball position along the court; larger is nearer the top baseline
SERVE_FRAMES = 4
AGENT_DEPTH = 24  # the agent's (orange) player position along the court
OPPONENT_DEPTH = 25


class Adapter(ALEAdapter):
    """One rally of tennis: returns counted from RAM at unit-frame resolution; the
    first return passes, a lost point ends the episode, a won point ends it in Victory."""

    def reset(self, seed: int) -> None:
        self.points_won = 0
        self.points_lost = 0
        self.returns = 0
        self.last_depth: int | None = None
        self.last_dir = 0
        super().reset(seed)

    def prepare(self) -> None:
        # Auto-swing: serve (FIRE held for SERVE_FRAMES unit frames) so the
        # rally is under way before any decision.
        fire = self.native_index("FIRE")
        for _ in range(SERVE_FRAMES):
            self.env.step(fire)
            self.on_unit_step(0.0)

    def on_unit_step(self, reward: float) -> None:
        if reward > 0:
            self.points_won += 1
        elif reward < 0:
            self.points_lost += 1
        self._track_ball(decided=reward != 0)

    def _track_ball(self, decided: bool) -> None:
        ram = self.ram()
        depth = int(ram[BALL_DEPTH])
        agent_top = int(ram[AGENT_DEPTH]) > int(ram[OPPONENT_DEPTH])
        if self.last_depth is not None and depth != self.last_depth:
            direction = 1 if depth > self.last_depth else -1
            toward_agent = 1 if agent_top else -1
            # "toward the agent" turning into "away from the agent" is a return, unless
            # the point was decided on this frame (the ball is then put back for a serve)
            # or before it
            if (
                self.tracking
                and not decided
                and self.points_won == self.won_at_start
                and self.points_lost == self.lost_at_start
                and self.last_dir == toward_agent
                and direction == -toward_agent
            ):
                self.returns += 1
                self.counter.add(1)
            self.last_dir = direction
        self.last_depth = depth

    def lives(self) -> int | None:
        return 1 - min(self.points_lost, 1)

    def start(self) -> None:
        self.counter = EventCounter(target=self.task.target("returns"))
        self.won_at_start = self.points_won
        self.lost_at_start = self.points_lost
        self.returns = 0

    def on_tick(self, tick: Tick) -> None:
        self.total = float(self.returns)

    def won(self) -> bool:
        return self.tracking and self.points_won > self.won_at_start

    def score(self) -> float:
        return 100.0 if self.won() else self.counter.score()

    def passed(self) -> bool:
        return self.won() or self.returns >= int(self.task.params["pass_returns"])

    def ending(self, native_terminated: bool) -> str | None:
        # the first point the opponent wins ends the episode as well
        return super().ending(native_terminated or self.points_lost > 0)

    def progress(self) -> dict[str, Any]:
        return {
            "returns": self.returns,
            "point_won": self.won(),
            "point_lost": self.points_lost > 0,
        }
