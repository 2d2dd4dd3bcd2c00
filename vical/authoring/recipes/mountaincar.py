"""MountainCar demo clips: the scripted pumping controller from two seeds, and Accelerate Right held (too weak to climb)."""

from __future__ import annotations

from vical.authoring.recipes._scripted import ControlRecipe

RECIPE = ControlRecipe(
    win="pump",
    held="Accelerate Right",
    fail="push-right",
    fail_note="scripted: Accelerate Right held, the engine alone cannot climb the slope",
    fail_horizon=16,
    packages=((3, 7), (5,), (3,), (5, 7), (7, 3)),
)
