"""Berzerk: points against a calibrated target; passing also needs survival."""

from __future__ import annotations

from vical.envs.ale import ALEAdapter
from vical.envs.ale_games._group_a import generate_dense_starts
from vical.envs.core import Tick
from vical.spec import EnvSpec

WALK_LENGTHS = {
    "mode1-walk": 3,
    "mode3-walk": 5,
    "mode6-walk": 7,
    "mode9-walk": 9,
    "mode17-walk": 11,
}
WALK_ACTIONS = [
    "Up",
    "Down",
    "Left",
    "Right",
    "Up+Right",
    "Down+Left",
    "Right+Shoot",
    "Left+Shoot",
    "Up+Shoot",
    "NOOP",
]
PROBES = ["NOOP", "Right+Shoot", "Left+Shoot", "Up+Shoot", "Down+Shoot", "Right"]


class Adapter(ALEAdapter):
    """Points against a calibrated target; the pass also needs the life kept.

    Robots destroy themselves on walls, so even doing nothing earns points
    before the player is shot; requiring survival separates real play.
    """

    def start(self) -> None:
        self.start_lives = self.ale.lives()
        self.died = False

    def on_tick(self, tick: Tick) -> None:
        super().on_tick(tick)
        if tick.terminated or self.ale.lives() < self.start_lives:
            self.died = True

    def passed(self) -> bool:
        return not self.died and self.total >= self.task.target("pass_reward")

    def progress(self) -> dict:
        return {"reward": self.total, "died": self.died}


def generate_init_actions(env_spec: EnvSpec) -> dict[str, list[str]]:
    """Human-init sequences: life-safe seeded walks ending where the next moves matter.

    Robots in Berzerk destroy themselves on walls and on each other's bolts
    whatever the player does, so points under do-nothing play are part of the
    game here and the quiet-NOOP filter is off.
    """
    return generate_dense_starts(
        env_spec,
        WALK_ACTIONS,
        WALK_LENGTHS,
        PROBES,
        probe_horizon=3,
        candidates=12,
        quiet_noop=False,
    )
