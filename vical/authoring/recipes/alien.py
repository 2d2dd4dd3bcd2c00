"""Alien demo clips.

The expert is the life-safe beam search the
game modules' developers used to calibrate the score targets
(:func:`vical.authoring.search.beam_search`, ranking by the points the task
counts), run on the decision simulator the ALE recipe hands it; warm-ups are seeded
deathless random walks over the game's own human-init walk actions.

Alien: counted points (eggs, with the one-shot 500-point bonuses removed)
pass at 75 and end the episode at 150. The clips are beam-search corridor
runs (joystick only, no flame) from a shifted start and two warmed-up starts;
the failure clip stops steering (NOOP) until an alien walks into the crew
member.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded walks of the joystick directions.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import BEAM_NOTE, beam_recipe
from vical.authoring.search import dense_starts
from vical.envs.ale import JOYSTICK
from vical.spec import EnvSpec

# Human-init walk length (decisions) per variant; longer walks reach later,
# more crowded corridor states.
WALK_LENGTHS = {"walk-a": 8, "walk-b": 14, "walk-c": 20, "walk-d": 26}
WALK_ACTIONS = list(JOYSTICK)
PROBES = ["NOOP", "Up", "Down", "Left", "Right"]

# The beam plays the joystick only: the crew member keeps walking along a corridor
# by itself, so turns at junctions and NOOP collect the eggs, and the clips do not
# teach spending the limited flame (Shoot) for nothing.
MOVES = ["NOOP", *JOYSTICK]

RECIPE = beam_recipe(
    WALK_ACTIONS,
    # (extra skipped frames, warm-up decisions, clip decisions)
    wins=((7, 0, 34), (7, 12, 30), (20, 30, 28)),
    fail_action="NOOP",
    fail_start=(9, 6),
    fail_len=16,
    fail_note=(
        "scripted failure: NOOP held (no steering, no flame) until an alien catches the crew "
        "member and the life is lost"
    ),
    actions=MOVES,
    win_note=BEAM_NOTE.format(width=8).replace(
        "over all actions", "over NOOP and the eight joystick directions"
    ),
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded walks ending where the next moves matter."""
    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
