"""Heist (Procgen): keys open the locks of their colour on the way to the gem.

The shaped score reads the keys held and the locks left from the serialised
state (:func:`~vical.envs.procgen.parse_state`; heist's own fields, after the
common ones, hold the key count, the world size and which keys are held).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from vical.envs.procgen import Entity, ProcgenAdapter, Reader, grid_distances
from vical.envs.scoring import capped_ratio

# Entity and grid ids inside the serialised state (procgen's heist.cpp).
HEIST_LOCKED_DOOR = 1
HEIST_KEY = 2
HEIST_GEM = 9
HEIST_WALL = 51


class Adapter(ProcgenAdapter):
    """Keys and doors are milestones: +1 per key picked up, +1 per door opened, +10 for the gem.

    Procgen's heist rewards only the gem (10). The shaped total is normalised
    by a per-seed target; a total of at least 2 (a key and its door, or the
    gem) passes; taking the gem completes the level (Victory).
    """

    def _keys_doors(self) -> tuple[int, int, list[bool]]:
        st = self.state()
        r = Reader(st.extra)
        num_keys = r.i()
        r.i()  # world dim
        has = [r.i() > 0 for _ in range(r.i())]
        doors = len(st.of_type(HEIST_LOCKED_DOOR))
        return num_keys, doors, has

    def start(self) -> None:
        self.num_keys, self.doors0, _ = self._keys_doors()
        self.keys = 0
        self.opened = 0

    def on_tick(self, reward: float, ended: bool) -> None:
        if ended:
            return
        _, doors, has = self._keys_doors()
        self.keys = max(self.keys, sum(has))
        self.opened = max(self.opened, self.doors0 - doors)

    def shaped(self) -> float:
        return self.keys + self.opened + (10.0 if self.completed else 0.0)

    def score(self) -> float:
        return capped_ratio(self.shaped(), self.task.target("shaped_target"))

    def passed(self) -> bool:
        return self.shaped() >= float(self.task.params.get("pass_reward", 2.0))

    def progress(self) -> dict[str, Any]:
        return {**super().progress(), "keys": self.keys, "doors_opened": self.opened}

    def heuristic(self) -> float:
        st = self.state()
        a = st.agent
        r = Reader(st.extra)
        r.i()
        r.i()
        has = [r.i() > 0 for _ in range(r.i())]
        passable = st.grid != HEIST_WALL
        blocked = [d for d in st.of_type(HEIST_LOCKED_DOOR) if not has[d.theme]]
        for d in blocked:
            passable[int(d.y), int(d.x)] = False
        goals = [k for k in st.of_type(HEIST_KEY)]
        goals += [d for d in st.of_type(HEIST_LOCKED_DOOR) if has[d.theme]]
        if not goals:
            goals = st.of_type(HEIST_GEM)
        ax, ay = int(a.x), int(a.y)
        best = np.inf
        for g in goals:
            dist = grid_distances(passable | _cell_mask(passable.shape, g), (int(g.x), int(g.y)))
            best = min(best, dist[ay, ax] - (abs(g.x - a.x) + abs(g.y - a.y)) * 0.01)
        return 10.0 * self.shaped() - float(min(best, 999.0))


def _cell_mask(shape: tuple[int, int], e: Entity) -> npt.NDArray[np.bool_]:
    m = np.zeros(shape, dtype=bool)
    m[int(e.y), int(e.x)] = True
    return m
