"""Asterix: collected points minus a calibrated death penalty."""

from __future__ import annotations

from vical.envs.ale import ALEAdapter
from vical.envs.core import Tick
from vical.envs.scoring import capped_ratio
from vical.spec import EnvSpec

# The one human-init task (lanes) replays the paper's Figure 5 sequence
# (init_source 'paper: ...'), which the generator leaves alone; the walk length
# is kept for a generated variant.
WALK_LENGTHS = {"lanes": 5}
WALK_ACTIONS = ["NOOP", "Up", "Down", "Left", "Right", "Up+Left", "Up+Right", "Down+Left"]
PROBES = ["NOOP", "Up", "Down", "Left", "Right"]


class Adapter(ALEAdapter):
    """Capped ratio of (points - death penalty if the life was lost) to ``reward``."""

    def start(self) -> None:
        self.start_lives = self.ale.lives()
        self.died = False

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        if tick.terminated or self.ale.lives() < self.start_lives:
            self.died = True

    def net(self) -> float:
        return self.total - (self.task.target("death_penalty") if self.died else 0.0)

    def score(self) -> float:
        return capped_ratio(self.net(), self.task.target("reward"))

    def progress(self) -> dict:
        return {"reward": self.total, "died": self.died}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequence: a short life-safe seeded walk ending where lane choices matter."""
    from vical.authoring.search import dense_starts

    return dense_starts(env_spec, WALK_ACTIONS, WALK_LENGTHS, PROBES)
