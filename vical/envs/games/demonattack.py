"""DemonAttack: reward against the 90-point target, five preloaded progress bands.

Scoring is the family default (capped ratio of points since the start state to
the ``reward`` target; pass at ``pass_reward``) with life-loss termination from
the core (Table 7: "life-loss termination"). The pass needs the life kept to the
end: Table 28 reports no early success among DemonAttack's 23% early deaths. The human-init variants differ in how far the game has been played
before the agent takes over: band 1 starts within the first wave, band 5 after
about 150 decisions of deathless play, when later waves with faster, splitting
demons are on screen.
"""

from __future__ import annotations

from vical.envs.ale import FIRE_AND_STEER, ALEAdapter
from vical.spec import EnvSpec


class Adapter(ALEAdapter):
    """The default reward scoring, with a pass that needs the life kept to the end."""

    pass_needs_life = True


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


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Deterministic preloads: prefixes of two deathless plays (initial skips 20 and 50)."""
    from vical.authoring.search import prefix_streams

    return prefix_streams(env_spec, Adapter, LENGTHS, policy, seed=7)


INIT_STRATEGY = (
    "prefix of a deathless seeded shooting play (clone/restore rewinds whenever a life "
    "would be lost); the prefix length sets the progress band"
)
