"""Bigfish (Procgen): eat smaller fish to grow; the native reward against the paper's target."""

from __future__ import annotations

from vical.envs.procgen import RewardTargetAdapter


class Adapter(RewardTargetAdapter):
    """Cumulative reward against the paper's two-point target; reaching it ends the
    episode in Victory, death fails the task (:class:`~vical.envs.procgen.RewardTargetAdapter`)."""


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("procgen", 1)
