"""MountainCar demo clips: the scripted pumping controller from two seeds, and Accelerate Right held (too weak to climb)."""

from __future__ import annotations

from vical.authoring.plan import ClipPlan
from vical.authoring.recipes._scripted import CTL, controller, held_sequence
from vical.spec import EnvSpec


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
    """The clip plans and, per task in file order, the clip ids it gets."""
    return (
        [
            ClipPlan(
                "mountaincar-s3-pump", controller("mountaincar"), CTL.format("mountaincar"), 3
            ),
            ClipPlan(
                "mountaincar-s5-pump", controller("mountaincar"), CTL.format("mountaincar"), 5
            ),
            ClipPlan(
                "mountaincar-s7-push-right",
                held_sequence(["Accelerate Right"]),
                "scripted: Accelerate Right held, the engine alone cannot climb the slope",
                seed=7,
                horizon=16,
            ),
        ],
        [
            ["mountaincar-s3-pump", "mountaincar-s7-push-right"],
            ["mountaincar-s5-pump"],
            ["mountaincar-s3-pump"],
            ["mountaincar-s5-pump", "mountaincar-s7-push-right"],
            ["mountaincar-s7-push-right", "mountaincar-s3-pump"],
        ],
    )
