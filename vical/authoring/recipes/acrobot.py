"""Acrobot demo clips: the scripted swing-up controller from two seeds, and Torque 0 held (the arm stays down)."""

from __future__ import annotations

from vical.authoring.recipes._scripted import ControlRecipe

RECIPE = ControlRecipe(
    win="swingup",
    held="Torque 0",
    fail="idle",
    fail_note="scripted: Torque 0 held, the arm does not rise by itself",
    fail_horizon=12,
    packages=((3,), (5, 7), (3, 7), (5,), (3,)),
)
