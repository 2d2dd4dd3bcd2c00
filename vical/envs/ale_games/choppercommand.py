"""Chopper Command: the default capped ratio of points, plus its human-init generator."""

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
    """Chopper Command uses the generic ALE scoring: points against a calibrated target."""


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded flights ending where the next moves matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
