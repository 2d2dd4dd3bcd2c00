"""Classic control: scripted controllers pass every task; scores follow progress."""

from __future__ import annotations

import pytest
from conftest import task_params

from vical.envs import make_env


def controller(task, state):
    """Simple expert policies on the simulator state (the demo experts use the same idea)."""
    if task.env.env == "cartpole":
        return "Push Right" if state[2] + 0.5 * state[3] > 0 else "Push Left"
    if task.env.env == "mountaincar":
        return "Accelerate Right" if state[1] >= 0 else "Accelerate Left"
    return "Torque +1" if state[3] > 0 else "Torque -1"


def play(task, policy):
    env = make_env(task)
    env.reset()
    s = None
    while not env.done:
        s = env.step(policy(env))
    env.close()
    return s


@pytest.mark.parametrize("task", task_params(["cartpole", "mountaincar", "acrobot"]))
def test_expert_controller_scores_100_and_passes(task):
    s = play(task, lambda env: controller(task, env.adapter.env.state))
    assert s.passed and s.score == 100.0
    if task.env.env == "cartpole":
        assert s.outcome == "Time Out" and s.index == task.max_steps
    else:
        assert s.outcome == "Victory" and s.index <= task.max_steps


@pytest.mark.parametrize("task", task_params(["cartpole", "mountaincar", "acrobot"]))
def test_constant_action_scores_below_expert(task):
    idle = {"cartpole": "Push Left", "mountaincar": "Don't Accelerate", "acrobot": "Torque 0"}
    s = play(task, lambda env: idle[task.env.env])
    assert not s.passed and s.score < 100.0
    if task.env.env == "cartpole":
        assert s.outcome == "Terminated" and s.index < task.max_steps


@pytest.mark.parametrize("task", task_params(["mountaincar"]))
def test_mountaincar_pass_at_half_distance(task):
    env = make_env(task)
    env.reset()
    a = env.adapter
    while not env.done and not env.passed():
        env.step(controller(task, a.env.state))
    frac = (a.best - a.x0) / (a.goal - a.x0)
    assert env.passed() and frac >= 0.5
    assert env.score() == pytest.approx(100 * min(frac, 1.0), abs=1e-4)


@pytest.mark.parametrize("task", task_params(["acrobot"]))
def test_acrobot_pass_when_tip_above_pivot(task):
    env = make_env(task)
    env.reset()
    a = env.adapter
    while not env.done and a.best <= 0:
        assert not env.passed()
        env.step(controller(task, a.env.state))
    assert a.best > 0 and env.passed()
