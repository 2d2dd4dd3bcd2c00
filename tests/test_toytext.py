"""Toy Text: the Taxi-v3 domain behind Taxi-v4, optimal routes, cliff falls."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from conftest import task_params

from vical.envs import make_env
from vical.envs.games.cliffwalking import CLIFF_GOAL, cliff_distances
from vical.envs.games.taxi import TAXI_BUILDING_OFFSET, taxi_building_pixels, taxi_cell_origin

# --- an independent description of the Taxi-v3 domain (Dietterich's taxi) ---
V3_MAP = [
    "+---------+",
    "|R: | : :G|",
    "| : | : : |",
    "| : : : : |",
    "| | : | : |",
    "|Y| : |B: |",
    "+---------+",
]
V3_LOCS = [(0, 0), (0, 4), (4, 0), (4, 3)]


def v3_encode(r, c, p, d):
    return ((r * 5 + c) * 5 + p) * 4 + d


def v3_transition(r, c, p, d, a):
    """(next state, reward, done) of the v3 domain for one action."""
    reward, done = -1, False
    nr, nc, np_ = r, c, p
    if a == 0:
        nr = min(r + 1, 4)
    elif a == 1:
        nr = max(r - 1, 0)
    elif a == 2 and V3_MAP[1 + r][2 * c + 2] == ":":
        nc = min(c + 1, 4)
    elif a == 3 and V3_MAP[1 + r][2 * c] == ":":
        nc = max(c - 1, 0)
    elif a == 4:
        if p < 4 and (r, c) == V3_LOCS[p]:
            np_ = 4
        else:
            reward = -10
    elif a == 5:
        if (r, c) == V3_LOCS[d] and p == 4:
            np_, done, reward = d, True, 20
        elif (r, c) in V3_LOCS and p == 4:
            np_ = V3_LOCS.index((r, c))
        else:
            reward = -10
    return v3_encode(nr, nc, np_, d), reward, done


def test_taxi_v4_as_configured_is_the_v3_domain():
    task = next(p.values[0] for p in task_params(["taxi"]))
    env = make_env(task)
    raw = env.adapter.env
    assert task.env.paper_id == "Taxi-v3" and task.env.sim_id == "Taxi-v4"
    checked = 0
    for r in range(5):
        for c in range(5):
            for p in range(5):
                for d in range(4):
                    s = v3_encode(r, c, p, d)
                    for a in range(6):
                        outcomes = raw.P[s][a]
                        assert len(outcomes) == 1, "transitions must be deterministic"
                        prob, s2, rew, done = outcomes[0]
                        assert prob == 1.0
                        assert (s2, rew, done) == v3_transition(r, c, p, d, a), (r, c, p, d, a)
                        checked += 1
    assert checked == 500 * 6
    # the initial distribution: passenger at a stand, destination another stand
    support = {i for i, w in enumerate(raw.initial_state_distrib) if w > 0}
    expected = {
        v3_encode(r, c, p, d)
        for r in range(5)
        for c in range(5)
        for p in range(4)
        for d in range(4)
        if p != d
    }
    assert support == expected
    assert np.allclose(raw.initial_state_distrib[list(expected)], 1 / len(expected))
    env.close()


def taxi_plan(env) -> list[str]:
    """Shortest action sequence to a successful drop-off, by BFS over the v3 domain."""
    raw = env.adapter.env
    start = int(raw.s)
    names = env.action_names
    prev = {start: None}
    q = deque([start])
    while q:
        s = q.popleft()
        r, c, p, d = raw.decode(s)
        for a in range(6):
            s2, _rew, done = v3_transition(r, c, p, d, a)
            if done:
                path = [names[a]]
                while prev[s] is not None:
                    s, a0 = prev[s]
                    path.append(names[a0])
                return path[::-1]
            if s2 not in prev:
                prev[s2] = (s, a)
                q.append(s2)
    raise AssertionError("no plan")


@pytest.mark.parametrize("task", task_params(["taxi"]))
def test_taxi_optimal_route_scores_100_and_passes(task):
    env = make_env(task)
    env.reset()
    plan = taxi_plan(env)
    for i, a in enumerate(plan):
        s = env.step(a)
        if i < len(plan) - 1:
            assert not s.done and s.score < 100
    assert s.outcome == "Victory" and s.passed and s.score == 100.0
    assert len(plan) <= task.max_steps


@pytest.mark.parametrize("task", task_params(["taxi"]))
def test_taxi_milestones_order_scores(task):
    """Do-nothing < reaching the passenger < pickup < partial delivery < detour finish < optimal."""
    env = make_env(task)
    env.reset()
    plan = taxi_plan(env)
    pick = plan.index("Pickup")
    scores = []
    for k in (0, pick, pick + 1, len(plan) - 1):
        env = make_env(task)
        env.reset()
        for a in plan[:k]:
            env.step(a)
        scores.append(env.score())
    assert scores == sorted(scores) and len(set(scores)) == len(scores), scores
    # a finished delivery with wasted moves scores below the optimal one but passes
    env = make_env(task)
    env.reset()
    for a in ["Pickup", "Pickup"]:  # illegal pickups waste two moves (unless at passenger)
        env.step(a)
    for a in plan:
        s = env.step(a)
        if s.done:
            break
    assert s.passed and 80.0 <= s.score < 100.0


def _building_match(frame, raw, cell) -> float:
    """Share of the drop-off building's opaque pixels found in ``cell`` of ``frame``."""
    rgb, opaque = taxi_building_pixels()
    x0, y0 = taxi_cell_origin(raw, cell)
    x, y = x0 + TAXI_BUILDING_OFFSET[0], y0 + TAXI_BUILDING_OFFSET[1]
    patch = frame[y : y + rgb.shape[0], x : x + rgb.shape[1]]
    same = (patch == rgb).all(axis=-1)
    return float(same[opaque].mean())


