"""highway-env: ``highway-v0`` driving with discrete meta-actions.

The ego car drives on a straight multi-lane highway among IDM-controlled
traffic. The agent picks one of five meta-actions (Lane Left, Idle, Lane
Right, Faster, Slower); highway-env's own low-level controllers turn them into
steering and throttle. Each decision is one primitive step with the action
followed by one primitive step of Idle (frame skip 2, action steps 1).

The adapter (its score, pass rule and ending, and why highway-env's
``duration`` comes from the pass rule's ``episode_seconds``) lives in the game
module, :mod:`vical.envs.games.highway` (found by
:func:`vical.envs.game_module`); this module holds the simulator's setup.

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
from typing import Any

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import highway_env  # noqa: F401  (registers highway-v0)
from highway_env.envs.common.observation import KinematicObservation, ObservationType
from highway_env.envs.highway_env import HighwayEnv
from highway_env.road.road import Road
from highway_env.vehicle.objects import Landmark, RoadObject

from vical.envs import portable
from vical.envs.compat import highway as compat
from vical.envs.core import Adapter, no_adapter
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
        plain = all(compat.stock_collisions(v) for v in vehicles)
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
        certainly beyond the early-exit distance of highway-env's per-pair collision test
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


def make_adapter(task: TaskSpec) -> Adapter:
    """Only reached for a highway-env environment without a game module ``Adapter``."""
    raise no_adapter(task, "highway-env")
