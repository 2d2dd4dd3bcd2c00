"""CliffWalking demo clips: BFS routes from two positions off the start, and a step into the cliff."""

from __future__ import annotations

from vical.authoring.plan import ClipPlan
from vical.authoring.recipes._scripted import BFS, held_sequence
from vical.demos.experts import bfs_expert
from vical.spec import EnvSpec


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
    """The clip plans and, per task in file order, the clip ids it gets."""
    return (
        [
            ClipPlan("cliff-row1-route", bfs_expert, BFS, seed=43, init_actions=["Up", "Up"]),
            ClipPlan(
                "cliff-top-route",
                bfs_expert,
                BFS,
                seed=43,
                init_actions=["Up", "Up", "Up", "Right"],
            ),
            ClipPlan(
                "cliff-fall",
                held_sequence(["Right", "Right", "Down"]),
                "scripted failure: walk the ledge and step down into the cliff",
                seed=43,
                init_actions=["Up", "Right"],
            ),
        ],
        [
            ["cliff-row1-route", "cliff-fall"],
            ["cliff-top-route", "cliff-fall"],
            ["cliff-row1-route"],
            ["cliff-top-route", "cliff-row1-route"],
            ["cliff-row1-route", "cliff-top-route", "cliff-fall"],
        ],
    )
