"""Tokens and cost in report.json: per run, per environment, totals (vical.report.usage)."""

from __future__ import annotations

import json
import math

import pytest

from vical.agent.costs import load_prices
from vical.errors import RunFolderError
from vical.report.document import build_document, write_document
from vical.report.usage import manifest_model, recorded_cost, report_usage, run_usage, usage_totals
from vical.run import RunOptions, load_results, run_eval
from vical.run.results import EvalResult
from vical.serve import BaselineServer
from vical.spec import select_tasks

TOKENS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")


def _res(env, k, usage, cost, mode=None):
    return EvalResult(
        task_id=f"{env}/v0",
        env=env,
        variant="v0",
        run_index=k,
        agent="openai-chat",
        seed=k,
        score=0.0,
        passed=False,
        outcome="Timeout",
        failure_mode=mode or "timeout",
        steps=1,
        max_steps=1,
        actions=["Up"],
        frame_hashes=["a", "b"],
        tags={"types": ["Maze"], "memory": "Single", "dynamics": "Static"},
        usage=usage,
        cost_usd=cost,
        wall_seconds=0.1,
        agent_seconds=0.1,
        started_at="t",
        finished_at="t",
        vical_version="0",
    )


def _check_sums(block, envs):
    """A run's block equals the sum of its per-environment blocks."""
    for f in (*TOKENS, "episodes", "unpriced_episodes"):
        assert block[f] == sum(e[f] for e in envs), f
    if block["cost_usd"] is None:
        assert any(e["cost_usd"] is None for e in envs)
    else:
        assert block["cost_usd"] == pytest.approx(math.fsum(e["cost_usd"] for e in envs))


@pytest.fixture(scope="module")
def served_runs(tmp_path_factory):
    """Three runs of two environments: a priced API run, an unpriced one, the random agent."""
    root = tmp_path_factory.mktemp("usage")
    p = root / "prices.yaml"
    p.write_text("models:\n  random: {input: 3.0, output: 15.0, cached_input: 0.3}\n")
    price = load_prices(p)["random"]
    tasks = select_tasks("cliffwalking/base,taxi/state1")
    with BaselineServer(("127.0.0.1", 0), seed=1) as server:
        for name, model, cost in (("priced", "random", price), ("unpriced", "first", None)):
            kwargs = {"endpoint": server.openai_base_url, "model": model, "seed": 0}
            s = run_eval(
                tasks,
                root / name,
                agent="openai-chat",
                agent_kwargs=kwargs,
                options=RunOptions(
                    runs=2 if name == "priced" else 1,
                    workers=1,
                    frames="none",
                    progress=False,
                    price=cost,
                ),
            )
            assert not s.failed and not s.infra
    run_eval(
        tasks, root / "rand", options=RunOptions(runs=2, workers=1, frames="none", progress=False)
    )
    doc = build_document(
        [root / "priced", root / "unpriced"], random_dir=root / "rand", demo_context=False
    )
    write_document(doc, root / "report", html=False)
    report = json.loads((root / "report" / "report.json").read_text())
    return root, report


def test_api_run_totals_are_the_sum_over_its_episodes(served_runs):
    root, report = served_runs
    run = next(r for r in report["usage"]["runs"] if r["run"] == "priced")
    episodes = load_results(root / "priced")
    assert run["episodes"] == len(episodes) == 4
    for f, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        assert run[f] == sum(r.usage[key] for r in episodes) > 0
    assert run["cached_tokens"] == sum(r.usage.get("cached_input_tokens", 0) for r in episodes)
    assert run["cost_usd"] > 0
    assert run["cost_usd"] == pytest.approx(math.fsum(r.cost_usd for r in episodes), abs=1e-6)
    assert run["cost_usd"] == pytest.approx(
        (run["input_tokens"] * 3.0 + run["output_tokens"] * 15.0) / 1e6, abs=1e-5
    )
    assert (run["model"], run["price_entry"], run["unpriced_episodes"]) == ("random", "random", 0)
    assert [e["env"] for e in run["envs"]] == ["cliffwalking", "taxi"]
    _check_sums(run, run["envs"])


def test_unpriced_model_has_tokens_and_a_null_cost(served_runs):
    _, report = served_runs
    run = next(r for r in report["usage"]["runs"] if r["run"] == "unpriced")
    assert run["input_tokens"] > 0 and run["cost_usd"] is None
    assert (run["model"], run["price_entry"]) == ("first", None)
    assert run["unpriced_episodes"] == run["episodes"] == 2
    assert all(e["cost_usd"] is None for e in run["envs"])
    _check_sums(run, run["envs"])


