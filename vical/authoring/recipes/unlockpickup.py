"""UnlockPickup demo clips: the MiniGrid planner recipe (:class:`vical.authoring.recipes._minigrid.MiniGridRecipe`)."""

from __future__ import annotations

from vical.authoring.recipes._minigrid import Failure, MiniGridRecipe


def _after_pickup(route: list[str]) -> int:
    """The midway clip joins once the key is picked up."""
    return route.index("Pickup") + 1


def _box_toggled(route: list[str]) -> Failure:
    """Start facing the locked door with the key (the adapter needs the door still locked
    at the start); unlock, walk to the box, Toggle it: that opens the box, destroys it and
    ends the episode."""
    d = route.index("Toggle")
    return Failure(
        route[:d],
        [*route[d:-1], "Toggle"],
        "scripted failure: from the locked door with the key, the planner route to "
        "the box, then Toggle instead of Pickup opens the box and destroys it",
        "box-toggled",
    )


# layouts with longer routes, so that one or two clips make a package
RECIPE = MiniGridRecipe(route_lengths=(20, 34), join=_after_pickup, failure=_box_toggled)
