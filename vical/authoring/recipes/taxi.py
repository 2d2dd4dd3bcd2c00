"""Taxi demo clips: BFS routes from two other layouts, and a Dropoff away from the destination."""

from __future__ import annotations

from vical.authoring.plan import ClipPlan
from vical.authoring.recipes._scripted import BFS, taxi_wrong_dropoff
from vical.demos.experts import bfs_expert
from vical.spec import EnvSpec


def recipe(spec: EnvSpec) -> tuple[list[ClipPlan], list[list[str]]]:
    """The clip plans and, per task in file order, the clip ids it gets."""
    return (
        [
            ClipPlan("taxi-s7-route", bfs_expert, BFS, seed=7),
            ClipPlan("taxi-s9-route", bfs_expert, BFS, seed=9),
            ClipPlan(
                "taxi-s12-wrong-dropoff",
                taxi_wrong_dropoff,
                "scripted: BFS route to the passenger, then Dropoff away from the destination (it does nothing)",
                seed=12,
            ),
        ],
        [
            ["taxi-s7-route", "taxi-s12-wrong-dropoff"],
            ["taxi-s9-route"],
            ["taxi-s7-route", "taxi-s9-route"],
            ["taxi-s9-route", "taxi-s12-wrong-dropoff"],
            ["taxi-s7-route", "taxi-s9-route", "taxi-s12-wrong-dropoff"],
        ],
    )
