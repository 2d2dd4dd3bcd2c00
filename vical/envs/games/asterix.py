"""Asterix: collected points minus a calibrated death penalty; a pass needs the life kept.

Table 7 (ALE/Asterix-v5): "life-loss termination, and calibrated death penalty".
Touching a harp ends the episode; the score then loses the death penalty, and the
pass is lost with the life (Table 28 reports no early success for Asterix among its
55% early deaths, so a run that collects the threshold and then dies is a failure).
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter
from vical.envs.scoring import capped_ratio
from vical.spec import EnvSpec

# The one human-init task (lanes) replays the paper's Figure 5 sequence
# (init_source 'paper: ...'), which the generator leaves alone; the walk length
# is kept for a generated variant.
WALK_LENGTHS = {"lanes": 5}
WALK_ACTIONS = ["NOOP", "Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left"]
PROBES = ["NOOP", "Up", "Down", "Left", "Right"]


class Adapter(ALEAdapter):
    """Capped ratio of (points - death penalty if the life was lost) to ``reward``; pass
    at ``pass_reward`` points with the life kept (``died`` is tracked by the base class)."""

    pass_needs_life = True

    def net(self) -> float:
        return self.total - (self.task.target("death_penalty") if self.died else 0.0)

    def score(self) -> float:
        return capped_ratio(self.net(), self.task.target("reward"))

    def progress(self) -> dict[str, Any]:
        return {"reward": self.total, "died": self.died}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequence: a short life-safe seeded walk ending where lane choices matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
