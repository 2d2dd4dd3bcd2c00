"""Enduro: cars passed (net) against a calibrated target, four progress bands.

Scoring is the family default (capped ratio of the native reward, +1 per car
passed and -1 per car that passes back, to ``reward``; pass at
``pass_reward``). There are no lives. The human-init variants fall in four
bands of race time: the opening (no initial skip, only a driving sequence), and
initial skips of 800-1050, 1850-2150 and 2350-2550 emulator steps (the light
and weather change along the race day), each followed by a driving sequence so
the car is already moving.
"""

from __future__ import annotations

from vical.envs.ale import FIRE_AND_STEER, ALEAdapter
from vical.spec import EnvSpec


class Adapter(ALEAdapter):
    """The default reward scoring; the module exists for the generator and expert."""


# human-init driving-sequence length (decisions) per variant
LENGTHS: dict[str, int] = {
    "open-a": 6,
    "open-b": 12,
    "open-c": 18,
    "open-d": 24,
    "open-e": 30,
    "open-f": 40,
    "open-g": 50,
    **{f"mid-{k}": 8 + 2 * i for i, k in enumerate("abcde")},
    **{f"late-{k}": 8 + 2 * i for i, k in enumerate("abcd")},
    **{f"final-{k}": 8 + 2 * i for i, k in enumerate("abc")},
}

policy = FIRE_AND_STEER  # seeded driver: mostly accelerates, steering left and right between cars


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic driving sequences, one seeded play per start (shared by the opening band)."""
    from vical.authoring.search import prefix_streams

    return prefix_streams(env_spec, Adapter, LENGTHS, policy, seed=3)


INIT_STRATEGY = (
    "seeded accelerating driver that steers left and right at random; the opening-band "
    "variants are prefixes of one play, the others start after their initial skip"
)
