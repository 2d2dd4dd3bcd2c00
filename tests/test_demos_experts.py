"""Expert tools: snapshots are exact, experts reach their goals, YAML writing round-trips."""

from __future__ import annotations

import shutil

import pytest

from vical.authoring.experts import failure_search, run_policy, search_expert
from vical.authoring.plan import ClipPlan, base_task
from vical.authoring.yamlio import write_demos
from vical.demos.experts import Sim, bfs_expert, controller_for
from vical.spec import TASKS_DIR, DemoClip, get_task, load_env_file, load_envs


def _clip_start(task_id, **kw):
    return ClipPlan("probe", bfs_expert, "search expert: test probe", **kw).task(get_task(task_id))


@pytest.mark.parametrize("task_id", ["taxi/state1", "cartpole/seed41", "mountaincar/valley"])
def test_snapshot_method_is_exact(task_id):
    sim = Sim(get_task(task_id))
    assert sim.method != "replay"
    sim.reset()
    names = sim.env.action_names
    sim.step(names[0])
    snap = sim.save()
    a = [sim.step(n).frame_sha256 for n in names]
    sim.restore(snap)
    b = [sim.step(n).frame_sha256 for n in names]
    assert a == b
    sim.close()


def test_bfs_finds_the_cliff_route():
    res = bfs_expert(_clip_start("cliffwalking/base", seed=43, init_actions=["Up"]))
    assert res is not None and res.passed and res.outcome == "Victory"
    assert len(res.actions) == 12


def test_search_expert_balances_cartpole():
    t = _clip_start("cartpole/seed41", seed=3, horizon=15)
    res = search_expert(t)
    assert res.passed and len(res.actions) == 15


CONTROLLED = sorted(e for e, spec in load_envs().items() if controller_for(spec) is not None)


def test_the_classic_control_games_declare_their_controllers():
    assert CONTROLLED == ["acrobot", "cartpole", "mountaincar"]


@pytest.mark.parametrize("env", CONTROLLED)
def test_controllers_reach_100(env):
    task = next(t for t in [base_task(load_env_file(TASKS_DIR / f"{env}.yaml"))])
    ctl = controller_for(task.env)
    assert ctl is not None
    res = run_policy(_clip_start(task.id, seed=11, horizon=80), ctl)
    assert res.score == 100.0


def test_failure_search_finds_a_loss():
    res = failure_search(_clip_start("cartpole/seed41", seed=5, horizon=30), tries=8)
    assert res is not None and res.outcome == "Terminated" and not res.passed


def test_write_demos_round_trips(tmp_path):
    shutil.copy(TASKS_DIR / "cliffwalking.yaml", tmp_path / "cliffwalking.yaml")
    spec = load_env_file(tmp_path / "cliffwalking.yaml")
    clip = DemoClip(
        id="c1",
        seed=43,
        init_actions=["Up"],
        actions=["Right"],
        label="Time Out",
        source="scripted test clip",
    )
    demos = {v.variant: [clip] for v in spec.tasks}
    write_demos("cliffwalking", demos, tasks_dir=tmp_path)
    again = load_env_file(tmp_path / "cliffwalking.yaml")
    assert all(v.demos == [clip] for v in again.tasks)
    assert again.rules == spec.rules and [v.init_actions for v in again.tasks] == [
        v.init_actions for v in spec.tasks
    ]
    text = (tmp_path / "cliffwalking.yaml").read_text()
    assert text.count("&c1") == 1 and text.count("*c1") == len(spec.tasks) - 1