def test_random_agent_uses_no_tokens_and_costs_zero(served_runs):
    _, report = served_runs
    run = report["usage"]["runs"][-1]
    assert (run["run"], run["reference"], run["agent"]) == ("rand", True, "random")
    assert all(run[f] == 0 for f in TOKENS)
    assert run["cost_usd"] == 0.0 and run["unpriced_episodes"] == 0
    assert (run["model"], run["price_entry"]) == (None, None)
    assert all(e["cost_usd"] == 0.0 and e["input_tokens"] == 0 for e in run["envs"])


def test_total_is_the_sum_of_the_runs(served_runs):
    _, report = served_runs
    runs, total = report["usage"]["runs"], report["usage"]["total"]
    assert [r["reference"] for r in runs] == [False, False, True]
    for f in (*TOKENS, "episodes", "unpriced_episodes"):
        assert total[f] == sum(r[f] for r in runs)
    assert total["cost_usd"] is None  # the unpriced run makes the sum unknown
    assert total["infrastructure_failures"] is None


def test_markdown_shows_the_usage_table(served_runs):
    root, report = served_runs
    md = (root / "report" / "report.md").read_text()
    lines = md.split("## Tokens and cost per run", 1)[1].splitlines()
    priced = next(r for r in report["usage"]["runs"] if r["run"] == "priced")
    line = next(x for x in lines if x.startswith("| priced (openai-chat)"))
    assert f"| {priced['input_tokens']:,} |" in line and line.endswith("| random |")
    assert next(x for x in lines if x.startswith("| Total ")).count("unknown") == 1


def test_cost_rules_per_episode():
    assert recorded_cost(_res("taxi", 0, {"input_tokens": 5, "output_tokens": 1}, 0.25)) == 0.25
    assert recorded_cost(_res("taxi", 0, {}, None)) == 0.0
    assert recorded_cost(_res("taxi", 0, {"input_tokens": 5, "output_tokens": 1}, None)) is None


def test_cached_and_reasoning_tokens_and_a_partly_priced_run():
    eps = [
        _res(
            "taxi",
            0,
            {
                "input_tokens": 1000,
                "cached_input_tokens": 400,
                "output_tokens": 50,
                "reasoning_tokens": 20,
            },
            0.001,
        ),
        _res("taxi", 1, {"input_tokens": 10, "output_tokens": 2}, None),
        _res("pong", 0, {"input_tokens": 7, "output_tokens": 3, "cached_input_tokens": 5}, 0.5),
    ]
    t = usage_totals(eps)
    assert (t["input_tokens"], t["cached_tokens"], t["output_tokens"]) == (1017, 405, 55)
    assert t["reasoning_tokens"] == 20
    assert t["cost_usd"] is None and t["unpriced_episodes"] == 1
    u = run_usage("m", eps, [], "gpt-x")
    assert u["price_entry"] == "gpt-x"
    pong, taxi = u["envs"]
    assert pong["cost_usd"] == 0.5 and taxi["cost_usd"] is None
    _check_sums(u, u["envs"])


def test_infrastructure_failures_are_counted_apart():
    scored = [_res("taxi", 0, {"input_tokens": 100, "output_tokens": 10}, 0.2)]
    infra = [_res("taxi", 1, {"input_tokens": 30, "output_tokens": 0}, 0.05, mode="api_error")]
    a = run_usage("a", scored, infra, "m")
    b = run_usage("b", scored, [], "m")
    assert a["input_tokens"] == 100 and a["cost_usd"] == 0.2
    assert a["infrastructure_failures"]["input_tokens"] == 30
    assert a["infrastructure_failures"]["cost_usd"] == 0.05
    total = report_usage([a, b])["total"]
    assert total["input_tokens"] == 200 and total["cost_usd"] == pytest.approx(0.4)
    assert total["infrastructure_failures"]["episodes"] == 1


def test_manifest_model(tmp_path):
    assert manifest_model(tmp_path) is None  # no manifest: hand-made folder
    (tmp_path / "manifest.json").write_text(json.dumps({"agent_settings": {"seed": 0}}))
    assert manifest_model(tmp_path) is None  # the random agent has no model
    (tmp_path / "manifest.json").write_text(json.dumps({"agent_settings": {"model": "m1"}}))
    assert manifest_model(tmp_path) == "m1"
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(RunFolderError, match=r"manifest\.json is not a vical run manifest"):
        manifest_model(tmp_path)
