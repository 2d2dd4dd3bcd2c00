"""The ablation of paper Section 4.4 (Table 5): rules text x demonstration video.

Every environment's detailed rules reach the first prompt only under
``--rules detailed``; the four cells run against the baseline server, are
reported as Table 5, verify under their own condition, and only Base + Video
is ranked on the leaderboard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.test_submit import repack, unpack
from vical.agent import EpisodeContext, Observation, get_agent
from vical.agent.prompts import rules_text, task_intro
from vical.cli import app
from vical.errors import RunFolderError
from vical.run.results import RunManifest
from vical.run.runner import RunOptions, prepare_run, run_eval
from vical.serve import BaselineServer
from vical.spec import all_tasks, select_tasks
from vical.submit import leaderboard
from vical.submit.bundle import make_bundle
from vical.submit.keys import keygen
from vical.submit.verify import VerifyError, verify_bundle

runner = CliRunner()
FIRST_TASK = {}
for _t in all_tasks():
    FIRST_TASK.setdefault(_t.env.env, _t)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _first_prompt(task, rules: str) -> str:
    """The text of the first message the protocol builds for ``task`` (no demos)."""
    agent = get_agent("openai-chat", endpoint="http://127.0.0.1:9/v1", model="m")
    try:
        ctx = EpisodeContext(
            task=task,
            run_index=0,
            seed=0,
            action_names=task.action_names,
            max_steps=task.max_steps,
            rules=rules,
        )
        agent.start(ctx)
        frame = np.zeros((8, 8, 3), dtype=np.uint8)
        msg = agent._turns.first(ctx, Observation(0, frame, "0" * 64, None))
    finally:
        agent.close()
    return _norm(" ".join(p["text"] for p in msg["content"] if p["type"] == "text"))


@pytest.mark.parametrize("env", sorted(FIRST_TASK), ids=str)
def test_detailed_rules_reach_the_prompt_on_every_environment(env):
    task = FIRST_TASK[env]
    basic, detailed = _norm(task.env.rules.basic), _norm(task.env.rules.detailed)
    assert detailed not in basic, f"{env}: the detailed rules repeat the basic ones"
    prompt_basic = _first_prompt(task, "basic")
    prompt_detailed = _first_prompt(task, "detailed")
    assert basic in prompt_basic and basic in prompt_detailed
    assert detailed in prompt_detailed
    assert detailed not in prompt_basic
    # the default is the benchmark's setting, byte for byte
    assert task_intro(task, task.action_names, task.max_steps) == task_intro(
        task, task.action_names, task.max_steps, "basic"
    )


def test_rules_level_is_checked(tmp_path):
    task = FIRST_TASK["taxi"]
    with pytest.raises(ValueError, match="rules must be one of basic, detailed, not 'full'"):
        rules_text(task, "full")
    with pytest.raises(ValueError, match="rules must be basic or detailed, not 'full'"):
        run_eval([task], tmp_path / "r", options=RunOptions(rules="full", progress=False))
    r = runner.invoke(app, ["eval", "--tasks", "taxi/state1", "--rules", "full"])
    assert r.exit_code == 2
    assert "--rules 'full' is not one of: basic, detailed" in _norm(r.output.replace("│", " "))


def test_resume_under_other_rules_is_refused(tmp_path):
    tasks = select_tasks("taxi/state1")
    prepare_run(tmp_path, tasks, "random", {}, RunOptions(run_seed=0, runs=1, rules="detailed"))
    assert RunManifest.model_validate_json((tmp_path / "manifest.json").read_text()).rules == (
        "detailed"
    )
    with pytest.raises(RunFolderError, match="the rules text was detailed, now basic: pass "):
        prepare_run(tmp_path, tasks, "random", {}, RunOptions(run_seed=0, runs=1, rules="basic"))


# -- the four cells against the baseline server ---------------------------------------
TASKS = "taxi/state1,cliffwalking/base"
CELLS = {  # folder -> (--rules, --demos flag)
    "base-video": ("basic", "--demos"),
    "base-novideo": ("basic", "--no-demos"),
    "detailed-video": ("detailed", "--demos"),
    "detailed-novideo": ("detailed", "--no-demos"),
}


def _texts(obj: Any) -> list[str]:
    """Every "text" string of a request body."""
    if isinstance(obj, dict):
        own = [obj["text"]] if isinstance(obj.get("text"), str) else []
        return own + [t for v in obj.values() for t in _texts(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in _texts(v)]
    return []


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation")
    bodies: dict[str, list[dict]] = {}
    with BaselineServer(record_bodies=True) as srv:
        for name, (rules, demos) in CELLS.items():
            before = len(srv.requests)
            r = runner.invoke(
                app,
                [
                    "eval",
                    "--agent",
                    "openai-chat",
                    "--endpoint",
                    srv.openai_base_url,
                    "--model",
                    "random",
                    "--tasks",
                    TASKS,
                    "--rules",
                    rules,
                    demos,
                    "--no-report",
                    "--workers",
                    "1",
                    "--out",
                    str(root / name),
                ],
            )
            assert r.exit_code == 0, r.output
            bodies[name] = [q["body"] for q in srv.requests[before:]]
    return root, bodies


def test_each_cell_records_and_sends_its_condition(cells):
    root, bodies = cells
    tasks = select_tasks(TASKS)
    for name, (rules, demos) in CELLS.items():
        m = RunManifest.model_validate_json((root / name / "manifest.json").read_text())
        assert (m.rules, m.demos) == (rules, demos == "--demos"), name
        sent = [_norm(" ".join(_texts(b))) for b in bodies[name]]
        assert sent, name
        for task in tasks:
            detailed = _norm(task.env.rules.detailed)
            mine = [s for s in sent if _norm(task.env.rules.basic) in s]
            assert mine, f"{name}: no request carried {task.id}'s rules"
            assert all((detailed in s) == (rules == "detailed") for s in mine), name
        videos = [b for b in bodies[name] if "Demonstration video" in " ".join(_texts(b))]
        assert bool(videos) == (demos == "--demos"), name


def test_report_prints_table5(cells):
    root, _ = cells
    out = root / "report"
    r = runner.invoke(
        app, ["report", *(str(root / n) for n in CELLS), "--out", str(out), "--no-html"]
    )
    assert r.exit_code == 0, r.output
    assert "Table 5: demonstration video and rule specificity" in r.stdout
    data = json.loads((out / "report.json").read_text())
    [row] = data["table5"]
    assert row["model"] == "random (openai-chat)" and row["baseline"] == "base-video"
    runs = {x["name"]: x for x in data["runs"]}
    base = runs["base-video"]["columns"]["All"]
    for key, name in zip(
        ("basic+video", "basic+no-video", "detailed+video", "detailed+no-video"),
        CELLS,
        strict=True,
    ):
        cell = row["cells"][key]
        overall = runs[name]["columns"]["All"]
        assert cell["run"] == name and cell["score"] == pytest.approx(overall["score"])
        assert runs[name]["condition"] == {
            "rules": CELLS[name][0],
            "demos": CELLS[name][1] == "--demos",
        }
        if name == "base-video":
            assert cell["delta"] is None
            continue
        d = cell["delta"]
        assert d["score"] == pytest.approx(overall["score"] - base["score"])
        assert d["pass_rate"] == pytest.approx(overall["pass_rate"] - base["pass_rate"])
        assert d["matched_episodes"] == 2
        assert d["paired"]["score"]["estimate"] == pytest.approx(d["score"])
    md = (out / "report.md").read_text()
    assert "## Table 5: demonstration video and rule specificity" in md
    s = row["cells"]["detailed+no-video"]
    assert f"{s['score']:.1f} / {s['pass_rate']:.0f}" in md


@pytest.fixture(scope="module")
def bundles(cells):
    root, _ = cells
    priv, pub = keygen(root / "keys" / "team")
    out = {}
    for name in CELLS:
        out[name] = root / f"{name}.tar.gz"
        make_bundle(root / name, priv, out[name], team="Team A", partial=True)
    return priv, pub, out


def test_verify_replays_each_cell_under_its_condition(bundles):
    _, pub, paths = bundles
    for name, path in paths.items():
        v = verify_bundle(path, pubkeys=[pub], workers=1, progress=False)
        assert v.ok, name
        rules, demos = CELLS[name]
        assert v.condition == {"rules": rules, "demos": demos == "--demos"}
        assert v.manifest["condition"] == v.condition


def _set_rules(root: Path, rules: str, logs: bool = False) -> None:
    run = root / "run" / "manifest.json"
    m = json.loads(run.read_text())
    m["rules"] = rules
    run.write_text(json.dumps(m, indent=2))
    bm = json.loads((root / "manifest.json").read_text())
    bm["condition"]["rules"] = rules
    (root / "manifest.json").write_text(json.dumps(bm, indent=2, sort_keys=True) + "\n")
    if logs:
        for log in (root / "run" / "episodes").glob("*/log.jsonl"):
            lines = [json.loads(x) for x in log.read_text().splitlines()]
            for rec in lines:
                if rec.get("type") == "agent_session":
                    rec["rules"] = rules
            log.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_verify_refuses_a_run_that_claims_another_condition(bundles, tmp_path):
    priv, pub, paths = bundles
    # a detailed-rules run relabelled as basic (to be ranked): its sessions say otherwise
    root = unpack(paths["detailed-video"], tmp_path / "a")
    _set_rules(root, "basic")
    bad = repack(root, tmp_path / "a.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(VerifyError, match="ran with detailed rules, the run declares basic"):
        verify_bundle(bad, pubkeys=[pub], workers=1, progress=False)
    # the sessions relabelled too: the prompt itself still carries the detailed rules
    root = unpack(paths["detailed-video"], tmp_path / "b")
    _set_rules(root, "basic", logs=True)
    bad = repack(root, tmp_path / "b.tar.gz", rehash=True, resign_key=priv)
    with pytest.raises(
        VerifyError, match=r"not the protocol.s under the declared condition \(basic rules"
    ):
        verify_bundle(bad, pubkeys=[pub], workers=1, progress=False)


def test_leaderboard_ranks_only_base_video(bundles, tmp_path):
    _, pub, paths = bundles
    subs = tmp_path / "subs"
    for name in ("base-video", "detailed-novideo"):
        leaderboard.add(paths[name], pubkeys=[pub], submissions=subs, workers=1, progress=False)
    entries = leaderboard.load_entries(subs)
    ranked = [e for e in entries if not leaderboard.is_ablation(e)]  # partial: listed apart
    assert [e["condition"] for e in ranked] == [{"rules": "basic", "demos": True}]
    assert all(e["report"]["intervals"]["All"]["score"] for e in entries)
    index = leaderboard.build(tmp_path / "site", subs)
    page = index.read_text()
    board, _, ablations = page.partition('id="ablations"')
    assert board.count("reports/") == 1  # one ranked submission
    assert "Detailed rules, no video" in ablations and "reports/" in ablations
    md = (tmp_path / "site" / "leaderboard.md").read_text()
    ranked_md, _, ablation_md = md.partition("## Ablation runs (not ranked)")
    assert "Detailed rules, no video" in ablation_md and "Detailed rules" not in ranked_md
    assert "All 95% interval" in ranked_md
