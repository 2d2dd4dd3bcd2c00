"""Plan files (vical.agent.plans) and the plan agent that replays them (the expert reference)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vical.agent import get_agent
from vical.agent.base import EpisodeContext, Observation
from vical.agent.plans import PLANS_FORMAT, fill_action, load_plans
from vical.errors import AgentConfigError
from vical.spec import get_task, tasks_digest


def plan_doc(**tasks: list[str]) -> dict:
    """A valid plan document; keyword names are task ids with "__" for "/"."""
    return {
        "format": PLANS_FORMAT,
        "tasks_digest": tasks_digest(),
        "source": "hand-written for the tests",
        "tasks": {
            k.replace("__", "/"): {"actions": v, "expert": "hand plan"} for k, v in tasks.items()
        },
    }


def write(tmp_path, doc, name="plans.json"):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


def test_a_valid_file_loads(tmp_path):
    p = write(tmp_path, plan_doc(taxi__state1=["Up", "Pickup"], cartpole__seed41=["Push Left"]))
    plans = load_plans(p)
    assert plans.name == "plans.json" and plans.tasks_digest == tasks_digest()
    assert plans.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert plans.tasks["taxi/state1"].actions == ("Up", "Pickup")
    assert plans.tasks["cartpole/seed41"].expert == "hand plan"
    assert plans.missing([get_task("taxi/state1"), get_task("taxi/state2")]) == ["taxi/state2"]


def _bad(doc_change):
    doc = plan_doc(taxi__state1=["Up"])
    doc_change(doc)
    return doc


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object (a list)"),
        (_bad(lambda d: d.update(format="vical-plans/0")), "format is 'vical-plans/0', expected"),
        (_bad(lambda d: d.pop("format")), "format is None, expected 'vical-plans/1'"),
        (_bad(lambda d: d.pop("source")), "'source' (free text: what made it) is missing"),
        (_bad(lambda d: d.update(tasks=[])), "'tasks' is missing or not an object"),
        (
            _bad(lambda d: d["tasks"].update({"taxi/nope": {"actions": ["Up"], "expert": "x"}})),
            "task taxi/nope: no such task in this vical",
        ),
        (
            _bad(lambda d: d["tasks"].update({"nope": {"actions": ["Up"], "expert": "x"}})),
            "task nope: no such task",
        ),
        (
            _bad(lambda d: d["tasks"]["taxi/state1"].update(actions=["Up", "Fly"])),
            "task taxi/state1: action 1 'Fly' is not one of the task's actions (Down, Up,",
        ),
        (
            _bad(lambda d: d["tasks"]["taxi/state1"].update(actions=[])),
            "task taxi/state1: 'actions' is not a non-empty list",
        ),
        (
            _bad(lambda d: d["tasks"]["taxi/state1"].pop("expert")),
            "task taxi/state1: 'expert' (a short text naming the expert) is missing",
        ),
        (_bad(lambda d: d["tasks"].update({"taxi/state1": ["Up"]})), "its plan is not an object"),
    ],
)
def test_each_bad_file_is_one_line_naming_file_and_problem(tmp_path, doc, needle):
    p = write(tmp_path, doc)
    with pytest.raises(AgentConfigError) as e:
        load_plans(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"plan file {p}: ")
    assert needle in msg, msg


def test_a_file_for_other_task_data_must_be_remade(tmp_path):
    doc = plan_doc(taxi__state1=["Up"])
    doc["tasks_digest"] = "0" * 64
    p = write(tmp_path, doc)
    with pytest.raises(AgentConfigError) as e:
        load_plans(p)
    msg = str(e.value)
    assert "\n" not in msg and "0" * 64 in msg and tasks_digest() in msg
    assert "must be remade for this task data" in msg


def test_a_missing_file_says_how_to_make_one(tmp_path):
    with pytest.raises(AgentConfigError, match="no such file; make one with: python bench"):
        load_plans(tmp_path / "absent.json")


def test_fill_is_the_noop_name_else_the_first_action():
    assert fill_action(get_task("pong/serve")) == "NOOP"
    assert fill_action(get_task("cartpole/seed41")) == "Push Left"  # no NOOP
    assert fill_action(get_task("taxi/state1")) == "Down"


def _ctx(task_id):
    task = get_task(task_id)
    return EpisodeContext(task, 0, 1, task.action_names, task.max_steps)


def _obs(step):
    return Observation(step, np.zeros((2, 2, 3), np.uint8), "sha", None)


def test_the_plan_agent_plays_the_plan_then_the_fill(tmp_path):
    p = write(tmp_path, plan_doc(taxi__state1=["Up", "Pickup"]))
    agent = get_agent("plan", plans=str(p), seed=3)
    assert agent.name == "plan" and agent.uses_demos is False
    settings = agent.settings()
    assert settings == {
        "plans": "plans.json",
        "plans_sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        "seed": 3,
    }
    assert str(tmp_path) not in json.dumps(settings)  # no path of this machine
    agent.start(_ctx("taxi/state1"))
    recs = [agent.act(_obs(i)).records[0] for i in range(4)]
    assert [r["action"] for r in recs] == ["Up", "Pickup", "Down", "Down"]
    assert [r["source"] for r in recs] == ["plan", "plan", "fill", "fill"]
    assert recs[0]["expert"] == "hand plan" and recs[0]["type"] == "decision"
    # a task without a plan: the fill action at every decision, each record says so
    agent.start(_ctx("cartpole/seed41"))
    d = agent.act(_obs(0))
    assert d.action == "Push Left"
    assert d.records == [
        {"type": "decision", "step": 0, "action": "Push Left", "source": "no plan", "expert": None}
    ]
    assert agent.act(_obs(1)).records[0]["source"] == "no plan"


# -- the packaged expert plans (vical/data/expert-plans.json) ----------------------


def _replay_plan(task, actions):
    from vical.envs import make_env

    fill = fill_action(task)
    with make_env(task) as env:
        env.reset()
        step = None
        while not env.done:
            step = env.step(actions[env.steps] if env.steps < len(actions) else fill)
        assert step is not None
        return step


def test_the_packaged_plans_cover_every_task_of_this_task_data():
    """Fails when the plans are stale: remake them with benchmarks/policy_audit.py
    --policies expert --plans vical/data/expert-plans.json (see docs/policy-audit.md)."""
    from vical.agent.plans import DEFAULT_PLANS
    from vical.spec import TASKS_DIR, all_tasks

    builtin = all_tasks(TASKS_DIR)  # an environment added from a folder brings its own plans
    plans = load_plans(DEFAULT_PLANS)
    assert plans.missing(builtin) == []
    assert set(plans.tasks) == {t.id for t in builtin}


# quick environments whose expert passes every task (docs/policy-audit.md)
QUICK = [
    "taxi/state1",
    "cliffwalking/ledge-3",
    "lavacrossing/base",
    "breakout/cols3",
    "cartpole/seed41",
]


@pytest.mark.parametrize("task_id", QUICK)
def test_a_packaged_plan_replays_to_a_pass(task_id):
    from vical.agent.plans import DEFAULT_PLANS

    task = get_task(task_id)
    step = _replay_plan(task, list(load_plans(DEFAULT_PLANS).tasks[task_id].actions))
    assert step.passed


@pytest.mark.slow
def test_the_packaged_expert_passes_most_tasks_of_every_environment():
    """An expert for every environment, passing more than half of its tasks."""
    from collections import defaultdict

    from vical.agent.plans import DEFAULT_PLANS
    from vical.spec import all_tasks

    plans = load_plans(DEFAULT_PLANS)
    passed: dict[str, list[bool]] = defaultdict(list)
    for task in all_tasks():
        step = _replay_plan(task, list(plans.tasks[task.id].actions))
        passed[task.env.env].append(bool(step.passed))
    weak = {e: f"{sum(p)}/{len(p)}" for e, p in passed.items() if 2 * sum(p) <= len(p)}
    assert not weak, f"environments whose expert passes half or fewer tasks: {weak}"


def _load_packaged_plans_with(folder: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "from vical.agent.plans import DEFAULT_PLANS, load_plans; "
        "print(len(load_plans(DEFAULT_PLANS).tasks))"
    )
    env = {**os.environ, "VICAL_TASKS_DIR": str(folder)}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_the_packaged_plans_hold_while_a_folder_only_adds_environments(tmp_path):
    from tests.test_tasks_check import TASK_FILE
    from vical.spec import BUILTIN_TASKS_DIR

    added = tmp_path / "added"
    added.mkdir()
    (added / "toyline.yaml").write_text(TASK_FILE.lstrip())
    done = _load_packaged_plans_with(added)
    assert done.returncode == 0 and done.stdout.strip() == "342", done.stderr[-2000:]

    replaced = tmp_path / "replaced"  # a folder's taxi.yaml replaces the built-in one
    replaced.mkdir()
    taxi = (BUILTIN_TASKS_DIR / "taxi.yaml").read_text()
    (replaced / "taxi.yaml").write_text(taxi + "# changed\n")
    done = _load_packaged_plans_with(replaced)
    assert done.returncode != 0 and "the plans must be remade for this task data" in done.stderr
