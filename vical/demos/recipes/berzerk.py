"""Berzerk demo clips, per game variation (ALE mode): robots shot with the life kept.

The pass needs the points and survival to the step limit, so the expert is the
group's life-safe beam search (see :mod:`vical.demos.recipes.alien`), which only
keeps action lists that live through the whole clip; one clip from a shifted
start and one from a warmed-up start per mode. The warm-ups are beam-search
play as well: with every action held for four slots, seeded random walks run
into walls faster than rewinding can save them. Survival is part of the pass, so
the failure clip (Right held, walking into the electrified maze wall or a robot
without stopping) goes second into every package whose frame budget has room
for it: all but one (mode6-walk, whose mode shows it in the mode6 package).
"""

from __future__ import annotations

from vical.demos.make import AleRecipe
from vical.demos.recipes.alien import BEAM_NOTE, beam_warm, beam_win, hold, life_lost

RECIPE = AleRecipe(
    win=beam_win(width=8),
    warm=beam_warm(width=8),
    # (extra skipped frames, warm-up decisions, clip decisions). Most modes hold a single
    # task, which takes the first success clip: it is kept short so that the frame budget
    # of that package still has room for the failure clip.
    wins=((7, 0, 22), (7, 6, 28)),
    fail_policy=hold("Right"),
    fail_event=life_lost,
    fail_start=(5, 2),
    fail_len=10,
    fail_every=True,  # a lost life fails the task whatever the points
    win_note=BEAM_NOTE.format(width=8),
    fail_note=(
        "scripted failure: Right held without stopping until the player runs into the "
        "electrified wall (or a robot) and the life is lost"
    ),
)
