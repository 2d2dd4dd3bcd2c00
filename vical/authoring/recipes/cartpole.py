"""CartPole demo clips: the scripted balancing controller from two seeds, and a push held until the pole falls."""

from __future__ import annotations

from vical.authoring.recipes._scripted import ControlRecipe

RECIPE = ControlRecipe(
    win="balance",
    held="Push Right",
    fail="fall",
    fail_note="scripted failure: Push Right held until the pole falls",
    packages=((3, 7), (5,), (5, 7), (3,), (7, 3)),
)
