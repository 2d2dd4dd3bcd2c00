"""A pass needs the life kept in the ALE games where Table 28 saw no early success.

Table 7 gives these games "life-loss termination" and Table 28 reports 0% early
success for each, with many early deaths: a run that reaches the points threshold
and then loses its life is an early death, not a pass. The games with an early
success in Table 28 keep a pass reached before a death (their own rules decide).
"""

from __future__ import annotations

import random

import pytest

from vical.envs import make_env
from vical.envs.ale import ALEAdapter
from vical.paper import TABLE28
from vical.spec import get_task, load_envs

NEEDS_LIFE = [
    "asterix",
    "battlezone",
    "choppercommand",
    "demonattack",
    "mspacman",
    "riverraid",
    "seaquest",
    "trondead",
    "turmoil",
]


def _fatal_actions(task_id: str) -> list[str]:
    """Seeded random play on the task until a life is lost (the first seed that loses one)."""
    task = get_task(task_id)
    names = list(task.env.actions)
    for seed in range(20):
        rng = random.Random(seed)
        env = make_env(task)
        try:
            env.reset()
            acts: list[str] = []
            while not env.done:
                acts.append(rng.choice(names))
                step = env.step(acts[-1])
            if step.outcome == "Terminated":
                return acts
        finally:
            env.close()
    pytest.fail(f"{task_id}: no seeded random run lost a life")


def _force_pass(adapter) -> None:
    """Put the scoring state past the pass threshold (the points, or BattleZone's hit)."""
    adapter.total = 10**6
    if hasattr(adapter, "event_at") and adapter.event_at is None:
        adapter.event_at = 1


def test_the_flag_is_set_exactly_where_table28_saw_no_early_success():
    for key, spec in load_envs().items():
        if spec.family != "ale":
            continue
        task = get_task(f"{key}/{spec.tasks[0].variant}")
        env = make_env(task)
        try:
            flagged = isinstance(env.adapter, ALEAdapter) and env.adapter.pass_needs_life
        finally:
            env.close()
        assert flagged == (key in NEEDS_LIFE), key
        if flagged:
            assert TABLE28[key].early_success == 0.0 and spec.life_loss_terminates, key


@pytest.mark.parametrize("game", NEEDS_LIFE)
def test_a_pass_is_lost_with_the_life(game):
    spec = load_envs()[game]
    task_id = f"{game}/{spec.tasks[0].variant}"
    acts = _fatal_actions(task_id)
    env = make_env(get_task(task_id))
    try:
        env.reset()
        for a in acts[:-1]:
            env.step(a)
        _force_pass(env.adapter)
        assert env.passed(), "the threshold reached with the life kept passes"
        last = env.step(acts[-1])
        assert last.outcome == "Terminated" and last.index < env.max_steps
        assert not last.passed and not env.passed()
    finally:
        env.close()
