"""highway-env's private names (locked at 1.12.1).

``AbstractEnv._is_truncated`` tells the highway adapter that highway-env's own
time limit (``duration``) has ended the drive: if it moves, highway tasks no
longer see their natural end and pass only at the decision budget.
``RoadObject._is_colliding`` is the per-pair collision test whose early-exit
distance the collision fast path of :class:`vical.envs.highway.FastRoad` mirrors:
if it moves, the fast path can no longer tell a stock vehicle from one with its
own collision rule and falls back to highway-env's per-pair loop on every step
(correct, but every highway step is slower); if its distance rule changes, the
frame comparison of ``tests/test_highway.py`` fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from highway_env.vehicle.objects import RoadObject

from vical.envs.compat import Private

if TYPE_CHECKING:
    from highway_env.envs.common.abstract import AbstractEnv

DISTRIBUTION = "highway-env"
LOCKED_VERSION = "1.12.1"
RELIED_ON = (
    Private(
        "highway_env.envs.common.abstract:AbstractEnv",
        "_is_truncated",
        "class",
        "the highway tasks' natural end (Victory when the drive's duration is over)",
    ),
    Private(
        "highway_env.envs.highway_env:HighwayEnv",
        "_is_truncated",
        "class",
        "the highway tasks' natural end (Victory when the drive's duration is over)",
    ),
    Private(
        "highway_env.vehicle.objects:RoadObject",
        "_is_colliding",
        "class",
        "the collision fast path of vical.envs.highway.FastRoad",
    ),
)


def is_truncated(env: AbstractEnv) -> bool:
    """Whether highway-env's own time limit (``duration``) is over (``_is_truncated``)."""
    return bool(env._is_truncated())


def stock_collisions(vehicle: Any) -> bool:
    """Whether ``vehicle`` collides by ``RoadObject``'s own rules: its class overrides
    neither ``handle_collisions`` nor ``_is_colliding`` (False when the latter is gone,
    which sends the fast path back to highway-env's loop)."""
    cls = type(vehicle)
    stock = getattr(RoadObject, "_is_colliding", None)
    return (
        stock is not None
        and cls.handle_collisions is RoadObject.handle_collisions
        and getattr(cls, "_is_colliding", None) is stock
    )
