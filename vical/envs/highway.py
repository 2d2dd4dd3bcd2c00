"""highway-env: ``highway-v0`` driving with discrete meta-actions.

The ego car drives on a straight multi-lane highway among IDM-controlled
traffic. The agent picks one of five meta-actions (Lane Left, Idle, Lane
Right, Faster, Slower); highway-env's own low-level controllers turn them into
steering and throttle. Each decision is one primitive step with the action
followed by one primitive step of Idle (frame skip 2, action steps 1).

Score (normalized high-speed score): at every primitive step the ego's
forward speed is mapped linearly from highway-env's ``reward_speed_range``
onto [0, 1] (the same term as the simulator's ``high_speed_reward``, clipped);
these shares add up while the car is intact. The score is the capped ratio of
that sum to ``speed_share`` times the number of primitive steps in the task's
horizon, so it only grows, reaches 100 for driving near top speed through the
whole horizon, and stops growing at a crash.

Ending and pass: highway-env's own episode end is kept. Its ``duration``
config (simulated seconds; highway-env's default is 40) truncates the drive
once that much time has passed; with ``policy_frequency`` 2 and two primitive
steps per decision, one decision is one simulated second, so the drive ends
after ``duration`` decisions. The task sets it from the pass rule's
``episode_seconds`` (39: Table 28's longest highway episode is 39 decisions,
and every highway budget of Table 7, 52-120, is longer, so a surviving run ends
there, before its budget, as an early success). Pass: the car is intact when
the drive ends, at highway-env's natural end or at the decision budget if that
comes first; the episode then ends with ``Victory``. A crash ends it at once
with ``Terminated``. The score's horizon is the shorter of the two ends.

Determinism: every random draw of highway-env (ego lane, traffic placement,
driver behaviour) comes from the env's ``np_random``, seeded by ``reset``;
rendering is off-screen pygame with fixed size and scaling.

Fast paths: three shortcuts make a decision cheaper while the simulation stays
bit for bit what highway-env computes (same frames, scores and endings). The
adapter installs them on its own simulator after every ``reset`` (so no other
highway-env user in the process is touched): the road is re-classed in place to
:class:`FastRoad` (a subclass that adds no state, so the vehicles keep their
reference to it), and the observation object is wrapped in
:class:`UnusedObservation`.

- The kinematics observation that ``step`` computes (a pandas table of the
  nearest cars) is never shown to the agent, who sees the drawn frames. It
  draws no random number (only its ``shuffled`` order would) and changes no
  simulator state (it only keeps its own normalisation ranges), so it is
  skipped; ``step`` then returns None as its observation (``reset`` still
  computes one, before the fast paths go on). Any other observation type, or
  the ``shuffled`` order, is left alone.
- While the vehicles choose their actions (``Road.act``) no position moves, so
  the lane coordinates of every vehicle on a lane are computed once per lane
  and act phase, with highway-env's own lane functions, and every neighbour
  query of that phase (about one per car and lane looked at) reads them in the
  same order and with the same comparisons as ``Road.neighbour_vehicles``.
  Outside an act phase, and with connected-lane neighbour search, the upstream
  method runs.
- The collision check after each simulation frame compares every pair of cars,
  and nearly all pairs are far apart. One vectorised distance table marks the
  pairs that are certainly beyond highway-env's own early-exit distance (with a
  safety margin far above rounding error); those pairs are skipped, since
  highway-env would leave them untouched, and every other pair goes through
  ``handle_collisions`` in the original order.

:func:`set_fast_paths` switches them off (and on again) for the whole process,
at any moment: the installed classes check the switch on every call and fall
back to highway-env's own code. ``tests/test_highway.py`` plays every highway
task both ways and compares every frame.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import gymnasium as gym
import highway_env  # noqa: F401  (registers highway-v0)
from highway_env.envs.common.graphics import EnvViewer
from highway_env.envs.common.observation import KinematicObservation, ObservationType
from highway_env.envs.highway_env import HighwayEnv
from highway_env.road.road import Road
from highway_env.vehicle.objects import Landmark, RoadObject

from vical.envs import fpmath, portable
from vical.envs.core import Frame, Tick
from vical.envs.gymbase import GymAdapter
from vical.envs.scoring import capped_ratio
from vical.spec import TaskSpec

# highway-env's modules that move, steer, collide, reward and draw the cars: their
# float math goes through vical.envs.fpmath, the same bits on every CPU.
PORTABLE_MODULES = [
    "highway_env.utils",
    "highway_env.vehicle.kinematics",
    "highway_env.vehicle.controller",
    "highway_env.vehicle.behavior",
    "highway_env.vehicle.objects",
    "highway_env.vehicle.graphics",
    "highway_env.road.lane",
    "highway_env.road.road",
    "highway_env.road.graphics",
    "highway_env.envs.highway_env",
    "highway_env.envs.common.abstract",
    "highway_env.envs.common.action",
    "highway_env.envs.common.graphics",
]
portable.install(PORTABLE_MODULES)

# Settings the adapter always imposes, whatever the task file says: the agent
# sees pixels, never the kinematics observation; frames are drawn off-screen.
# highway-env's native time limit (``duration``) is set per task from the pass
# rule's ``episode_seconds`` (see :func:`highway_config`).
FIXED_CONFIG: dict[str, Any] = {
    "offscreen_rendering": True,
    "real_time_rendering": False,
    "manual_control": False,
    "show_trajectories": False,
}


_FAST_PATHS = True


def set_fast_paths(enabled: bool) -> bool:
    """Turn the fast paths (module docstring) on or off for the whole process, from the
    next simulator call on; returns the previous setting."""
    global _FAST_PATHS
    previous, _FAST_PATHS = _FAST_PATHS, bool(enabled)
    return previous


def fast_paths_enabled() -> bool:
    """Whether the fast paths are on (the default)."""
    return _FAST_PATHS


# Skip a pair in the collision check only when its distance exceeds highway-env's
# early-exit distance by this much (relative to the sizes compared, plus an absolute
# part): far above the rounding difference between the vectorised and the per-pair
# distance, far below anything that could matter to a skipped pair.
_FAR_RELATIVE = 1e-6
_FAR_ABSOLUTE = 1e-6


class FastRoad(Road):  # type: ignore[misc, unused-ignore]  # highway-env is untyped
    """highway-env's road with the neighbour and collision shortcuts (module docstring).

    It adds no instance state outside an act phase: the adapter re-classes the
    road highway-env built, in place.
    """

    # lane id -> [(vehicle, longitudinal coordinate)] of the vehicles on that lane,
    # in road order; filled lazily during an act phase, None outside one
    _act_lanes: dict[int, list[tuple[RoadObject, float]]] | None = None

    def act(self) -> None:
        if not _FAST_PATHS:
            super().act()
            return
        self._act_lanes = {}
        try:
            super().act()
        finally:
            del self._act_lanes  # back to the class default: no act phase

    def _on_lane(self, lane: Any) -> list[tuple[RoadObject, float]]:
        """The road's vehicles and objects on ``lane`` (1 m margin, landmarks left out),
        with their longitudinal coordinates, as ``Road.neighbour_vehicles`` finds them."""
        found = []
        for v in self.vehicles + self.objects:
            if isinstance(v, Landmark):
                continue
            s_v, lat_v = lane.local_coordinates(v.position)
            if lane.on_lane(v.position, s_v, lat_v, margin=1):
                # upstream adds the lane offset, 0 here: the same value (at most -0.0
                # becomes 0.0, which compares the same)
                found.append((v, s_v))
        return found

    def neighbour_vehicles(self, vehicle: Any, lane_index: Any = None) -> tuple[Any, Any]:
        lanes = self._act_lanes
        if lanes is None or self.neighbour_vehicles_connected_lanes:
            return super().neighbour_vehicles(vehicle, lane_index)  # type: ignore[no-any-return, unused-ignore]
        lane_index = lane_index or vehicle.lane_index
        if not lane_index:
            return None, None
        lane = self.network.get_lane(lane_index)
        s = lane.local_coordinates(vehicle.position)[0]
        on_lane = lanes.get(id(lane))  # the network keeps its lanes alive: ids stay unique
        if on_lane is None:
            on_lane = lanes[id(lane)] = self._on_lane(lane)
        s_front = s_rear = None
        v_front = v_rear = None
        for v, s_v in on_lane:
            if v is vehicle:
                continue
            if s <= s_v and (s_front is None or s_v <= s_front):
                s_front = s_v
                v_front = v
            if s_v < s and (s_rear is None or s_v > s_rear):
                s_rear = s_v
                v_rear = v
        return v_front, v_rear

    def step(self, dt: float) -> None:
        vehicles = self.vehicles
        plain = all(
            type(v).handle_collisions is RoadObject.handle_collisions
            and type(v)._is_colliding is RoadObject._is_colliding
            for v in vehicles
        )
        if not _FAST_PATHS or not plain or len(vehicles) < 2:
            super().step(dt)
            return
        for vehicle in vehicles:
            vehicle.step(dt)
        near = self.near_pairs(dt)
        for i, vehicle in enumerate(vehicles):
            for j in near[i]:
                vehicle.handle_collisions(vehicles[j], dt)
            for other in self.objects:
                vehicle.handle_collisions(other, dt)

    def near_pairs(self, dt: float) -> list[list[int]]:
        """For each vehicle ``i``: the later vehicles ``j > i``, in order, that are not
        certainly beyond the early-exit distance of ``RoadObject._is_colliding``
        (half the summed diagonals plus ``i``'s speed times ``dt``). A skipped pair
        would return there without touching either vehicle; handling collisions moves
        nothing, so distances taken before the loop hold throughout it."""
        vehicles = self.vehicles
        pos = np.array([v.position for v in vehicles], dtype=np.float64)
        diag = np.array([v.diagonal for v in vehicles], dtype=np.float64)
        speed = np.array([v.speed for v in vehicles], dtype=np.float64)
        delta = pos[None, :, :] - pos[:, None, :]
        dist = np.sqrt(np.einsum("ijk,ijk->ij", delta, delta))
        reach = (diag[:, None] + diag[None, :]) / 2 + speed[:, None] * dt
        margin = _FAR_RELATIVE * (np.abs(reach) + dist) + _FAR_ABSOLUTE
        # NaN compares False: such a pair stays in, to the original check
        keep = np.triu(~(dist > reach + margin), k=1)
        near: list[list[int]] = [[] for _ in vehicles]
        rows, cols = np.nonzero(keep)  # row-major: i ascending, then j ascending
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            near[i].append(j)
        return near


class UnusedObservation(ObservationType):  # type: ignore[misc, unused-ignore]  # highway-env is untyped
    """Stands in for a kinematics observation the agent never sees (module docstring):
    ``observe`` returns None while the fast paths are on, else the wrapped one's."""

    def __init__(self, real: KinematicObservation):
        super().__init__(real.env)
        self.real = real

    def space(self) -> Any:
        return self.real.space()

    def observe(self) -> Any:
        return None if _FAST_PATHS else self.real.observe()


def install_fast_paths(env: HighwayEnv) -> None:
    """Put the fast paths on a freshly reset highway-env simulator (module docstring).

    Only a plain :class:`Road` is re-classed and only a kinematics observation in
    its sorted order (no random draw) is wrapped; anything else is left as built.
    """
    if type(env.road) is Road:
        env.road.__class__ = FastRoad
    obs = env.observation_type
    if type(obs) is KinematicObservation and obs.order != "shuffled":
        env.observation_type = UnusedObservation(obs)


def episode_seconds(task: TaskSpec) -> float:
    """highway-env's ``duration`` for the task: the pass rule's ``episode_seconds``."""
    return float(task.params["episode_seconds"])


def highway_config(task: TaskSpec) -> dict[str, Any]:
    """The highway-env config of a task: its ``env_kwargs`` (all config keys), the fixed
    ones, and the native episode end (``duration``) from the pass rule."""
    return {**task.env_kwargs, **FIXED_CONFIG, "duration": episode_seconds(task)}


class HighwayAdapter(GymAdapter):
    """highway-v0 with a normalized high-speed score and crash termination."""

    env: HighwayEnv

    def make_env(self) -> HighwayEnv:
        return cast(
            HighwayEnv,
            gym.make(
                self.task.env.sim_id, render_mode="rgb_array", config=highway_config(self.task)
            ).unwrapped,
        )

    def reset(self, seed: int) -> None:
        super().reset(seed)
        install_fast_paths(self.env)
        self.viewer: EnvViewer | None = None

    def frame(self) -> Frame:
        """Draw the road off-screen with the adapter's own viewer.

        highway-env's viewer disables drawing whenever ``SDL_VIDEODRIVER`` is
        ``dummy`` (it then returns black frames), and ``env.render()`` turns on
        re-drawing of every intermediate simulation frame. Holding a private,
        explicitly enabled off-screen viewer avoids both.
        """
        if self._frame is None:
            if self.viewer is None:
                self.viewer = EnvViewer(self.env)
                self.viewer.enabled = True
            self.viewer.display()
            self._frame = np.ascontiguousarray(self.viewer.get_image(), dtype=np.uint8)
        return self._frame

    @property
    def ego(self) -> Any:
        """The ego vehicle (highway-env's ``ControlledVehicle``)."""
        return self.env.vehicle

    def doctor_state(self) -> dict[str, list[float]]:
        """Every car's x, y, heading and speed (ego first), for ``vical doctor``."""
        out: dict[str, list[float]] = {}
        for i, v in enumerate(self.env.road.vehicles):
            name = "ego" if v is self.ego else f"car{i}"
            out[name] = [
                float(v.position[0]),
                float(v.position[1]),
                float(v.heading),
                float(v.speed),
            ]
        return out

    def speed_share(self) -> float:
        """Forward speed mapped from ``reward_speed_range`` onto [0, 1]."""
        lo, hi = self.env.config["reward_speed_range"]
        forward = float(self.ego.speed * fpmath.cos(self.ego.heading))
        return float(np.clip((forward - lo) / (hi - lo), 0.0, 1.0))

    def start(self) -> None:
        self.ticks = 0
        self.crashed = False
        self.credit = 0.0
        self.natural_end = False
        self.start_time = float(self.env.time)
        self.start_x = float(self.ego.position[0])

    def on_tick(self, tick: Tick) -> None:
        if self.crashed:
            return
        self.ticks += 1
        if tick.terminated or self.ego.crashed:
            self.crashed = True
            return
        self.credit += self.speed_share()
        if self.env._is_truncated():  # highway-env's own time limit (``duration``)
            self.natural_end = True

    @property
    def horizon_ticks(self) -> int:
        """Primitive steps to the earlier of the decision budget and highway-env's natural end
        (counted from the start state)."""
        budget = self.task.max_steps * self.task.env.frame_skip
        cfg = self.env.config
        natural: int = round(
            (episode_seconds(self.task) - self.start_time) * cfg["policy_frequency"]
        )
        return max(1, min(budget, natural))

    def score(self) -> float:
        share = self.task.target("speed_share")
        return capped_ratio(self.credit, share * self.horizon_ticks)

    def passed(self) -> bool:
        return not self.crashed and (self.natural_end or self.ticks >= self.horizon_ticks)

    def ending(self, native_terminated: bool) -> str | None:
        if self.crashed:
            return "Terminated"
        if self.passed():
            return "Victory"
        if native_terminated:
            return "Terminated"
        return None

    def progress(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "crashed": self.crashed,
            "speed_credit": round(self.credit, 6),
            "speed": round(float(self.ego.speed), 6),
            "lane": int(self.ego.lane_index[2]),
            "distance": round(float(self.ego.position[0]) - self.start_x, 3),
        }


def make_adapter(task: TaskSpec) -> HighwayAdapter:
    return HighwayAdapter(task)
