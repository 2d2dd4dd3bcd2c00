"""Chopper Command: the default capped ratio of points, plus its human-init generator.

Table 7 (ALE/ChopperCommand-v5): "Full semantic action set and life-loss termination".
Pass: the points threshold with the helicopter still flying when the episode ends;
Table 28 reports no early success among Chopper Command's 65% early deaths, so a
crash fails the task whatever was scored before it.
"""

from __future__ import annotations

from vical.envs.ale import ALEAdapter
from vical.spec import EnvSpec

WALK_LENGTHS = {"sortie-a": 4, "sortie-b": 8, "sortie-c": 12, "sortie-d": 16}
WALK_ACTIONS = [
    "Up",
    "Down",
    "Left",
    "Right",
    "Shoot",
    "Up+Right",
    "Down+Left",
    "Left+Shoot",
    "Right+Shoot",
    "NOOP",
]
PROBES = ["NOOP", "Up", "Down", "Left+Shoot", "Right+Shoot", "Shoot"]


class Adapter(ALEAdapter):
    """Chopper Command uses the generic ALE scoring: points against a calibrated target;
    a pass needs the helicopter kept to the end."""

    pass_needs_life = True


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded flights ending where the next moves matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
