"""Bossfight (Procgen): shoot the boss; the score is the native reward against a per-seed target.

Scored by :class:`~vical.envs.procgen.RewardTargetAdapter`; the search heuristic
reads the boss's health and the enemy bullets from the serialised state.
"""

from __future__ import annotations

import numpy as np

from vical.envs.procgen import RewardTargetAdapter

# Entity type ids inside the serialised state (procgen's bossfight.cpp).
BOSSFIGHT_BOSS = 2
BOSSFIGHT_ENEMY_BULLET = 4


class Adapter(RewardTargetAdapter):
    def heuristic(self) -> float:
        st = self.state()
        boss = st.of_type(BOSSFIGHT_BOSS)
        a = st.agent
        health = float(boss[0].health) if boss else 0.0
        bullets = st.of_type(BOSSFIGHT_ENEMY_BULLET)
        clear = min((np.hypot(b.x - a.x, b.y - a.y) for b in bullets), default=10.0)
        below = -abs(boss[0].x - a.x) if boss else 0.0
        return -10.0 * health + 0.5 * min(clear, 2.0) + below


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("procgen", 4)
