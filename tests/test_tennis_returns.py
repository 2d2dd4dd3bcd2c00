"""Tennis's endings (Table 7: "Execute four unit-frame ALE steps to detect ball-direction
reversals; auto-swing before evaluation and terminate on life loss"): a returned ball
passes and the rally goes on to the point's end; a point lost without a return ends the
episode as a death and fails."""

from __future__ import annotations

import itertools

from vical.envs import make_env
from vical.spec import all_tasks

TASKS = [t for t in all_tasks() if t.env.env == "tennis"]


def play(task, action: str):
    env = make_env(task)
    env.reset()
    while not env.done:
        step = env.step(action)
    ad = env.adapter
    out = (step, ad.returns, ad.points_lost, ad.points_won, env.adapter.lives())
    env.close()
    return out


def test_returned_ball_passes_and_lost_point_ends_as_death():
    returned = lost = None
    for task, action in itertools.product(TASKS, TASKS[0].env.actions):
        step, returns, points_lost, points_won, lives = play(task, action)
        if points_won:
            continue
        if returns and returned is None:
            returned = (task.id, action, step, returns, points_lost)
        if not returns and lost is None:
            lost = (task.id, action, step, points_lost, lives)
        if returned and lost:
            break
    assert returned is not None and lost is not None, "no return or no bare loss found"

    task_id, action, step, returns, points_lost = returned
    # the return passed; the rally went on until the opponent won the point
    assert step.passed, f"{task_id} {action}: a returned ball must pass"
    assert step.outcome == "Terminated" and points_lost == 1
    target = next(t for t in TASKS if t.id == task_id).target("returns")
    assert step.score == 100.0 * min(returns / target, 1.0)  # the count against its target

    task_id, action, step, points_lost, lives = lost
    assert not step.passed and step.score == 0.0
    assert step.outcome == "Terminated" and points_lost == 1 and lives == 0
    assert step.index < 30  # the lost point ends the episode before the budget


def test_a_reversal_on_the_frame_a_point_is_decided_is_not_a_return():
    env = make_env(TASKS[0])
    env.reset()
    ad = env.adapter
    ram = ad.ram()
    toward = 1 if int(ram[24]) > int(ram[25]) else -1  # the agent's end of the court
    for decided, counted in ((True, 0), (False, 1)):
        ad.returns = 0
        ad.last_dir = toward  # the ball was coming to the agent ...
        ad.last_depth = int(ram[15]) + toward  # ... and now moves away from it
        ad._track_ball(decided=decided)
        assert ad.returns == counted
    env.close()
