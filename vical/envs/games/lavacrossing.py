"""LavaCrossing: minigrid's crossing layout at 11 x 11 with five lava rivers.

``CustomLavaCrossing-v0`` is minigrid's ``LavaCrossingS11N5`` with the start
heading as a parameter; importing this module registers it with Gymnasium.
The task is reaching the green goal square: scored and passed by the shared
:class:`~vical.envs.minigrid.NavigationAdapter` (stepping into lava ends the
episode).
"""

from __future__ import annotations

from typing import Any

from minigrid.core.world_object import Lava
from minigrid.envs.crossing import CrossingEnv

from vical.envs.compat import minigrid as compat
from vical.envs.minigrid import SIM_MAX_STEPS, NavigationAdapter, register
from vical.envs.minigrid import read_frame as read_frame  # the world-model track's frame reader

SIM_ID = "CustomLavaCrossing-v0"


class CustomLavaCrossingEnv(CrossingEnv):
    """minigrid's lava crossing (11 x 11, five rivers by default) with a chosen start heading."""

    def __init__(
        self,
        size: int = 11,
        num_crossings: int = 5,
        start_dir: int = 0,
        max_steps: int = SIM_MAX_STEPS,
        **kwargs: Any,
    ):
        if start_dir not in range(4):
            raise ValueError(f"start_dir must be 0-3 (east, south, west, north), got {start_dir}")
        self.start_dir = start_dir
        super().__init__(
            size=size,
            num_crossings=num_crossings,
            obstacle_type=Lava,
            max_steps=max_steps,
            **kwargs,
        )

    def _gen_grid(self, width: int, height: int) -> None:
        compat.generate_grid(CrossingEnv, self, width, height)
        self.agent_dir = self.start_dir


register(SIM_ID, CustomLavaCrossingEnv)

Adapter = NavigationAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("minigrid", 1)
