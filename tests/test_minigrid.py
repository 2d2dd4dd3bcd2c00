"""MiniGrid family: LavaCrossing, MultiRoom, UnlockPickup.

The breadth-first planner (``vical.envs.minigrid.plan``) solves every task
within its horizon with score 100; lava ends the episode as a failure; scores
rise with progress; the planning model matches the simulator; the frame shows
only what the agent sees now, with its heading.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from conftest import ALL_TASKS, task_params

from vical.envs import make_env
from vical.envs.minigrid import plan, visible_cells
from vical.envs.minigrid_model import (
    DROP,
    FORWARD,
    LAVA,
    LEFT,
    PICKUP,
    RIGHT,
    TOGGLE,
    GridModel,
    bfs,
)
from vical.spec import get_task

MINIGRID = ("lavacrossing", "multiroom", "unlockpickup")


def _names(env, natives):
    inv = {v: k for k, v in env.task.env.actions.items()}
    return [inv[a] for a in natives]


def _run(env, actions):
    steps = [env.step(a) for a in actions]
    return steps[-1] if steps else None


@pytest.mark.parametrize("task", task_params(MINIGRID))
def test_planner_solves_every_task_within_its_horizon(task):
    with make_env(task) as env:
        env.reset()
        route = plan(env)
        assert len(route) == env.adapter.optimal
        assert len(route) <= task.max_steps
        scores = []
        for a in route:
            s = env.step(a)
            scores.append(s.score)
        assert s.terminated and s.outcome == "Victory"
        assert s.passed and s.score == 100.0
        # the score never drops along the shortest route, and ends at 100
        assert all(b >= a for a, b in itertools.pairwise(scores))


def test_variants_have_the_paper_layouts():
    sizes = {"multiroom": set(), "unlockpickup": set()}
    for task in (t for t in ALL_TASKS if t.env.env in MINIGRID):
        with make_env(task) as env:
            env.reset()
            g = env.adapter.grid_env
            if task.env.env == "lavacrossing":
                assert (g.width, g.height) == (11, 11)
                lava = {
                    (x, y)
                    for x in range(11)
                    for y in range(11)
                    if g.grid.get(x, y) is not None and g.grid.get(x, y).type == "lava"
                }
                rows = {y for y in range(11) if sum((x, y) in lava for x in range(11)) >= 8}
                cols = {x for x in range(11) if sum((x, y) in lava for y in range(11)) >= 8}
                assert len(rows) + len(cols) == 5
            elif task.env.env == "multiroom":
                assert len(g.rooms) == 6
                assert g.width == g.height
                sizes["multiroom"].add(g.width)
            else:
                sizes["unlockpickup"].add(g.room_size)
    assert sizes == {"multiroom": {15, 20, 25}, "unlockpickup": {7, 9, 11}}


def test_every_start_state_is_distinct():
    for key in MINIGRID:
        tasks = [t for t in ALL_TASKS if t.env.env == key]
        states = set()
        for t in tasks:
            with make_env(t) as env:
                env.reset()
                m = env.adapter.model
                layout = (m.width, frozenset(m.static.items()), frozenset(m.door_at))
                states.add((layout, env.adapter.state()))
        assert len(states) == len(tasks) == 15


def test_stepping_into_lava_ends_the_episode_as_a_failure():
    task = get_task("lavacrossing/base")
    with make_env(task) as env:
        env.reset()
        a = env.adapter
        # walk the shortest route halfway, then head for the nearest lava
        route = plan(env)
        half = _run(env, route[: len(route) // 2])
        to_lava = bfs(a.model, a.state(), lambda _s, e: e == LAVA)
        assert to_lava
        before = _run(env, _names(env, to_lava[:-1])) or half
        last = env.step(_names(env, to_lava[-1:])[0])
        assert last.terminated and last.outcome == "Terminated"
        assert not last.passed and env.done
        assert a.died and not a.reached
        assert 0.0 < last.score < before.score
        assert last.score == pytest.approx(before.score * task.target("death_factor"), abs=1e-6)


@pytest.mark.parametrize("key", MINIGRID)
def test_score_is_monotone_in_progress(key):
    task = next(t for t in ALL_TASKS if t.env.env == key and t.variant.kind == "base")
    with make_env(task) as env:
        env.reset()
        route = plan(env)
        idle = _run(env, ["Done"] * 5)
        assert idle.score == 0.0 and not idle.passed
    with make_env(task) as env:
        env.reset()
        part = _run(env, route[: len(route) // 2])
        assert 0.0 < part.score < 100.0 and not part.passed
        more = _run(env, route[len(route) // 2 : -1])
        assert part.score < more.score < 100.0 and not more.passed
        # every unfinished route scores below any arrival
        assert more.score < 80.0
    with make_env(task) as env:
        env.reset()
        # a detour (a full turn on the spot) then the shortest route: passes, below 100
        s = _run(env, ["Left"] * 4 + route)
        assert s.passed and s.outcome == "Victory"
        assert 80.0 <= s.score < 100.0


def test_unlockpickup_milestones_and_carried_object_strip():
    task = get_task("unlockpickup/room7-seed3445")
    with make_env(task) as env:
        frame0 = env.reset()
        a = env.adapter
        route = plan(env)
        strip_rows = slice(a.grid_env.height * a.tile, None)
        i_key = route.index("Pickup")
        s = _run(env, route[: i_key + 1])
        assert "key" in a.ms.reached and 25.0 <= s.score < 50.0
        # the strip under the map now shows the key
        assert not np.array_equal(s.frame[strip_rows], frame0[strip_rows])
        i_door = route.index("Toggle")
        s = _run(env, route[i_key + 1 : i_door + 1])
        assert "door" in a.ms.reached and 50.0 <= s.score < 85.0
        s = _run(env, route[i_door + 1 :])
        assert s.passed and s.score == 100.0


def test_opening_the_box_ends_the_episode_as_a_failure():
    task = get_task("unlockpickup/room7-seed3445")
    with make_env(task) as env:
        env.reset()
        route = plan(env)
        s = _run(env, route[:-1])  # facing the box with empty hands
        assert not s.done
        s = env.step("Toggle")
        assert s.terminated and s.outcome == "Terminated" and not s.passed
        assert 50.0 <= s.score < 85.0
        assert env.adapter.progress()["box_destroyed"]


@pytest.mark.parametrize("key", MINIGRID)
def test_model_matches_the_simulator(key):
    """Random play on the raw simulator: the planning model predicts every transition."""
    for task in [t for t in ALL_TASKS if t.env.env == key][:5]:
        with make_env(task) as env:
            env.reset()
            sim = env.adapter.grid_env
            model = GridModel(sim)
            rng = random.Random(task.id)
            state = model.state_of(sim)
            for _ in range(300):
                a = rng.choice([LEFT, RIGHT, FORWARD, FORWARD, PICKUP, DROP, TOGGLE])
                predicted, event = model.step(state, a)
                _obs, _r, terminated, _tr, _info = sim.step(a)
                state = model.state_of(sim)
                assert predicted == state, f"{task.id}: action {a}"
                assert terminated == (event in ("goal", "lava", "target"))
                if terminated:
                    break


def test_frame_shows_only_the_current_view_and_the_heading():
    task = get_task("multiroom/base")
    with make_env(task) as env:
        f0 = env.reset()
        a = env.adapter
        t = a.tile
        mask0 = visible_cells(a.grid_env)

        def black(frame, mask):
            for x in range(mask.shape[0]):
                for y in range(mask.shape[1]):
                    cell = frame[y * t : (y + 1) * t, x * t : (x + 1) * t]
                    assert bool(cell.any()) == bool(mask[x, y]), (x, y)

        black(f0, mask0)
        s = env.step("Left")
        s = env.step("Left")  # now facing the other way
        mask2 = visible_cells(a.grid_env)
        black(s.frame, mask2)
        # cells seen at the start but now behind the agent are no longer drawn
        assert (mask0 & ~mask2).any()
        # the heading is drawn: the agent's own tile differs between opposite headings
        x, y = (int(v) for v in a.grid_env.agent_pos)
        tile0 = f0[y * t : (y + 1) * t, x * t : (x + 1) * t]
        tile2 = s.frame[y * t : (y + 1) * t, x * t : (x + 1) * t]
        assert not np.array_equal(tile0, tile2)
        assert 200 <= f0.shape[0] <= 520 and 200 <= f0.shape[1] <= 520


def test_visible_is_the_current_view_and_read_only():
    with make_env(get_task("multiroom/base")) as env:
        env.reset()
        a = env.adapter
        before = a.visible.copy()
        assert before.shape == (a.grid_env.width, a.grid_env.height) and before.any()
        for action in ("Left", "Left"):  # now facing the other way
            env.step(action)
            assert np.array_equal(a.visible, visible_cells(a.grid_env))
        assert not np.array_equal(a.visible, before)
        with pytest.raises(ValueError, match="read-only"):
            a.visible[0, 0] = True
