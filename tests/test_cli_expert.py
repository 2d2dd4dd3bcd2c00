"""`vical baseline expert` and `vical report --expert`: the expert reference row."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tests.test_report_html import ENVS, _write_run
from vical.agent.plans import PLANS_FORMAT
from vical.cli import app
from vical.demos.experts import bfs_expert
from vical.run.results import EvalResult
from vical.spec import get_task, tasks_digest

runner = CliRunner()
WIDE = {"COLUMNS": "250"}  # the printed table whole, one line per row


def _plan_file(tmp_path, tasks):
    p = tmp_path / "plans.json"
    doc = {
        "format": PLANS_FORMAT,
        "tasks_digest": tasks_digest(),
        "source": "tests: BFS for taxi, a hand-written list for cartpole",
        "tasks": {t: {"actions": a, "expert": "test expert"} for t, a in tasks.items()},
    }
    p.write_text(json.dumps(doc))
    return p


def test_baseline_expert_replays_the_plans_and_reports_the_expert_row(tmp_path):
    taxi = bfs_expert(get_task("taxi/state1"))
    assert taxi is not None
    cart = ["Push Right", "Push Left", "Push Right"]
    plans = _plan_file(tmp_path, {"taxi/state1": list(taxi.actions), "cartpole/seed41": cart})
    out = tmp_path / "expert"
    tasks = "taxi/state1,cartpole/seed41"
    args = ["baseline", "expert", "--plans", str(plans), "--tasks", tasks, "-o", str(out)]
    r = runner.invoke(app, [*args, "--workers", "1"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"] == "plan" and manifest["runs_per_task"] == 1
    assert manifest["agent_settings"]["plans"] == "plans.json"
    assert str(tmp_path) not in json.dumps(manifest["agent_settings"])
    eps = sorted((out / "episodes").iterdir())
    assert [e.name for e in eps] == ["cartpole__seed41__r0", "taxi__state1__r0"]
    for ep, plan, fill in ((eps[1], list(taxi.actions), "Down"), (eps[0], cart, "Push Left")):
        res = EvalResult.model_validate_json((ep / "eval_result.json").read_text())
        n = res.steps
        assert res.actions == (plan + [fill] * n)[:n]
        logged = [json.loads(x) for x in (ep / "log.jsonl").read_text().splitlines()]
        decisions = [x for x in logged if x["type"] == "decision"]
        steps = [x["action"] for x in logged if x["type"] == "step"]
        assert [d["action"] for d in decisions] == steps == res.actions
        assert [d["source"] for d in decisions] == (["plan"] * len(plan) + ["fill"] * n)[:n]
        assert decisions[0]["expert"] == "test expert"
    taxi_res = EvalResult.model_validate_json((eps[1] / "eval_result.json").read_text())
    assert taxi_res.passed and taxi_res.steps == len(taxi.actions)
    cart_res = EvalResult.model_validate_json((eps[0] / "eval_result.json").read_text())
    assert cart_res.steps > len(cart)  # the fill was played
    # the reference row, beside a compared run
    rand = tmp_path / "rand"
    r = runner.invoke(
        app, ["baseline", "random", "--tasks", tasks, "--runs", "1", "-o", str(rand), "-j", "1"]
    )
    assert r.exit_code == 0, r.output
    rep = tmp_path / "rep"
    r = runner.invoke(app, ["report", str(rand), "--expert", str(out), "-o", str(rep)], env=WIDE)
    assert r.exit_code == 0, r.output
    assert "expert: All S" in r.stdout  # its interval line, one line at any width
    data = json.loads((rep / "report.json").read_text())
    assert data["expert"]["name"] == "expert" and data["expert"]["agent"] == "plan"
    assert data["expert"]["columns"]["All"]["pass_rate"] >= 50  # taxi passes
    assert "| Expert reference: expert |" in (rep / "report.md").read_text()


def test_baseline_expert_refuses_tasks_without_plans(tmp_path):
    plans = _plan_file(tmp_path, {"taxi/state1": ["Up"]})
    out = tmp_path / "expert"
    tasks = "taxi/state1,taxi/state2"
    args = ["baseline", "expert", "--plans", str(plans), "--tasks", tasks, "-o", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    flat = " ".join(r.stderr.split())
    assert "1 task(s) have no plan in" in flat and "taxi/state2" in flat
    assert "taxi/state1;" not in flat and "--tasks" in flat
    assert not out.exists()


def test_baseline_expert_without_the_packaged_plans_says_how_to_make_them(tmp_path, monkeypatch):
    import vical.agent.plans

    monkeypatch.setattr(vical.agent.plans, "DEFAULT_PLANS", tmp_path / "expert-plans.json")
    r = runner.invoke(app, ["baseline", "expert", "--tasks", "taxi/state1"])
    assert r.exit_code == 2
    flat = " ".join(r.stderr.split())
    assert "no expert plans are packaged" in flat
    assert "python benchmarks/policy_audit.py --policies expert --plans FILE" in flat


def test_baseline_expert_help_says_one_run_and_where_plans_come_from():
    r = runner.invoke(app, ["baseline", "expert", "--help"], env=WIDE)
    flat = " ".join(r.stdout.split())
    assert "One run per task: the expert is deterministic" in flat
    assert "--runs" not in flat and "--plans" in flat
    r = runner.invoke(app, ["baseline", "--help"], env=WIDE)
    assert "Reference runs (the random and expert baselines)." in r.stdout


def test_plan_agent_needs_no_model_and_skips_the_self_check(tmp_path):
    from vical.cli import EvalOptions
    from vical.cli.eval import _self_check

    plans = _plan_file(tmp_path, {"taxi/state1": ["Up"]})
    opts = EvalOptions(
        tasks=None, out=tmp_path, runs=1, seed=0, workers=None, frames="none", agent="plan"
    )
    assert opts.agent_kwargs["plans"].endswith("vical/data/expert-plans.json")
    opts = EvalOptions(
        tasks=None,
        out=tmp_path,
        runs=1,
        seed=0,
        workers=None,
        frames="none",
        agent="plan",
        plans=plans,
    )
    assert opts.agent_kwargs == {"seed": 0, "plans": str(plans.resolve())}
    assert "plan agent (it sends no requests)" in json.dumps(_self_check(opts))


def test_report_prints_and_writes_both_reference_rows(tmp_path):
    def episodes(score, passed):
        return {
            env: [(score, passed, None if passed else "timeout", acts[:2])]
            for env, (*_, acts) in ENVS.items()
        }

    run = _write_run(tmp_path, "model-a", "openai-chat", episodes(40, False), tokens=10, seed=1)
    rand = _write_run(tmp_path, "random-ref", "random", episodes(5, False), tokens=0, seed=2)
    expert = _write_run(tmp_path, "expert-ref", "plan", episodes(95, True), tokens=0, seed=3)
    out = tmp_path / "rep"
    r = runner.invoke(
        app,
        ["report", str(run), "--random", str(rand), "--expert", str(expert), "--out", str(out)],
        env=WIDE,
    )
    assert r.exit_code == 0, r.output
    # the interval lines under the table name every row in order, whatever the width
    lines = [line.split(":")[0] for line in r.stdout.splitlines() if ": All S" in line]
    assert lines == ["model-a", "random-ref", "expert-ref"]
    data = json.loads((out / "report.json").read_text())
    assert [x["name"] for x in data["runs"]] == ["model-a"]
    assert data["random"]["name"] == "random-ref" and data["expert"]["name"] == "expert-ref"
    assert data["expert"]["columns"]["All"]["score"] == 95
    # not pooled into the analyses: only the run and the random reference appear there
    assert {x["run"] for x in data["analyses"]["fixation"]} == {"model-a", "random-ref"}
    assert {s["best_score"] for s in data["analyses"]["strata"]} <= {40}
    md = (out / "report.md").read_text()
    i_rand = md.index("| Random reference: random-ref |")
    i_exp = md.index("| Expert reference: expert-ref |")
    assert i_rand < i_exp < md.index("Random (paper)")
    assert "expert-ref S" in md  # the per-environment means
    assert "Expert reference: expert-ref (3 episodes, 3 tasks)" in md
    html = (out / "report.html").read_text()
    assert "Expert reference: expert-ref" in html and "Random reference: random-ref" in html
