"""Dodgeball (Procgen): hit the enemies, then leave by the door; reward against a per-seed target."""

from __future__ import annotations

from vical.envs.procgen import RewardTargetAdapter

# Entity type ids inside the serialised state (procgen's dodgeball.cpp).
DODGEBALL_DOOR = 5
DODGEBALL_ENEMY = 4


class Adapter(RewardTargetAdapter):
    """Per-seed reward target for the score and the pass; completion ends the episode.

    Table 7: reward of at least 10 marks completion. Only that (the pass rule's
    ``completion_reward``, or Procgen's own level completion) ends the episode
    early as a Victory; reaching the smaller per-seed target passes the task
    (if the player is still in play when the episode ends) without ending it.
    """

    def reached_target(self) -> bool:
        return not self.died and self.reward >= self.task.params["completion_reward"] - 1e-6

    def heuristic(self) -> float:
        st = self.state()
        enemies = st.of_type(DODGEBALL_ENEMY)
        a = st.agent
        if enemies:
            d = min(min(abs(e.x - a.x), abs(e.y - a.y)) for e in enemies)
            return -0.01 * d
        door = st.of_type(DODGEBALL_DOOR)
        if door:
            door0 = door[0]
            return -0.1 * (abs(door0.x - a.x) + abs(door0.y - a.y))
        return 0.0
