"""Ninja (Procgen): jump from ledge to ledge to the mushroom; scored by horizontal progress.

Progress reads the agent's position from the serialised state
(:func:`~vical.envs.procgen.parse_state`); ninja's own fields (jump charge,
ground contact) are part of the search key.
"""

from __future__ import annotations

from typing import Any

from vical.envs.procgen import ProcgenAdapter, grid_distances

# Entity and grid ids inside the serialised state (procgen's ninja.cpp).
NINJA_GOAL = 1
NINJA_WALL = 20
NINJA_BOMB = 6
NINJA_FIRE = 14


class Adapter(ProcgenAdapter):
    """Normalised horizontal progress from the start to the goal mushroom.

    Progress = (rightmost agent x - start x) / (goal x - start x), capped at 1;
    score = 100 x progress; pass at 0.5; taking the mushroom completes the level.
    """

    def start(self) -> None:
        st = self.state()
        self.x0 = st.agent.x
        self.goal_x = st.of_type(NINJA_GOAL)[0].x
        self.best_x = self.x0
        grid = st.grid
        free = (grid != NINJA_WALL) & (grid != NINJA_BOMB) & (grid != NINJA_FIRE)
        goal = st.of_type(NINJA_GOAL)[0]
        self._dist = grid_distances(free, (int(goal.x), int(goal.y)))

    def on_tick(self, reward: float, ended: bool) -> None:
        if not ended:
            self.best_x = max(self.best_x, self.state().agent.x)

    def fraction(self) -> float:
        if self.completed:
            return 1.0
        span = self.goal_x - self.x0
        return min(max((self.best_x - self.x0) / span, 0.0), 1.0) if span > 0 else 0.0

    def score(self) -> float:
        return 100.0 * self.fraction()

    def passed(self) -> bool:
        return not self.died and self.fraction() >= float(
            self.task.params.get("pass_progress", 0.5)
        )

    def non_pass_ceiling(self) -> float:
        # a live ninja past the pass fraction passes, so a failing one is below it
        return 100.0 * float(self.task.params.get("pass_progress", 0.5))

    def progress(self) -> dict[str, Any]:
        return {**super().progress(), "progress": round(self.fraction(), 6)}

    def search_key(self) -> tuple[Any, ...]:
        # The ninja's own fields hold the jump charge and ground contact.
        return (*super().search_key(), self.state().extra)

    def heuristic(self) -> float:
        a = self.state().agent
        h, w = self._dist.shape
        x, y = min(max(int(a.x), 0), w - 1), min(max(int(a.y), 0), h - 1)
        return -float(min(self._dist[y, x], 999.0)) + 0.01 * float(a.x)


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("procgen", 3)
