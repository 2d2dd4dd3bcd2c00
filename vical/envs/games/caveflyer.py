"""Caveflyer (Procgen): fly the cave to the goal; reward normalised by the completion bonus.

Scored by :class:`~vical.envs.procgen.CompletionAdapter` (targets shot give
partial reward; only completing the level passes). The search heuristic is the
grid distance to the goal through the cave.
"""

from __future__ import annotations

import numpy as np

from vical.envs.procgen import CompletionAdapter, grid_distances

# Entity and grid ids inside the serialised state (procgen's caveflyer.cpp).
CAVEFLYER_GOAL = 1
CAVEFLYER_WALL = 8


class Adapter(CompletionAdapter):
    def start(self) -> None:
        st = self.state()
        goal = st.of_type(CAVEFLYER_GOAL)[0]
        self._dist = grid_distances(st.grid != CAVEFLYER_WALL, (int(goal.x), int(goal.y)))

    def heuristic(self) -> float:
        a = self.state().agent
        d = self._dist[int(a.y), int(a.x)] if 0 <= int(a.y) < self._dist.shape[0] else np.inf
        return -float(min(d, 999.0))
