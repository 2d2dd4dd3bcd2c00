"""highway-v0: a scripted gap-keeping driver survives and outscores a crashing one."""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise

import numpy as np
import pytest
from conftest import sampled_task_ids
from highway_env.road.road import Road, RoadNetwork
from highway_env.vehicle.behavior import IDMVehicle
from highway_env.vehicle.objects import Landmark, Obstacle

from vical.authoring.recipes.highway import gap_driver  # the demo expert drives the tests too
from vical.envs import frame_sha256, make_env
from vical.envs import highway as hw
from vical.spec import get_task, select_tasks

BASE = "highway/seed41-l4-d15"


def play(task_id, policy):
    env = make_env(get_task(task_id))
    env.reset()
    scores, passes = [env.score()], [env.passed()]
    while not env.done:
        s = env.step(policy(env))
        scores.append(s.score)
        passes.append(s.passed)
    out = (env.score(), env.passed(), env.outcome, env.steps, scores, passes, env.progress())
    env.close()
    return out


@pytest.fixture(scope="module")
def safe_run():
    return play(BASE, gap_driver)


@pytest.fixture(scope="module")
def crash_run():
    return play(BASE, lambda env: "Faster")


def test_safe_driver_reaches_highway_envs_own_end_early(safe_run):
    """highway-env's native episode end (duration, 39 s = 39 decisions) is kept: a drive
    that survives to it ends as a Victory before the task's budget (Table 28's early
    successes)."""
    score, passed, outcome, steps, scores, passes, progress = safe_run
    assert outcome == "Victory" and passed and not progress["crashed"]
    task = get_task(BASE)
    assert steps == task.params["episode_seconds"] == 39 < task.max_steps
    assert not any(passes[:-1]), "the pass comes only at the end of the drive"
    assert 0.0 < score < 100.0
    assert all(b >= a for a, b in pairwise(scores)), "score must never decrease"


def test_crash_terminates_without_pass_and_scores_less(safe_run, crash_run):
    score, passed, outcome, steps, scores, _, progress = crash_run
    assert outcome == "Terminated" and not passed and progress["crashed"]
    assert steps < get_task(BASE).max_steps
    assert all(b >= a for a, b in pairwise(scores))
    assert 0.0 <= score < safe_run[0]


def test_frames_are_drawn_offscreen_not_black():
    env = make_env(get_task(BASE))
    frame = env.reset()
    assert frame.shape == (150, 600, 3)
    # road grey and a green ego car are on screen even under SDL's dummy driver
    assert (frame == (100, 100, 100)).all(axis=2).mean() > 0.3
    assert (frame == (50, 200, 0)).all(axis=2).any()
    env.close()


def test_lanes_and_density_reach_the_simulator():
    env = make_env(get_task("highway/seed58-l5-d19"))
    env.reset()
    cfg = env.adapter.env.config
    assert cfg["lanes_count"] == 5 and cfg["vehicles_density"] == 1.9
    assert cfg["policy_frequency"] == 2 and cfg["offscreen_rendering"] is True
    road = env.adapter.env.road
    assert len(road.network.graph["0"]["1"]) == 5
    env.close()


def test_idle_fill_holds_the_speed_choice():
    # Faster raises the target speed; the Idle slot that follows keeps it.
    env = make_env(get_task("highway/seed79-l4-d15"))
    env.reset()
    before = env.adapter.ego.target_speed
    env.step("Faster")
    assert env.adapter.ego.target_speed > before
    assert np.isclose(env.adapter.ego.target_speed, 30.0)
    env.close()


# -- fast paths (vical.envs.highway module docstring): bit-identical simulation -----------

HIGHWAY_TASKS = [t.id for t in select_tasks(None) if t.env.env == "highway"]
DECISIONS = 25


@contextmanager
def fast_paths(enabled: bool) -> Iterator[None]:
    previous = hw.set_fast_paths(enabled)
    try:
        yield
    finally:
        hw.set_fast_paths(previous)


def sim_state(env) -> str:
    """Digest of every vehicle's exact state (positions, speeds, headings, plans, crashes)
    and of the simulator's random generator: frames and rounded progress could hide a
    last-bit difference or a skipped random draw, this cannot."""
    h = hashlib.sha256(repr(env.adapter.env.np_random.bit_generator.state).encode())
    for v in env.adapter.env.road.vehicles:
        h.update(np.asarray(v.position, dtype=np.float64).tobytes())
        h.update(repr((float(v.speed), float(v.heading), v.crashed, v.target_lane_index)).encode())
        h.update(repr({k: float(x) for k, x in v.action.items()}).encode())
        h.update(repr(float(getattr(v, "target_speed", 0.0))).encode())
    return h.hexdigest()


