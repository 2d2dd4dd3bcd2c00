"""`vical baseline expert` and `vical report --expert`: the expert reference, labelled a
privileged upper bound in a table of its own."""

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
    md = (rep / "report.md").read_text()
    assert "| Expert reference (privileged upper bound): expert |" in md
    # the evaluated tasks' provenance, from the task data
    from vical.spec import origin_counts

    prov = data["analyses"]["provenance"]
    counts = origin_counts([get_task("taxi/state1"), get_task("cartpole/seed41")])
    assert prov["tasks"] == 2 and prov["unknown"] == []
    assert {"starts": prov["starts"], "clips": prov["clips"]} == counts
    n_clips = sum(counts["clips"].values())
    assert "## Provenance of the start states and demonstrations" in md
    assert f"Their {n_clips} distinct demonstration clips" in " ".join(md.split())


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
    label = "Expert reference (privileged upper bound)"
    # Table 1 holds the paper's Human row and no expert: the expert has a table of its own
    table1 = md[md.index("## Table 1: score") : md.index("## Table 1 uncertainty")]
    assert "| Random reference: random-ref |" in table1 and "| Human (paper) |" in table1
    assert "expert" not in table1.split("\n\n", 2)[2].lower()  # no expert row
    expert = md[md.index("## Expert reference: a privileged upper bound") :]
    expert = expert[: expert.index("\n## ")]
    assert f"| {label}: expert-ref |" in expert and "Human" not in expert.split("|", 1)[1]
    flat = " ".join(expert.split())
    for reads in ("not a human baseline", "save and restore", "RAM", "known seed"):
        assert reads in flat, reads
    assert "| 95% interval (environments resampled) |" in expert
    assert "expert-ref (privileged expert) S" in md  # the per-environment means
    assert f"{label}: expert-ref (3 episodes, 3 tasks; not a human baseline)" in md
    assert data["expert_note"].startswith("The expert reference is a privileged upper bound")
    assert "privileged expert: an upper bound" in " ".join(r.stdout.split())
    html = (out / "report.html").read_text()
    assert f"{label}, not a human baseline: expert-ref" in html
    assert "Random reference: random-ref" in html
    # the fake runs' task ids are not in the task data: their provenance is not claimed
    assert data["analyses"]["provenance"]["tasks"] == 0
    assert "None of the 3 evaluated task ids is in the installed task data" in md
