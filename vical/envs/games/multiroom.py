"""MultiRoom: six rooms joined by closed doors on a square grid of side 15, 20 or 25.

``CustomMultiRoom-v0`` is minigrid's multi-room maze with a fixed room count;
importing this module registers it with Gymnasium. minigrid's generator draws
each room side from ``[4, max_room_size]``. With minigrid's default maximum (10)
the shortest routes on the Table 8 seeds take 36-54 decisions even with the
whole map known, and under partial observation the agent must also search every
room for its exit door. The tasks cap the room side by grid size (15: 5, 20: 6,
25: 7, stored in each task's ``env_kwargs``), which keeps the shortest routes at
29-40 decisions and leaves about 30 of the 70 for searching; the tests check
every route against the budget.

The task is reaching the green goal square: scored and passed by the shared
:class:`~vical.envs.minigrid.NavigationAdapter`.
"""

from __future__ import annotations

from typing import Any

from minigrid.envs.multiroom import MultiRoomEnv

from vical.envs.minigrid import SIM_MAX_STEPS, NavigationAdapter, register
from vical.envs.minigrid import read_frame as read_frame  # the world-model track's frame reader

SIM_ID = "CustomMultiRoom-v0"


class CustomMultiRoomEnv(MultiRoomEnv):
    """minigrid's multi-room maze with a fixed room count on a square grid of side ``grid_size``."""

    def __init__(
        self,
        grid_size: int = 25,
        num_rooms: int = 6,
        max_room_size: int = 10,
        max_steps: int = SIM_MAX_STEPS,
        **kwargs: Any,
    ):
        self.grid_size = grid_size
        super().__init__(
            minNumRooms=num_rooms,
            maxNumRooms=num_rooms,
            maxRoomSize=max_room_size,
            width=grid_size,
            height=grid_size,
            max_steps=max_steps,
            **kwargs,
        )


register(SIM_ID, CustomMultiRoomEnv)

Adapter = NavigationAdapter

# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("minigrid", 2)
