"""Demon Attack demo clips: random-shooting chunks over the seeded shooter policy; the failure
holds NOOP until a demon's shot costs a life.

The human-init generator (:func:`generate_init_actions`) keeps prefixes of deathless
plays of the same policy, one prefix length per progress band, screened: a prefix
from whose end a constant action or an action cycle of the reflex screen passes the
task is replaced by that variant's prefix of the next seed's play
(:func:`vical.authoring.search.screen_viable`).
"""

from __future__ import annotations

from vical.authoring.recipes._ale import FIRE_AND_STEER, chunk_recipe, hold, screened_prefixes
from vical.authoring.search import Viable
from vical.envs.games.demonattack import Adapter
from vical.spec import EnvSpec

# Preload length in decisions of each human-init variant; the band is the
# leading digit of the variant name.
LENGTHS: dict[str, int] = {
    **{f"band1-{k}": n for k, n in zip("abcd", (4, 8, 12, 16), strict=True)},
    **{f"band2-{k}": n for k, n in zip("abcde", (30, 34, 38, 42, 46), strict=True)},
    **{f"band3-{k}": n for k, n in zip("abcde", (60, 64, 68, 72, 76), strict=True)},
    **{f"band4-{k}": n for k, n in zip("abcde", (90, 95, 100, 105, 110), strict=True)},
    **{f"band5-{k}": n for k, n in zip("abcde", (125, 132, 139, 146, 153), strict=True)},
}

policy = FIRE_AND_STEER  # seeded shooter: keeps firing while wandering left and right

RECIPE = chunk_recipe(
    policy,
    wins=((7, 0, 34), (7, 45, 30), (7, 100, 26)),
    fail_policy=hold("NOOP"),
    fail_start=(7, 20),
    fail_len=16,
    fail_note="scripted failure: NOOP held (no dodging, no shooting) until a demon's shot costs a life",
)


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Deterministic preloads: prefixes of two deathless plays (initial skips 20 and 50),
    screened (:func:`~vical.authoring.recipes._ale.screened_prefixes`)."""
    return screened_prefixes(env_spec, Adapter, LENGTHS, policy, seed=7, viable=viable)


INIT_STRATEGY = (
    "prefix of a deathless seeded shooting play (clone/restore rewinds whenever a life "
    "would be lost); the prefix length sets the progress band"
)
