"""Asterix demo clips: items collected lane by lane; a lost life costs the death penalty.

The expert is the group's life-safe beam search (see :mod:`vical.authoring.recipes._ale`)
(width 12, as for the target calibration) from a shifted start and two
warmed-up starts (each command is a one-slot impulse, so the beam's look-ahead
does the lane planning). The warm-ups are beam-search play too: random walks
keep touching harps whose death registers too late to rewind. Dying is penalised in
the score, so every package also holds the failure clip: NOOP held until a
harp runs into Asterix.

The human-init generator (:func:`generate_init_actions`) is
:func:`vical.authoring.search.dense_starts` over seeded walks.
"""

from __future__ import annotations

from vical.authoring.recipes._ale import beam_recipe
from vical.authoring.search import dense_starts
from vical.spec import EnvSpec

# The one human-init task (lanes) replays the paper's Figure 5 sequence
# (init_source 'paper: ...'), which the generator leaves alone; the walk length
# is kept for a generated variant.
WALK_LENGTHS = {"lanes": 5}
WALK_ACTIONS = ["NOOP", "Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left"]
PROBES = ["NOOP", "Up", "Down", "Left", "Right"]

RECIPE = beam_recipe(
    None,  # warmed up by the beam itself
    # (extra skipped frames, warm-up decisions, clip decisions)
    wins=((7, 0, 30), (7, 10, 28), (30, 18, 20)),
    fail_action="NOOP",
    fail_start=(13, 0),
    fail_len=14,
    fail_note=(
        "scripted failure: NOOP held (Asterix stays in his lane) until a harp runs into him "
        "and the life is lost"
    ),
    width=12,
    fail_every=True,  # the death penalty makes the loss part of every package
)


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequence: a short life-safe seeded walk ending where lane choices matter."""
    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