def seeded_trace(task_id: str, fast: bool) -> list[tuple]:
    """A seeded decision sequence (from the task id) played from a freshly built simulator:
    the start, then one entry per decision, then the episode's end."""
    with fast_paths(fast):
        env = make_env(get_task(task_id), starts="replayed")
        try:
            frame = env.reset()
            trace: list[tuple] = [(frame_sha256(frame), env.score(), env.passed(), sim_state(env))]
            rng = random.Random(task_id)
            names = env.action_names
            while not env.done and env.steps < DECISIONS:
                s = env.step(rng.choice(names))
                outcome = (s.outcome, s.terminated, s.truncated)
                state = (env.progress(), sim_state(env))
                trace.append((s.action, s.frame_sha256, s.score, s.passed, outcome, state))
            trace.append((env.outcome, env.score(), env.passed(), env.progress()))
        finally:
            env.close()
    return trace


@pytest.mark.parametrize("task_id", sampled_task_ids(HIGHWAY_TASKS))
def test_fast_paths_play_exactly_like_highway_env(task_id):
    fast = seeded_trace(task_id, fast=True)
    upstream = seeded_trace(task_id, fast=False)
    assert len(fast) > 2
    for i, (a, b) in enumerate(zip(fast, upstream, strict=False)):
        assert a == b, f"{task_id}: fast paths diverge at decision {i} (0: the start)"
    assert len(fast) == len(upstream)


def test_all_highway_tasks_are_compared():
    assert len(HIGHWAY_TASKS) == 20


def test_fast_paths_are_installed_and_switchable():
    with fast_paths(True):
        env = make_env(get_task(BASE), starts="replayed")
        env.reset()
        sim = env.adapter.env
        assert type(sim.road) is hw.FastRoad
        assert isinstance(sim.observation_type, hw.UnusedObservation)
        env.step("Idle")
        assert env.adapter.obs is None, "the unused observation is not computed"
        hw.set_fast_paths(False)
        env.step("Idle")
        obs = env.adapter.obs
        assert isinstance(obs, np.ndarray) and obs.shape == (5, 5) and obs[0, 0] == 1.0
        env.close()


def _road(lanes: int = 3) -> Road:
    return Road(
        network=RoadNetwork.straight_road_network(lanes, speed_limit=30),
        np_random=np.random.RandomState(0),
    )


class Probe(IDMVehicle):
    """An IDM car that, when it acts, also asks the road for its neighbours on every lane."""

    def act(self, action=None):
        net = self.road.network
        self.seen = [
            self.road.neighbour_vehicles(self, lane) for lane in net.all_side_lanes(self.lane_index)
        ]
        super().act(action)


def _copy(road: Road, fast: bool) -> Road:
    """A deep copy of ``road``, re-classed as the adapter does when ``fast``."""
    road = copy.deepcopy(road)
    if fast:
        road.__class__ = hw.FastRoad
    return road


def _acted(road: Road, fast: bool) -> list:
    """Copy ``road`` (as a fast road or not), let its vehicles act, and return what each saw
    and decided, vehicles named by their index on the road."""
    road = _copy(road, fast)
    with fast_paths(fast):
        road.act()
    everyone = road.vehicles + road.objects

    def name(v):
        return None if v is None else next(i for i, w in enumerate(everyone) if w is v)

    return [
        (
            [(name(f), name(r)) for f, r in v.seen],
            {k: float(x) for k, x in v.action.items()},
            v.target_lane_index,
            v.timer,
        )
        for v in road.vehicles
    ]


