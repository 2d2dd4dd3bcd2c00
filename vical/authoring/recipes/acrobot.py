"""Acrobot demo clips: the scripted swing-up controller from two seeds, and Torque 0 held (the arm stays down)."""

from __future__ import annotations

from vical.authoring.plan import ClipPlan
from vical.authoring.recipes._scripted import CTL, controller, held_sequence
from vical.spec import EnvSpec


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
    """The clip plans and, per task in file order, the clip ids it gets."""
    return (
        [
            ClipPlan("acrobot-s3-swingup", controller("acrobot"), CTL.format("acrobot"), 3),
            ClipPlan("acrobot-s5-swingup", controller("acrobot"), CTL.format("acrobot"), 5),
            ClipPlan(
                "acrobot-s7-idle",
                held_sequence(["Torque 0"]),
                "scripted: Torque 0 held, the arm does not rise by itself",
                seed=7,
                horizon=12,
            ),
        ],
        [
            ["acrobot-s3-swingup"],
            ["acrobot-s5-swingup", "acrobot-s7-idle"],
            ["acrobot-s3-swingup", "acrobot-s7-idle"],
            ["acrobot-s5-swingup"],
            ["acrobot-s3-swingup"],
        ],
    )