@pytest.mark.parametrize("task", task_params(["taxi"]))
def test_taxi_destination_carries_the_building(task):
    """The drop-off building stands on the destination and nowhere else (Table 16).

    Gymnasium 1.4 draws its house at a fixed place above the G stand; the
    adapter draws it on the destination stand instead, in every frame.
    """
    env = make_env(task)
    frame = env.reset()
    raw = env.adapter.env
    r, c, p, d = raw.decode(int(raw.s))
    locs = [tuple(x) for x in raw.locs]
    assert (r, c) != locs[d], "the taxi would hide the marker at the start"
    assert _building_match(frame, raw, locs[d]) == 1.0
    for i, loc in enumerate(locs):
        if i != d:
            assert _building_match(frame, raw, loc) < 0.2, f"building on stand {i}"
    # the fixed place above the top-right stand is plain canvas now
    x0, y0 = taxi_cell_origin(raw, (0, 4))
    above = frame[: y0 - 12, x0 : x0 + 88]
    assert (above == above[0, 0]).all()
    # still there after a move (the marker is part of every frame)
    s = env.step("Pickup")
    assert _building_match(s.frame, raw, locs[d]) == 1.0
    env.close()


def cliff_plan(env) -> list[str]:
    dist = cliff_distances()
    moves = {"Up": (-1, 0), "Right": (0, 1), "Down": (1, 0), "Left": (0, -1)}
    pos = env.adapter.pos()
    plan = []
    while pos != CLIFF_GOAL:
        for name, (dr, dc) in moves.items():
            nxt = (pos[0] + dr, pos[1] + dc)
            if nxt in dist and dist[nxt] == dist[pos] - 1:
                plan.append(name)
                pos = nxt
                break
    return plan


@pytest.mark.parametrize("task", task_params(["cliffwalking"]))
def test_cliff_optimal_route_scores_100_and_passes(task):
    env = make_env(task)
    env.reset()
    plan = cliff_plan(env)
    assert len(plan) <= task.max_steps
    for a in plan:
        s = env.step(a)
    assert s.outcome == "Victory" and s.passed and s.score == 100.0


@pytest.mark.parametrize("task", task_params(["cliffwalking"]))
def test_cliff_fall_ends_episode_early_without_pass(task):
    env = make_env(task)
    env.reset()
    # walk down to the bottom row (a cliff cell unless in the start/goal column)
    r, c = env.adapter.pos()
    if c == 0:
        env.step("Right") if r < 3 else None
        r, c = env.adapter.pos()
    actions = ["Down"] * (3 - r) if r < 3 else ["Right"]
    for a in actions:
        s = env.step(a)
    assert s.terminated and s.outcome == "Terminated"
    assert not s.passed and s.index < task.max_steps
    assert 0.0 <= s.score < 80.0


@pytest.mark.parametrize("task", task_params(["cliffwalking"]))
def test_cliff_progress_is_monotone(task):
    env = make_env(task)
    env.reset()
    plan = cliff_plan(env)
    last = env.score()
    for a in plan[:-1]:
        s = env.step(a)
        assert s.score >= last
        last = s.score
    assert 0 < last < 80.0
