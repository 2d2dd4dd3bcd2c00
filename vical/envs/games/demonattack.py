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

from vical.envs.ale import ALEAdapter


class Adapter(ALEAdapter):
    """The default reward scoring, with a pass that needs the life kept to the end."""

    pass_needs_life = True


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("atari-shooters", 2)
