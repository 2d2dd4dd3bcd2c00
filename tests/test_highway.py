"""highway-v0: a scripted gap-keeping driver survives and outscores a crashing one."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from vical.envs import make_env
from vical.spec import get_task

BASE = "highway/seed41-l4-d15"


def gap_driver(vical_env) -> str:
    """Keep a time gap to the car ahead; change lanes only into a clearly freer lane."""
    a = vical_env.adapter
    road, ego = a.env.road, a.ego
    start, end, lane = ego.lane_index
    lanes = len(road.network.graph[start][end])
    v = ego.speed

    def gaps(i):
        front, rear = road.neighbour_vehicles(ego, (start, end, i))
        gf = front.position[0] - ego.position[0] - ego.LENGTH if front else 1e9
        gr = ego.position[0] - rear.position[0] - ego.LENGTH if rear else 1e9
        return gf, gr, (front.speed if front else 40.0), (rear.speed if rear else 0.0)

    def headway(gap, front_speed):
        return min(gap / max(v, 1.0), gap / max(v - front_speed, 0.1))

    target = ego.target_lane_index[2]
    gf, _, vf, _ = gaps(target)
    if target != lane:  # mid lane change: watch both lanes
        g2, _, v2, _ = gaps(lane)
        return "Slower" if headway(min(gf, g2), min(vf, v2)) < 1.2 else "Idle"
    h = headway(gf, vf)
    if h < 1.0 and v > 20.5:
        return "Slower"
    best = None
    if h < 3.0:
        for d, name in ((1, "Lane Right"), (-1, "Lane Left")):
            if 0 <= lane + d < lanes:
                f2, r2, v2, vr2 = gaps(lane + d)
                h2 = headway(f2, v2)
                rear_ok = r2 > 8 and r2 > 3 * max(vr2 - v, 0)
                if h2 > h + 1.0 and f2 > 15 and rear_ok and (best is None or h2 > best[0]):
                    best = (h2, name)
    if best:
        return best[1]
    if h < 1.5:
        return "Slower"
    if h > 2.5 and gf > 25:
        return "Faster"
    return "Idle"


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


def test_safe_driver_survives_the_horizon(safe_run):
    score, passed, outcome, steps, scores, passes, progress = safe_run
    assert outcome == "Victory" and passed and not progress["crashed"]
    assert steps == get_task(BASE).max_steps
    assert not any(passes[:-1]), "the pass comes only with the full horizon"
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