def test_neighbour_search_keeps_ties_margins_and_landmarks():
    """Ties in lane position (the front one is the last in road order, the rear one the
    first), cars straddling two lanes (1 m margin), a car level with the asker (counts as
    ahead), landmarks (ignored) and obstacles (counted) are all found as upstream finds them."""
    road = _road()
    spots = [  # (x, y, speed): lanes are 4 m wide, centred on y = 0, 4, 8
        (50.0, 0.0, 25.0),
        (70.0, 0.0, 22.0),
        (70.0, 0.0, 28.0),  # tie with the previous car
        (70.0, 0.0, 24.0),  # and a third one
        (30.0, 0.0, 20.0),
        (30.0, 0.0, 26.0),  # tie behind
        (50.0, 4.0, 25.0),  # level with the first car, next lane
        (75.0, 2.9, 23.0),  # straddles lanes 0 and 1 (within the margin of both)
        (40.0, 6.0, 27.0),  # on the line between lanes 1 and 2
        (90.0, 8.0, 21.0),
        (50.0, 8.0, 29.0),
        (20.0, 4.0, 30.0),
    ]
    for x, y, v in spots:
        road.vehicles.append(Probe(road, [x, y], speed=v, timer=1.5))
    road.objects.append(Landmark(road, [55.0, 0.0]))
    road.objects.append(Obstacle(road, [80.0, 4.0]))
    fast, upstream = _acted(road, True), _acted(road, False)
    assert fast == upstream
    # the case is not vacuous: ties, the straddling car and the obstacle are found
    seen = [pair for car in upstream for pair in car[0]]
    first = upstream[0][0]  # the first car's (ahead, behind) on lanes 0, 1, 2
    assert first[0] == (3, 4), "ahead: the last of three tied cars; behind: the first of two"
    assert first[1] == (6, 8), "the car level with it counts as ahead; one on the lane line behind"
    assert upstream[6][0][1][0] == 7, "the car straddling two lanes is found on the next lane too"
    assert any(13 in pair for pair in seen)  # the obstacle
    assert all(12 not in pair for pair in seen)  # never the landmark
    assert any(car[2][2] != road.vehicles[i].lane_index[2] for i, car in enumerate(upstream))


def test_neighbour_search_matches_in_dense_random_traffic():
    rng = np.random.default_rng(7)
    road = _road(4)
    for _ in range(60):
        x, y = rng.uniform(0, 300), rng.choice([0.0, 4.0, 8.0, 12.0]) + rng.normal(0, 1.2)
        road.vehicles.append(
            Probe(
                road,
                [x, y],
                heading=rng.normal(0, 0.05),
                speed=rng.uniform(15, 32),
                timer=rng.uniform(0, 2),
            )
        )
    assert _acted(road, True) == _acted(road, False)


def _stepped(road: Road, fast: bool, dt: float) -> list:
    road = _copy(road, fast)
    with fast_paths(fast):
        road.step(dt)
    return [
        (
            v.position.tobytes(),
            v.crashed,
            None if v.impact is None else np.asarray(v.impact).tobytes(),
        )
        for v in road.vehicles
    ]


def test_collision_check_keeps_every_pair_it_cannot_rule_out():
    """Crowded cars: crashes and impacts match upstream, and the pre-filter keeps every pair
    that highway-env's own distance pre-check would examine, including pairs exactly at
    its early-exit distance."""
    rng = np.random.default_rng(3)
    dt = 1 / 6
    road = _road(3)
    for _ in range(40):
        pos = [rng.uniform(0, 120), rng.uniform(-1, 9)]
        road.vehicles.append(
            IDMVehicle(road, pos, heading=rng.normal(0, 0.3), speed=rng.uniform(0, 35))
        )
    # a pair exactly at the early-exit distance of the first car (diagonal + speed * dt)
    a = IDMVehicle(road, [200.0, 0.0], speed=12.0)
    b = IDMVehicle(road, [200.0 + a.diagonal + a.speed * dt, 0.0], speed=12.0)
    road.vehicles += [a, b]
    fast, upstream = _stepped(road, True, dt), _stepped(road, False, dt)
    assert fast == upstream
    assert any(crashed for _, crashed, _ in upstream), "the crowd must collide somewhere"

    fast_road = _copy(road, True)
    near = fast_road.near_pairs(dt)
    n = len(fast_road.vehicles)
    for i, v in enumerate(fast_road.vehicles):
        for j in range(i + 1, n):
            w = fast_road.vehicles[j]
            gap = np.linalg.norm(w.position - v.position)
            reach = (v.diagonal + w.diagonal) / 2 + v.speed * dt
            if not gap > reach:
                assert j in near[i], (i, j)
            elif gap > reach + 1e-3:
                assert j not in near[i], (i, j)
        assert near[i] == sorted(near[i])
    assert n - 1 in near[n - 2], "the pair at the exact early-exit distance is kept"
