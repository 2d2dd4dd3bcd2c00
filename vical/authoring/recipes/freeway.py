"""Freeway demo clips: the game module's three-deep look-ahead until the chicken crosses; the failure holds Up until a car knocks the chicken back."""

from __future__ import annotations

from vical.authoring.recipes._ale import AleRecipe, hold, scripted
from vical.authoring.sim import DecisionSim
from vical.envs.games.freeway import expert_actions, safe_step


def _win(sim: DecisionSim, n: int, seed: int) -> list[str]:
    return expert_actions(sim, limit=n)


RECIPE = AleRecipe(
    win=_win,
    warm=scripted(lambda sim: safe_step(sim, depth=2)),
    wins=((7, 0, 60), (7, 14, 50), (19, 4, 56)),
    fail_policy=hold("Up"),
    fail_event=lambda sim, o, before: int(sim.ram()[14]) < int(before[14]) - 8,
    fail_start=(31, 0),
    fail_len=14,
    fail_after=3,
    win_note=(
        "search expert: exhaustive three-deep look-ahead over Up / NOOP / Down with the emulator's "
        "cloneState/restoreState until the chicken crosses (vical.envs.games.freeway.expert_actions)"
    ),
    fail_note="scripted failure: Up held without looking until a car knocks the chicken back to the curb",
)
