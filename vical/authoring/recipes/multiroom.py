"""MultiRoom demo clips: the MiniGrid planner recipe (:class:`vical.authoring.recipes._minigrid.MiniGridRecipe`)."""

from __future__ import annotations

from vical.authoring.recipes._minigrid import Failure, MiniGridRecipe


def _after_second_door(route: list[str]) -> int:
    """The midway clip joins at the second door (a third into the route without one)."""
    toggles = [i for i, a in enumerate(route) if a == "Toggle"]
    return toggles[1] if len(toggles) > 1 else len(route) // 3


def _door_reclosed(route: list[str]) -> Failure:
    """Walk to the first door, open it, close it again and walk into it."""
    j = route.index("Toggle")
    s0 = max(0, j - 6)
    return Failure(
        route[:s0],
        [*route[s0 : j + 1], "Toggle", "Forward", "Forward"],
        "scripted failure: planner route to the first door, Toggle opens it, a "
        "second Toggle closes it again and Forward is blocked",
        "door-reclosed",
    )


RECIPE = MiniGridRecipe(route_lengths=(12, 44), join=_after_second_door, failure=_door_reclosed)
