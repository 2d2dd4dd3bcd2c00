"""Chopper Command demo clips: enemy aircraft shot down, points against the target.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
from a shifted start and two warmed-up starts. The failure clip holds Right,
flying straight into the oncoming enemy formation until a collision costs
the life.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded flights, screened: a flight
from whose end a constant action or an action cycle of the reflex screen passes the
task is skipped (:func:`vical.authoring.search.screen_viable`).
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.authoring.search import Viable, dense_starts, screen_viable
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

RECIPE = beam_recipe(
    WALK_ACTIONS,
    # (extra skipped frames, warm-up decisions, clip decisions); the screen stands still
    # from frame 32 until the first decision, so every start needs a warm-up
    wins=((7, 3, 34), (7, 10, 30), (20, 20, 26)),
    fail_action="Right",
    fail_start=(9, 0),
    fail_len=14,
    fail_note=(
        "scripted failure: Right held, flying into the enemy formation without dodging or "
        "firing, until a collision costs the life"
    ),
)


def generate_init_actions(env_spec: EnvSpec, viable: Viable | None = None) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded flights ending where the next moves matter,
    from which no screen-blind constant action or cycle passes the task (``viable``:
    the check, default :func:`~vical.authoring.search.screen_viable`)."""
    check = viable or screen_viable(env_spec)
    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES, viable=check)
