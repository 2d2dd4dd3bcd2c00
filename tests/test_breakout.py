"""CustomBreakout: scripted wins score 100, a lost ball ends the game, stored openings replay."""

from __future__ import annotations

import ast
import re
from itertools import pairwise

import pytest

from vical.envs import make_env
from vical.envs.breakout import (
    BALL,
    NATIVE_NAMES,
    SPEED,
    BreakoutGame,
    scripted_opening,
    track_ball,
)
from vical.spec import TaskSpec, get_task, select_tasks

TASKS = select_tasks("breakout")


def tracker(aim):
    return lambda env: NATIVE_NAMES[track_ball(env.adapter.game, aim)]


def play(task, policy):
    env = make_env(task)
    env.reset()
    scores = [env.score()]
    while not env.done:
        scores.append(env.step(policy(env)).score)
    out = (env.score(), env.passed(), env.outcome, env.steps, scores)
    env.close()
    return out


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_scripted_tracker_clears_the_row(task):
    # Aiming two units right of the ball's column wins every task within its budget.
    score, passed, outcome, steps, scores = play(task, tracker(2))
    assert outcome == "Victory" and passed and score == 100.0
    assert steps <= task.max_steps
    assert all(b >= a for a, b in pairwise(scores)), "score must never decrease"
    assert scores[0] == 0.0


def test_partial_progress_is_scored_by_bricks():
    # Aiming at the ball's centre breaks two bricks of three on the base task, then loops.
    score, passed, outcome, _, scores = play(get_task("breakout/cols3"), tracker(0))
    assert outcome == "Time Out" and not passed
    assert score == pytest.approx(200 / 3)
    assert sorted(set(scores)) == pytest.approx([0.0, 100 / 3, 200 / 3])


def test_losing_the_ball_terminates_without_pass():
    def run_away(env):
        return "Fire" if not env.adapter.game.served else "Left"

    score, passed, outcome, steps, _ = play(get_task("breakout/cols3"), run_away)
    assert outcome == "Terminated" and not passed
    assert score < 100.0 and steps < 40


def test_ball_moves_five_units_per_step_between_bounces():
    game = BreakoutGame(columns=3)
    game.reset(41)
    game.step(1)
    for _ in range(6):
        x, y = game.ball_x, game.ball_y
        game.step(0)
        dx, dy = game.ball_x - x, game.ball_y - y
        if dx * dx + dy * dy == SPEED * SPEED:
            continue
        # a bounce folds the path, never lengthens it
        assert abs(dx) <= 4 + BALL and abs(dy) <= 4 + BALL


@pytest.mark.parametrize(
    "task", [t for t in TASKS if t.variant.kind == "human-init"], ids=lambda t: t.id
)
def test_stored_openings_are_the_scripted_ones(task):
    call = re.search(r"scripted_opening\(([^)]*)\)", task.variant.init_source or "")
    assert call, "init_source must name the scripted_opening call"
    args = ast.parse(f"f({call.group(1)})", mode="eval").body
    pos = [ast.literal_eval(a) for a in args.args]
    kw = {k.arg: ast.literal_eval(k.value) for k in args.keywords}
    assert pos[0] == task.variant.seed and pos[1] == task.env_kwargs["columns"]
    assert scripted_opening(*pos, **kw) == task.variant.init_actions


def test_fire_left_out_of_the_subset_serves_automatically():
    base = get_task("breakout/cols3")
    subset = {"NOOP": 0, "Left": 3, "Right": 2}
    # the stored demos use Fire, which this subset leaves out: drop them for this check
    variant = base.variant.model_copy(update={"demos": []})
    env_spec = base.env.model_copy(update={"actions": subset, "tasks": [variant]})
    task = TaskSpec(env=env_spec, variant=variant)
    env = make_env(task)
    env.reset()
    env.step("NOOP")
    assert env.adapter.game.served
    env.close()
