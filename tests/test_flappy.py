"""Flappy Bird: a scripted pilot passes pipes and wins; falling or crashing fails."""

from __future__ import annotations

from itertools import pairwise

import pytest
from flappy_bird_gymnasium.envs.constants import PIPE_WIDTH, PLAYER_HEIGHT

from vical.envs import make_env
from vical.envs.compat import flappy as compat
from vical.spec import get_task, select_tasks


def pilot(vical_env) -> str:
    """Flap when the bird has sunk to 20 px above the next gap's bottom edge and is not climbing."""
    e = vical_env.adapter.env
    bird = compat.bird(e)
    ahead = [p for p in compat.pipes(e) if p[0]["x"] + PIPE_WIDTH > bird.x]
    _, lower = min(ahead, key=lambda p: p[0]["x"])
    floor = lower["y"] - 20 - PLAYER_HEIGHT
    return "Flap" if bird.y > floor and bird.vel_y >= 0 else "Idle"


def play(task, policy):
    env = make_env(task)
    env.reset()
    scores, passes = [env.score()], [env.passed()]
    while not env.done:
        s = env.step(policy(env))
        scores.append(s.score)
        passes.append(s.passed)
    out = (env.score(), env.passed(), env.outcome, env.steps, scores, passes)
    env.close()
    return out


@pytest.mark.parametrize("task", select_tasks("flappybird"), ids=lambda t: t.id)
def test_pilot_passes_three_pipes(task):
    score, passed, outcome, steps, scores, passes = play(task, pilot)
    assert outcome == "Victory" and passed and score == 100.0
    assert steps < task.max_steps
    assert all(b >= a for a, b in pairwise(scores)), "score must never decrease"
    first = passes.index(True)
    assert scores[first] == pytest.approx(100 / 3), "the pass comes with the first pipe"
    assert not any(passes[:first])


def test_first_pipe_alone_passes_then_crash_terminates():
    task = get_task("flappybird/seed47")
    env = make_env(task)
    env.reset()
    while not env.passed():
        env.step(pilot(env))
    assert env.score() == pytest.approx(100 / 3)
    while not env.done:  # stop flapping: the bird falls to the ground
        env.step("Idle")
    assert env.outcome == "Terminated" and env.passed()
    env.close()


@pytest.mark.parametrize("action", ["Idle", "Flap"])
def test_one_button_policies_crash_without_a_pass(action):
    score, passed, outcome, steps, _, _ = play(get_task("flappybird/seed43"), lambda e: action)
    assert outcome == "Terminated" and not passed and score == 0.0
    assert steps < 80


def test_survival_reward_is_ignored():
    env = make_env(get_task("flappybird/seed50"))
    env.reset()
    for _ in range(30):
        env.step(pilot(env))
    assert not env.done and env.score() == 0.0
    env.close()


@pytest.mark.parametrize("task", select_tasks("flappybird")[:3], ids=lambda t: t.id)
def test_frames_read_from_the_surface_equal_the_simulators_render(task):
    """The adapter's row-major read of the drawn surface is render()'s frame, pixel for pixel."""
    import numpy as np

    env = make_env(task)
    first = env.reset()
    assert np.array_equal(first, env.adapter.env.render())
    frames = 0
    while not env.done:
        s = env.step(pilot(env))
        assert s.frame.flags.c_contiguous and s.frame.flags.writeable
        assert np.array_equal(s.frame, env.adapter.env.render()), f"decision {s.index}"
        frames += 1
    env.close()
    assert frames > 30
