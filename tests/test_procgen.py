"""Procgen family: search-found trajectories beat doing nothing and pass, deaths
fail, the frame is the 512x512 render, and the level is pinned by the task seed."""

from __future__ import annotations

import numpy as np
import pytest

from vical.authoring.search import procgen_beam
from vical.envs import make_env
from vical.envs.procgen import parse_state
from vical.spec import get_task

# Action lists found by vical.authoring.search.procgen_beam (beam search over the
# canonical actions with Procgen get_state/set_state, seed 0) from each task's
# start state, stored here and replayed in the rendered env.
SOLUTIONS: dict[str, list[str]] = {
    "bossfight/seed49": ["Up", "Down", "Up", "Down", "Up", "NOOP", "Up", "NOOP", "NOOP", "Right", "Up", "Shoot", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Down", "Left", "Right", "Left", "Right", "Up", "NOOP", "Right", "Left", "Left", "Shoot", "Down", "NOOP", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "Left", "Right", "NOOP", "Left", "NOOP", "Up", "Right", "Up", "Shoot"],
    "dodgeball/seed209": ["Up", "Up", "Right", "Up", "NOOP", "NOOP", "Down", "Up", "Left", "Right", "Down", "NOOP", "Throw", "Left", "Up", "Down", "Left", "Right", "NOOP", "Right", "Up", "Right", "NOOP", "Up", "Down", "Throw", "NOOP", "Left", "Down", "Down", "Up", "NOOP", "NOOP", "NOOP", "NOOP", "Right", "Down", "NOOP", "Down", "Down", "NOOP", "Up", "Down", "Up", "Down", "Up", "Up", "Down", "Up", "Down", "Up", "Down", "Up", "Up", "NOOP", "Up", "Down", "NOOP", "NOOP", "Down", "Up", "Down", "Up", "Left", "Left", "Left", "Up", "Left", "NOOP", "Down", "Right", "NOOP", "Up", "Left", "Up", "Down", "Up", "Down", "NOOP", "Down", "Up", "Down", "Up", "Down", "Up", "Down", "Right", "Up", "Down", "NOOP", "Left", "NOOP", "Down", "Up"],
    "bigfish/seed178": ["Up+Right", "Right", "Up+Right", "Up+Right", "Up+Right", "Up", "Up+Left", "Up"],
    "caveflyer/seed53": [
        "Turn Right", "Thrust", "Thrust", "Turn Right", "Turn Right", "Thrust", "Thrust",
        "Turn Left", "Thrust", "Thrust", "NOOP",
    ],
    "heist/seed44": [
        "Left", "Left", "Left", "Left", "Up", "Up", "Up", "Up", "Left", "Right", "Right", "Right", "Right",
    ],
    "leaper/seed80": ["Up", "Up", "NOOP", "Up", "Up", "NOOP", "NOOP", "Up", "Up", "NOOP"],
    "ninja/seed438": [
        "Jump Right", "Jump Right", "Jump Right", "Jump Right", "Right", "Right", "Right", "Right",
        "Right", "Right", "Right", "Right", "Right", "Right", "Right", "NOOP",
    ],
}  # fmt: skip

# Tasks where some action held for the whole horizon gets the agent killed.
DEATH_TASKS = [
    "bigfish/seed45",
    "bossfight/seed41",
    "caveflyer/seed42",
    "dodgeball/seed101",
    "leaper/seed60",
    "ninja/seed265",
]


def play(task_id: str, actions: list[str]):
    env = make_env(task_id)
    try:
        env.reset()
        for a in actions:
            if env.done:
                break
            env.step(a)
        return env.score(), env.passed(), env.outcome
    finally:
        env.close()


@pytest.mark.parametrize("task_id", sorted(SOLUTIONS))
def test_search_trajectory_beats_do_nothing_and_passes(task_id):
    task = get_task(task_id)
    score, passed, outcome = play(task_id, SOLUTIONS[task_id])
    idle_score, idle_passed, _ = play(task_id, ["NOOP"] * task.max_steps)
    assert 0.0 <= idle_score <= 100.0 and 0.0 <= score <= 100.0
    assert score > idle_score
    assert passed and not idle_passed
    assert outcome in ("Victory", "Time Out")


@pytest.mark.parametrize("task_id", DEATH_TASKS)
def test_death_fails_the_task(task_id):
    task = get_task(task_id)
    for name in task.action_names[:6]:
        score, passed, outcome = play(task_id, [name] * task.max_steps)
        assert 0.0 <= score <= 100.0
        if outcome == "Terminated":
            assert not passed, f"{name!r} repeated ended in a death but the task passed"
            return
    pytest.fail("no repeated action ended in a death; pick another task for this test")


def test_frame_is_the_512_render_and_terminal_frame_is_kept():
    env = make_env("leaper/seed60")
    try:
        first = env.reset()
        assert first.shape == (512, 512, 3) and first.dtype == np.uint8
        while not env.done:
            env.step("Up")
        # The ending step restarted the level inside Procgen; the frame shown is
        # the last one of the episode, not the fresh start.
        assert env.outcome == "Terminated"
        assert not np.array_equal(env.frame, first)
        assert not np.array_equal(env.frame, env.adapter._read_frame())
    finally:
        env.close()


def test_level_is_pinned_by_the_task_seed():
    task = get_task("heist/seed44")
    env = make_env(task)
    try:
        env.reset()
        st = parse_state(env.adapter.env.get_state()[0])
        assert st.name == "heist" and st.level_seed == task.variant.seed
        assert st.cur_time == 0 and st.agent is not None
    finally:
        env.close()
    a, b = make_env("heist/seed44"), make_env("heist/seed64")
    try:
        assert not np.array_equal(a.reset(), b.reset())
    finally:
        a.close()
        b.close()


def test_search_expert_finds_a_passing_leaper_crossing():
    result = procgen_beam(get_task("leaper/seed257"), width=8)
    assert result.passed and result.outcome == "Victory"
    score, passed, outcome = play("leaper/seed257", result.actions)
    assert (score, passed, outcome) == (result.score, result.passed, result.outcome)


PROCGEN_ENVS = ["bigfish", "bossfight", "caveflyer", "dodgeball", "heist", "leaper", "ninja"]


@pytest.mark.parametrize("env_key", PROCGEN_ENVS)
def test_info_read_after_one_observe_equals_get_info(env_key):
    """The adapter reads the info buffers its own observe() filled; a second Procgen
    simulator stepped with the same native actions and read through gym3's
    get_info() (which observes again) shows the same frame and completion flag."""
    import random

    from vical.spec import select_tasks

    task = select_tasks(env_key)[0]
    env = make_env(task)
    adapter = env.adapter
    adapter.reset(task.variant.seed)  # both simulators at the seeded level's first frame
    ref = adapter.make_env(task.variant.seed)
    natives = list(task.env.actions.values())
    rng = random.Random(env_key)
    drawn = 0
    for _ in range(150):
        a = rng.choice(natives)
        tick = adapter.act(a)
        ref.act(np.array([int(a)], dtype=np.int32))
        _, _, first = ref.observe()
        info = ref.get_info()[0]
        assert tick.terminated == bool(first[0])
        assert tick.info["level_complete"] == bool(info.get("prev_level_complete", 0))
        if not tick.terminated:
            assert np.array_equal(adapter.frame(), info["rgb"])
            drawn += 1
    ref.close()
    env.close()
    assert drawn > 100
