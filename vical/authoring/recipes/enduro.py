"""Enduro demo clips: random-shooting chunks over the seeded driver policy; the failure holds
NOOP (no gas) until cars overtake the player.

The human-init generator (:func:`generate_init_actions`) keeps prefixes of seeded
plays of the same driver, one play per start.
Screened: a prefix from whose end a constant action or an action cycle of the
reflex screen passes the task is replaced by that variant's prefix of the next
seed's play (:func:`vical.authoring.search.screen_viable`).
"""

from __future__ import annotations

from vical.authoring.recipes._ale import FIRE_AND_STEER, chunk_recipe, hold, screened_prefixes
from vical.authoring.search import Viable
from vical.envs.games.enduro import Adapter
from vical.spec import EnvSpec

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

RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (1400, 6, 28), (7, 36, 24)),
    fail_policy=hold("NOOP"),
    fail_event=lambda sim, o, before: o.reward < 0,
    fail_start=(7, 30),
    fail_len=14,
    fail_after=3,
    fail_note="scripted failure: NOOP held (no gas) until cars overtake the player and take passed cars back",
)


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Deterministic driving sequences, one seeded play per start (shared by the opening
    band), screened (:func:`~vical.authoring.recipes._ale.screened_prefixes`)."""
    return screened_prefixes(env_spec, Adapter, LENGTHS, policy, seed=3, viable=viable)


INIT_STRATEGY = (
    "seeded accelerating driver that steers left and right at random; the opening-band "
    "variants are prefixes of one play, the others start after their initial skip"
)
