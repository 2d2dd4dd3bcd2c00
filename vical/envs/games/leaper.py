"""Leaper (Procgen): cross the roads and the river; reward only at the finish line.

Scored by :class:`~vical.envs.procgen.CompletionAdapter`; the search heuristic
is the agent's height (the finish line is at the top).
"""

from __future__ import annotations

from vical.envs.procgen import CompletionAdapter


class Adapter(CompletionAdapter):
    def heuristic(self) -> float:
        return float(self.state().agent.y)


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("procgen", 2)
