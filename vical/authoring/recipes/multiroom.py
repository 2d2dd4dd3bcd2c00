"""MultiRoom demo clips: the MiniGrid planner recipe (:func:`vical.authoring.recipes._minigrid.minigrid_recipe`)."""

from vical.authoring.recipes._minigrid import minigrid_recipe as recipe

__all__ = ["recipe"]
