"""CartPole demo clips: the scripted balancing controller from two seeds, and a push held until the pole falls."""

from __future__ import annotations

from vical.authoring.plan import ClipPlan
from vical.authoring.recipes._scripted import CTL, controller, held_sequence
from vical.spec import EnvSpec


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
    """The clip plans and, per task in file order, the clip ids it gets."""
    return (
        [
            ClipPlan("cartpole-s3-balance", controller("cartpole"), CTL.format("cartpole"), 3),
            ClipPlan("cartpole-s5-balance", controller("cartpole"), CTL.format("cartpole"), 5),
            ClipPlan(
                "cartpole-s7-fall",
                held_sequence(["Push Right"]),
                "scripted failure: Push Right held until the pole falls",
                seed=7,
            ),
        ],
        [
            ["cartpole-s3-balance", "cartpole-s7-fall"],
            ["cartpole-s5-balance"],
            ["cartpole-s5-balance", "cartpole-s7-fall"],
            ["cartpole-s3-balance"],
            ["cartpole-s7-fall", "cartpole-s3-balance"],
        ],
    )
