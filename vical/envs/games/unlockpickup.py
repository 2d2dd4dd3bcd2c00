"""UnlockPickup: minigrid's two-room UnlockPickup with the room side (7, 9 or 11) as a parameter.

``CustomUnlockPickup-v0`` replaces minigrid's fixed room side 6; importing this
module registers it with Gymnasium. The frame adds a strip under the map showing
the object the agent is carrying, since the map itself draws only the agent.
The task is picking up the box behind the locked door: :class:`Adapter` scores
the key, door and box milestones.
"""

from __future__ import annotations

from typing import Any

from minigrid.core.constants import COLOR_NAMES
from minigrid.core.mission import MissionSpace
from minigrid.core.roomgrid import RoomGrid
from minigrid.core.world_object import Key
from minigrid.envs.unlockpickup import UnlockPickupEnv

from vical.envs.compat import minigrid as compat
from vical.envs.core import Tick
from vical.envs.minigrid import SIM_MAX_STEPS, MiniGridAdapter, register
from vical.envs.minigrid import read_frame as read_frame  # the world-model track's frame reader
from vical.envs.minigrid_model import DOOR_OPEN, Goal_, State, picked_target
from vical.envs.scoring import Milestones

SIM_ID = "CustomUnlockPickup-v0"


class CustomUnlockPickupEnv(UnlockPickupEnv):
    """minigrid's UnlockPickup (key, locked door, box in the second room) with a chosen room side."""

    def __init__(self, room_size: int = 6, max_steps: int = SIM_MAX_STEPS, **kwargs: Any):
        # UnlockPickupEnv hard-codes room_size = 6; build its RoomGrid directly.
        mission_space = MissionSpace(
            mission_func=compat.unlockpickup_mission(), ordered_placeholders=[COLOR_NAMES]
        )
        RoomGrid.__init__(
            self,
            mission_space=mission_space,
            num_rows=1,
            num_cols=2,
            room_size=room_size,
            max_steps=max_steps,
            **kwargs,
        )


register(SIM_ID, CustomUnlockPickupEnv)


MILESTONES = ("key", "door", "object", "efficient")


class Adapter(MiniGridAdapter):
    """UnlockPickup: key, door and object milestones with partial credit and efficiency.

    Milestones (weights ``weight_<name>`` under ``scoring.targets``), in order: ``key`` (the
    key is picked up), ``door`` (the locked door is opened), ``object`` (the
    box is picked up), ``efficient`` (optimal decisions / decisions used once
    the box is held). Partial credit toward the next milestone is the share of
    its shortest-route length (from the state where the previous milestone was
    reached, or the start) closed at the best state so far. Toggling the box
    opens it and it vanishes: the task can no longer be completed and the
    episode ends (Terminated) with the milestones already earned.

    Pass: the box is picked up.
    """

    carry_strip = True

    def start(self) -> None:
        m = self.model
        self.key = next(i for i, o in enumerate(m.objects) if isinstance(o, Key))
        self.door = next(i for i, d in enumerate(m.doors) if d.is_locked)
        self.ms = Milestones({m: self.task.target(f"weight_{m}") for m in MILESTONES})
        s0 = self.state()
        opt = self.distance("object", picked_target, s0)
        if opt is None:
            raise RuntimeError(f"{self.task.id}: the box cannot be picked up from the start")
        self.optimal = opt
        self.moves = 0
        self.picked = self.destroyed = False
        self._stage_from(s0)

    def _carries_key(self, state: State, _event: str | None) -> bool:
        return state[3] == self.key

    def _door_open(self, state: State, _event: str | None) -> bool:
        return state[5][self.door] == DOOR_OPEN

    def _subgoal(self) -> tuple[str, Goal_] | None:
        for name, test in (
            ("key", self._carries_key),
            ("door", self._door_open),
            ("object", picked_target),
        ):
            if name not in self.ms.reached:
                return name, test
        return None

    def _stage_from(self, state: State) -> None:
        sub = self._subgoal()
        if sub is None:
            return
        d = self.distance(sub[0], sub[1], state)
        self.stage_d0 = self.stage_best = d if d is not None else 0

    def on_tick(self, tick: Tick) -> None:
        self.moves += 1
        s = self.state()
        if not self.model.target_exists(s):
            self.destroyed = True
            return
        if tick.terminated:
            self.picked = True
        advanced = False
        if "key" not in self.ms.reached and self._carries_key(s, None):
            self.ms.hit("key")
            advanced = True
        if "key" in self.ms.reached and "door" not in self.ms.reached and self._door_open(s, None):
            self.ms.hit("door")
            advanced = True
        if self.picked:
            self.ms.hit_all(["key", "door", "object"])
            self.ms.partial = min(1.0, self.optimal / max(self.moves, 1))
            return
        if advanced:
            self._stage_from(s)
        name, test = self._subgoal()  # type: ignore[misc]
        d = self.distance(name, test, s)
        if d is not None:
            self.stage_best = min(self.stage_best, d)
        self.ms.partial = (
            (self.stage_d0 - self.stage_best) / self.stage_d0 if self.stage_d0 > 0 else 0.0
        )

    def score(self) -> float:
        return self.ms.score()

    def passed(self) -> bool:
        return self.picked

    def ending(self, native_terminated: bool) -> str | None:
        if self.tracking and self.destroyed:
            return "Terminated"
        if native_terminated:
            return "Victory" if self.picked else "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "milestones": [k for k in self.ms.weights if k in self.ms.reached],
            "partial": round(self.ms.partial, 4),
            "optimal_steps": self.optimal,
            "moves": self.moves,
            "box_destroyed": self.destroyed,
        }


# the world-model scenario this game joins (vical.wm.cases), and its place in that
# scenario's build order
WORLD_MODEL_SCENARIO = ("minigrid", 3)
