"""The reflex screen (vical/run/screen.py, ``vical tasks screen``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vical.run import screen
from vical.run.screen import MARGIN, Played, battery, judge
from vical.spec import TaskSpec, all_tasks, get_task
from vical.spec.models import ReflexException

# a small sample of cheap tasks over several families, screened in the default suite
SAMPLE = ["taxi/state1", "cliffwalking/base", "tetris/seed43", "acrobot/rest", "bossfight/seed41"]


def _with_exception(task: TaskSpec, policies: list[str]) -> TaskSpec:
    exc = ReflexException(
        policies=policies,
        where="paper: Table 7",
        quote="a rule the paper states for this game",
        why="the rule itself is what the policy does",
    )
    return TaskSpec(env=task.env, variant=task.variant.model_copy(update={"reflex_exception": exc}))


def _played(policy: str, score: float, passed: bool = False) -> Played:
    return Played(policy, score, passed, 10, "Time Out")


def test_battery_holds_every_constant_random_cycles_and_sticky_play() -> None:
    task = get_task("pong/serve")
    names = [p.name for p in battery(task)]
    assert [n for n in names if n.startswith("const:")] == [f"const:{a}" for a in task.action_names]
    assert [n for n in names if n.startswith("random:")] == ["random:0", "random:1", "random:2"]
    periods = {len(n.split(":", 1)[1].split(",")) for n in names if n.startswith("cycle:")}
    assert periods == {2, 3, 4}
    assert sum(n.startswith("sticky:") for n in names) == len(screen.STICKY_P) * screen.STICKY_RUNS
    assert len(names) == len(set(names))
    # a pure function of the task: the same names and the same draws twice
    again = battery(task)
    assert [p.name for p in again] == names
    picks = [[p.make()(i) for i in range(20)] for p in battery(task)]
    assert picks == [[p.make()(i) for i in range(20)] for p in again]


def test_random_policy_draws_as_the_random_agent_does() -> None:
    import random

    from vical.run.episode import episode_seed

    task = get_task("taxi/state2")
    pol = next(p for p in battery(task) if p.name == "random:1")
    rng = random.Random(episode_seed(0, task.id, 1))
    pick = pol.make()
    assert [pick(i) for i in range(30)] == [rng.choice(task.action_names) for _ in range(30)]


def test_a_reflex_pass_fails_the_task_and_a_clean_task_passes() -> None:
    task = get_task("taxi/state1")
    clean = judge(
        task, [_played("const:Up", 10.0), _played("random:0", 5.0)], _played("e", 100, True)
    )
    assert clean.status == "ok" and clean.failures == []
    bad = judge(
        task, [_played("const:Up", 30.0, True), _played("random:0", 5)], _played("e", 100, True)
    )
    assert bad.status == "fail" and "const:Up" in bad.failures[0]


def test_random_play_fails_a_task_only_by_passing_most_of_its_episodes() -> None:
    task = get_task("taxi/state1")
    expert = _played("expert", 100.0, True)
    names = ["random:0", "random:1", "random:2", "sticky:0.5:0", "sticky:0.5:1", "sticky:0.9:0"]
    names.append("sticky:0.9:1")
    # one lucky pass in seven, as the paper's random reference passes 14% of episodes
    lucky = [_played(n, 40.0 if i == 0 else 5.0, i == 0) for i, n in enumerate(names)]
    assert judge(task, lucky, expert).status == "ok"
    # four of seven is a majority: the task is won by chance
    most = [_played(n, 40.0, i < 4) for i, n in enumerate(names)]
    found = judge(task, most, expert)
    assert found.status == "fail" and "4 of 7" in " ".join(found.failures)
    # random play's mean within the margin of the expert fails too
    close = [_played(n, expert.score - MARGIN / 2) for n in names]
    assert "mean score" in " ".join(judge(task, close, expert).failures)


def test_a_reflex_score_within_the_margin_of_the_experts_fails() -> None:
    task = get_task("taxi/state1")
    expert = _played("expert", 80.0, True)
    near = judge(task, [_played("cycle:Up,Down", 80.0 - MARGIN + 0.5)], expert)
    assert near.status == "fail" and "within" in near.failures[0]
    far = judge(task, [_played("cycle:Up,Down", 80.0 - MARGIN - 0.5)], expert)
    assert far.status == "ok"
    # without an expert plan only passes count
    assert judge(task, [_played("const:Up", 99.0)], None).status == "ok"


def test_an_exception_excuses_only_the_policies_it_names() -> None:
    task = _with_exception(get_task("taxi/state1"), ["const:Up"])
    expert = _played("expert", 100.0, True)
    excused = judge(task, [_played("const:Up", 60.0, True), _played("const:Down", 0)], expert)
    assert excused.status == "exception" and excused.excused == ["const:Up"]
    # another policy's pass is not excused
    other = judge(
        task, [_played("const:Up", 60.0, True), _played("const:Down", 60.0, True)], expert
    )
    assert other.status == "fail" and "const:Down" in " ".join(other.failures)
    # an exception that excuses nothing any more is a failure (claimed but absent)
    stale = judge(task, [_played("const:Up", 0.0), _played("const:Down", 0.0)], expert)
    assert stale.status == "fail" and "excuses nothing" in stale.failures[0]


def test_exception_must_quote_the_paper() -> None:
    with pytest.raises(ValueError, match="must read 'paper:"):
        ReflexException(policies=["const:Up"], where="ours", quote="x" * 20, why="y" * 20)
    with pytest.raises(ValueError):
        ReflexException(policies=[], where="paper: Table 7", quote="x" * 20, why="y" * 20)


def test_every_recorded_exception_is_well_formed_and_names_battery_policies() -> None:
    from fnmatch import fnmatchcase

    for task in all_tasks():
        exc = task.variant.reflex_exception
        if exc is None:
            continue
        names = [p.name for p in battery(task)]
        for glob in exc.policies:
            assert any(fnmatchcase(n, glob) for n in names), (task.id, glob)


@pytest.mark.parametrize("task_id", SAMPLE)
def test_sample_tasks_pass_the_screen(task_id: str) -> None:
    plans, _ = screen.load_expert_plans()
    found = screen.screen_task((task_id, plans.get(task_id)))
    assert found.status != "fail", found.failures


@pytest.mark.slow
@pytest.mark.parametrize("task_id", [t.id for t in all_tasks()])
def test_every_task_passes_the_screen(task_id: str) -> None:
    plans, _ = screen.load_expert_plans()
    found = screen.screen_task((task_id, plans.get(task_id)))
    assert found.status != "fail", found.failures


def _vical(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vical.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_screen_json_and_exit_status() -> None:
    res = _vical("tasks", "screen", "-t", "taxi/state1", "-j", "1", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["margin"] == MARGIN and doc["counts"]["fail"] == 0
    (row,) = doc["tasks"]
    assert row["task"] == "taxi/state1" and row["policies"] == len(battery(get_task("taxi/state1")))


def test_cli_screen_typo_is_one_error_line() -> None:
    res = _vical("tasks", "screen", "-t", "taxy/state1")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error:") and "taxy/state1" in res.stderr
    assert "Traceback" not in res.stderr


# an exception that excuses a policy which no longer passes the task
STALE = {
    "policies": ["const:Up"],
    "where": "paper: Table 7",
    "quote": "a rule that no longer admits anything",
    "why": "an exception whose pass has gone must be removed",
}


def _one_task_folder(tmp_path, exception: dict | None):  # type: ignore[no-untyped-def]
    import yaml

    from vical.spec import env_file

    doc = yaml.safe_load(env_file("taxi").read_text(encoding="utf-8"))
    doc["tasks"] = [t for t in doc["tasks"] if t["variant"] == "state1"]
    doc["demo_quota"]["clips"] = doc["demo_quota"]["clips"][:1]
    if exception is not None:
        doc["tasks"][0]["reflex_exception"] = exception
    (tmp_path / "taxi.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return tmp_path


def test_screen_of_a_checked_folder_both_ways(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from vical.cli.tasks import _screen_folder

    (tmp_path / "ok").mkdir()
    shown: list[str] = []
    assert _screen_folder(_one_task_folder(tmp_path / "ok", None), shown.append) == []
    (tmp_path / "bad").mkdir()
    (line,) = _screen_folder(_one_task_folder(tmp_path / "bad", STALE), shown.append)
    assert line.startswith("taxi/state1: fails the reflex screen") and "excuses nothing" in line
    assert shown == [line]


@pytest.mark.slow
def test_tasks_check_screen_both_ways(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ok = _one_task_folder(tmp_path / "ok", None) if (tmp_path / "ok").mkdir() is None else None
    res = _vical("tasks", "check", str(ok), "--screen")
    assert res.returncode == 0, res.stdout + res.stderr
    (tmp_path / "bad").mkdir()
    bad = _one_task_folder(tmp_path / "bad", STALE)
    res = _vical("tasks", "check", str(bad), "--screen")
    assert res.returncode == 1
    assert "taxi/state1: fails the reflex screen" in res.stdout and "excuses nothing" in res.stdout
