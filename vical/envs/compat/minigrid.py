"""minigrid's private names (locked at 3.2.0).

minigrid builds a layout in ``_gen_grid(width, height)``, called by ``reset``;
the custom LavaCrossing overrides it (to set the start heading) and calls the
crossing generator through :func:`generate_grid`. ``UnlockPickupEnv._gen_mission``
is the mission text function the custom UnlockPickup hands to its
``MissionSpace``. If ``_gen_grid`` moves, the LavaCrossing start heading is lost
(every LavaCrossing fingerprint changes); if ``_gen_mission`` moves, the custom
UnlockPickup cannot be built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from minigrid.envs.unlockpickup import UnlockPickupEnv
from minigrid.minigrid_env import MiniGridEnv

from vical.envs.compat import Private

DISTRIBUTION = "minigrid"
LOCKED_VERSION = "3.2.0"
RELIED_ON = (
    Private(
        "minigrid.minigrid_env:MiniGridEnv",
        "_gen_grid",
        "class",
        "the custom LavaCrossing's start heading (its override is never called)",
    ),
    Private(
        "minigrid.envs.crossing:CrossingEnv",
        "_gen_grid",
        "class",
        "the custom LavaCrossing's layout",
    ),
    Private(
        "minigrid.envs.unlockpickup:UnlockPickupEnv",
        "_gen_mission",
        "class",
        "building the custom UnlockPickup",
    ),
)


def generate_grid(cls: type[MiniGridEnv], env: MiniGridEnv, width: int, height: int) -> None:
    """Run ``cls``'s layout generator (``_gen_grid``) on ``env``, a subclass of ``cls``
    that overrides it, as ``super()._gen_grid(width, height)`` would."""
    gen_grid = cast(Callable[[MiniGridEnv, int, int], None], cls._gen_grid)
    gen_grid(env, width, height)


def unlockpickup_mission() -> Callable[..., str]:
    """``UnlockPickupEnv``'s mission text function (``_gen_mission``)."""
    return cast(Callable[..., str], UnlockPickupEnv._gen_mission)
