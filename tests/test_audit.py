"""Trajectory audits: the verdict contract, the prompt, the runner against the baseline
server acting as the auditor, and the tables."""

from __future__ import annotations

import json

import pytest

from vical.audit.verdict import (
    ATTRIBUTION,
    CONTRADICTION,
    EMPTY_JUSTIFICATION,
    LABEL,
    NOT_JSON,
    SCHEMA,
    TRANSFER,
    EpisodeFacts,
    VerdictError,
    check_verdict,
    parse_verdict,
    strategy_binary,
)

GOOD_TRANSFER = {
    "rule_transfer": {"label": "successful", "justification": "Used the pickup rule."},
    "strategy_transfer": {"label": "overfit", "justification": "Copied the demo route."},
}
GOOD_STAGE = {"player_failure_stage": {"label": "planning", "justification": "Bad route."}}
FAILED = EpisodeFacts(score=20.0, passed=False, failure_mode="timeout")
PERFECT = EpisodeFacts(score=100.0, passed=True, failure_mode=None)
NO_ACTION = EpisodeFacts(score=0.0, passed=False, failure_mode="invalid_action")


def test_a_valid_verdict_is_read_as_given():
    assert parse_verdict(json.dumps(GOOD_TRANSFER), TRANSFER) == GOOD_TRANSFER
    assert parse_verdict(json.dumps(GOOD_STAGE), ATTRIBUTION) == GOOD_STAGE
    # one Markdown fence around the object is tolerated, nothing else
    fenced = "```json\n" + json.dumps(GOOD_STAGE, indent=1) + "\n```"
    assert parse_verdict(fenced, ATTRIBUTION) == GOOD_STAGE


def _stage(label="planning", why="x", **extra):
    return json.dumps({"player_failure_stage": {"label": label, "justification": why}, **extra})


@pytest.mark.parametrize(
    ("text", "criterion", "kind", "says"),
    [
        ("", ATTRIBUTION, NOT_JSON, "empty"),
        ("Stage: planning", ATTRIBUTION, NOT_JSON, "not one JSON object"),
        ("Here it is: " + json.dumps(GOOD_STAGE), ATTRIBUTION, NOT_JSON, "not one JSON"),
        (json.dumps(GOOD_STAGE) + "\nThanks", ATTRIBUTION, NOT_JSON, "not one JSON"),
        ("[1, 2]", ATTRIBUTION, NOT_JSON, "not an object"),
        (json.dumps(GOOD_STAGE), TRANSFER, SCHEMA, "missing 'rule_transfer', 'strategy_transfer'"),
        (json.dumps(GOOD_TRANSFER), ATTRIBUTION, SCHEMA, "missing 'player_failure_stage'"),
        (_stage(notes="x"), ATTRIBUTION, SCHEMA, "unexpected 'notes'"),
        (
            '{"player_failure_stage": {"label": "none", "justification": "a", "label": "planning"}}',
            ATTRIBUTION, SCHEMA, "'label' appears twice",
        ),
        ('{"player_failure_stage": "planning"}', ATTRIBUTION, SCHEMA, "str, not an object"),
        (
            '{"player_failure_stage": {"label": "planning"}}',
            ATTRIBUTION, SCHEMA, "missing 'justification'",
        ),
        (_stage(label="perception"), ATTRIBUTION, LABEL, "'perception'; allowed"),
        (_stage(label="Planning"), ATTRIBUTION, LABEL, "'Planning'"),
        (_stage(label=None), ATTRIBUTION, LABEL, "None"),
        (_stage(why="   "), ATTRIBUTION, EMPTY_JUSTIFICATION, "non-empty"),
        (_stage(why=3), ATTRIBUTION, EMPTY_JUSTIFICATION, "non-empty"),
        (
            json.dumps({**GOOD_TRANSFER, "strategy_transfer": {"label": "not applicable",
                                                               "justification": "x"}}),
            TRANSFER, LABEL, "correct, underfit, overfit",
        ),
    ],
)  # fmt: skip
def test_a_bad_reply_is_refused_with_the_reason(text, criterion, kind, says):
    with pytest.raises(VerdictError) as e:
        parse_verdict(text, criterion)
    assert e.value.kind == kind
    assert says in str(e.value)


def test_contradictions_follow_the_paper_definitions():
    # a failure stage for a perfect episode: nothing unsuccessful to explain
    with pytest.raises(VerdictError) as e:
        check_verdict(_stage("planning"), ATTRIBUTION, PERFECT)
    assert e.value.kind == CONTRADICTION and "full score" in str(e.value)
    assert check_verdict(_stage("none"), ATTRIBUTION, PERFECT)["player_failure_stage"]
    # none for an episode the model ended by giving no legal action
    with pytest.raises(VerdictError) as e:
        check_verdict(_stage("none"), ATTRIBUTION, NO_ACTION)
    assert e.value.kind == CONTRADICTION and "no legal action" in str(e.value)
    assert check_verdict(_stage("action_commitment"), ATTRIBUTION, NO_ACTION)
    # none on a failed episode is allowed (environment or evidence may explain it)
    assert check_verdict(_stage("none"), ATTRIBUTION, FAILED)
    # transfer judgments never contradict the outcome
    assert check_verdict(json.dumps(GOOD_TRANSFER), TRANSFER, PERFECT) == GOOD_TRANSFER


def test_strategy_labels_collapse_to_the_binary_outcome():
    assert [strategy_binary(x) for x in ("correct", "underfit", "overfit")] == [
        "successful", "unsuccessful", "unsuccessful",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="unknown strategy-transfer label 'bad'"):
        strategy_binary("bad")


def test_instructions_name_every_label_and_differ_per_criterion():
    from vical.audit.prompt import answer_skeleton, instructions, prompt_sha256
    from vical.audit.verdict import JUDGMENTS

    for criterion, spec in JUDGMENTS.items():
        text = instructions(criterion)
        for name, labels in spec.items():
            assert name in text and name in answer_skeleton(criterion)
            for label in labels:
                assert f'"{label}"' in text
    assert "rule_transfer" not in instructions(ATTRIBUTION)
    assert "player_failure_stage" not in instructions(TRANSFER)
    assert len(prompt_sha256()) == 64
    with pytest.raises(ValueError, match="unknown criterion"):
        instructions("vibes")


# -- the runner against the baseline server as the auditor -----------------------------

from pathlib import Path  # noqa: E402

from vical.audit.runner import audit_run, load_audits  # noqa: E402
from vical.serve import BaselineServer  # noqa: E402

FAST = {"retry_base_delay": 0.01, "retry_max_delay": 0.05}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two acting runs through the baseline server: an expert that passes both tasks with
    the full score, and a model whose every reply is malformed (ends with invalid_action)."""
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks

    base = tmp_path_factory.mktemp("audit")
    with BaselineServer() as srv:
        for name, model, tasks in (
            ("expert", "expert", "cliffwalking/base,cliffwalking/ledge-3"),
            ("broken", "fault-malformed", "taxi/state2"),
        ):
            run_eval(
                select_tasks(tasks), base / name, agent="openai-chat",
                agent_kwargs={"endpoint": srv.openai_base_url, "model": model, **FAST},
                options=RunOptions(workers=1, progress=False),
            )  # fmt: skip
    return base


def _fresh(runs, name, tmp_path):
    import shutil

    shutil.copytree(runs / name, tmp_path / name)
    return tmp_path / name


def _audit(run_dir: Path, srv: BaselineServer, model: str, **kw):
    return audit_run(
        run_dir, "openai-chat", {"endpoint": srv.openai_base_url, "model": model, **FAST}, **kw
    )


def test_valid_verdicts_are_recorded_per_episode_and_the_evidence_is_whole(runs, tmp_path):
    run = _fresh(runs, "expert", tmp_path)
    with BaselineServer(record_bodies=True) as srv:
        s = _audit(run, srv, "auditor-valid")
        bodies = [r["body"] for r in srv.requests if r.get("n_images")]
    assert s.episodes == 2 and s.audited == 2 and s.statuses == {"valid": 4}
    assert s.verdict_retries == 0 and not s.refused
    audits = load_audits(run)
    assert sorted(audits) == ["cliffwalking__base__r0", "cliffwalking__ledge-3__r0"]
    for rec in audits.values():
        for criterion in ("information_transfer", "failure_attribution"):
            got = rec["criteria"][criterion]
            assert got["status"] == "valid" and len(got["attempts"]) == 1
        # a perfect episode: the valid auditor never names a failure stage
        stage = rec["criteria"]["failure_attribution"]["verdict"]["player_failure_stage"]
        assert stage["label"] == "none"
    # two requests per episode (one per criterion), each carrying every image the acting
    # model was sent plus the regenerated last frame, and nothing naming the acting setup
    assert len(bodies) == 4
    for body in bodies:
        text = json.dumps(body)
        assert srv.openai_base_url not in text and "openai-chat" not in text
        assert '"audit_context' in text
    log = (run / "episodes" / "cliffwalking__base__r0" / "log.jsonl").read_text()
    sent = [p for line in log.splitlines() for m in json.loads(line).get("append", [])
            for p in m["content"] if p["type"] == "image"]  # fmt: skip
    first = [r for r in srv.requests if r.get("n_images")][:2]  # cliffwalking/base: audited first
    assert all(r["n_images"] == len(sent) + 1 for r in first)


def test_malformed_verdicts_are_retried_then_recorded_as_invalid_never_guessed(runs, tmp_path):
    run = _fresh(runs, "expert", tmp_path)
    with BaselineServer(auditor="malformed") as srv:
        s = _audit(run, srv, "judge", verdict_retries=2)
    assert s.statuses == {"invalid": 4}
    assert s.verdict_retries == 8 and sum(s.refused.values()) == 12
    assert set(s.refused) <= {"not_json", "schema", "label", "empty_justification"}
    for rec in load_audits(run).values():
        for got in rec["criteria"].values():
            assert got["status"] == "invalid" and got["verdict"] is None
            assert len(got["attempts"]) == 3
            assert all(a["refused"]["reason"] for a in got["attempts"])
    from vical.audit.tables import run_audit

    t = run_audit(run)
    assert t.rule == {"successful": None, "unsuccessful": None}
    assert set(t.stages.values()) == {None}
    assert t.coverage["failure_attribution"] == {"invalid": 2}
    # a second audit does not ask again: invalid is a final result
    with BaselineServer() as srv:
        again = _audit(run, srv, "auditor-valid")
    assert again.skipped == 2 and again.audited == 0


def test_concurrent_audits_give_the_same_records_as_one_at_a_time(runs, tmp_path):
    one = _fresh(runs, "expert", tmp_path / "one")
    two = _fresh(runs, "expert", tmp_path / "two")
    with BaselineServer(auditor="mixed", seed=2) as srv:
        a = _audit(one, srv, "judge")
        b = _audit(two, srv, "judge", workers=2)
    assert a.statuses == b.statuses and a.refused == b.refused and b.audited == 2

    def kept(run):
        return {e: {c: (v["status"], v["verdict"], len(v["attempts"]))
                    for c, v in rec["criteria"].items()}
                for e, rec in load_audits(run).items()}  # fmt: skip

    assert kept(one) == kept(two)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        _audit(one, srv, "judge", workers=0)


def test_contradictory_verdicts_are_refused_on_both_kinds_of_episode(runs, tmp_path):
    expert = _fresh(runs, "expert", tmp_path)
    broken = _fresh(runs, "broken", tmp_path)
    with BaselineServer() as srv:
        a = _audit(expert, srv, "auditor-contradictory", verdict_retries=1)
        b = _audit(broken, srv, "auditor-contradictory", verdict_retries=1)
    assert a.refused == {"contradiction": 4} and b.refused == {"contradiction": 2}
    rec = load_audits(broken)["taxi__state2__r0"]["criteria"]
    assert rec["information_transfer"]["status"] == "valid"  # transfer cannot contradict
    att = rec["failure_attribution"]
    assert att["status"] == "invalid" and att["verdict"] is None
    assert "no legal action" in att["attempts"][0]["refused"]["reason"]
    # the valid auditor names a failure stage for the episode the model ended itself
    with BaselineServer() as srv:
        import shutil

        shutil.rmtree(broken / "audit")
        _audit(broken, srv, "auditor-valid")
    att = load_audits(broken)["taxi__state2__r0"]["criteria"]["failure_attribution"]
    assert att["verdict"]["player_failure_stage"]["label"] != "none"


def test_endpoint_failures_are_not_results_and_the_next_audit_resumes(runs, tmp_path):
    run = _fresh(runs, "expert", tmp_path)
    with BaselineServer(fault_rate=1.0, fault_kinds=("500",)) as srv:
        s = _audit(run, srv, "auditor-valid", max_consecutive_errors=1)
    assert s.stopped_by_breaker and s.audited == 1
    (rec,) = load_audits(run).values()
    got = rec["criteria"]["information_transfer"]
    assert got["status"] == "api_error" and len(got["api_errors"]) == 4  # 1 + 3 transport retries
    with BaselineServer() as srv:
        s = _audit(run, srv, "auditor-valid")
    assert s.audited == 2 and s.statuses == {"valid": 4}
    # an episode re-run since its audit is audited afresh
    result = run / "episodes" / "cliffwalking__base__r0" / "eval_result.json"
    result.write_text(result.read_text().replace('"wall_seconds": ', '"wall_seconds": 1'))
    with BaselineServer() as srv:
        s = _audit(run, srv, "auditor-valid")
    assert s.audited == 1 and s.skipped == 1


def test_the_random_agent_cannot_be_an_auditor_and_its_runs_cannot_be_audited(runs, tmp_path):
    from vical.errors import AgentConfigError, RunFolderError
    from vical.run import RunOptions, run_eval
    from vical.spec import select_tasks

    with pytest.raises(AgentConfigError, match="needs a model backend"):
        audit_run(runs / "expert", "random", {})
    rnd = tmp_path / "rnd"
    run_eval(select_tasks("taxi/state1"), rnd, options=RunOptions(workers=1, progress=False))
    with BaselineServer() as srv, pytest.raises(RunFolderError, match="random agent"):
        _audit(rnd, srv, "auditor-valid")


# -- tables ------------------------------------------------------------------------


def test_rates_are_macro_averaged_over_environments_and_figure4_follows_its_formula():
    from vical.audit.tables import EpisodeLabels, joint_table

    def ep(env, rule, strategy, stage):
        return EpisodeLabels(episode=f"{env}{rule}{stage}", env=env, task_id=f"{env}/x",
                             rule=rule, strategy=strategy, stage=stage)  # fmt: skip

    labels = [
        ep("a", "successful", "correct", "none"),
        ep("a", "successful", "underfit", "none"),
        ep("a", "unsuccessful", "overfit", "planning"),
        ep("b", "successful", "underfit", "planning"),
        ep("c", "unsuccessful", None, None),  # no valid attribution: left out of Figure 4
    ]
    cells, denominators = joint_table(labels)
    # rule successful: env a 2/2 none, env b 1/1 planning -> 50 / 50 over 2 envs, 3 episodes
    assert cells["rule successful"]["none"] == 50.0 and cells["rule successful"]["planning"] == 50.0
    assert denominators["rule successful"] == (2, 3)
    assert cells["rule unsuccessful"]["planning"] == 100.0
    assert denominators["rule unsuccessful"] == (1, 1)
    # strategy unsuccessful: env a {none, planning} -> 50/50, env b {planning} -> 100
    assert cells["strategy unsuccessful"]["planning"] == 75.0
    assert cells["strategy unsuccessful"]["none"] == 25.0
    assert cells["strategy successful"] == {
        "knowledge_induction": 0.0, "state_grounding": 0.0, "planning": 0.0,
        "action_commitment": 0.0, "none": 100.0,
    }  # fmt: skip


def test_audit_report_prints_tables_3_and_4(runs, tmp_path):
    from typer.testing import CliRunner

    from vical.cli import app

    run = _fresh(runs, "expert", tmp_path)
    broken = _fresh(runs, "broken", tmp_path)
    with BaselineServer() as srv:
        _audit(run, srv, "auditor-valid")
        _audit(broken, srv, "auditor-valid")
    res = CliRunner().invoke(app, ["audit", str(run), "--report", "--out", str(tmp_path / "t")])
    assert res.exit_code == 0, res.output
    assert "Table 3: information transfer" in res.output
    assert "| expert (expert) | 100.0 | 100 |" in res.output
    assert "none 0" not in res.output and "valid 2 (of 2 episodes)" in res.output
    data = json.loads((tmp_path / "t" / "audit_tables.json").read_text())
    assert data["runs"][0]["failure_attribution"]["none"] == 100.0
    res = CliRunner().invoke(app, ["audit", "report", str(run), str(broken)])
    assert res.exit_code == 0, res.output
    assert "| broken (fault-malformed) | 0.0 | 0 |" in res.output
    assert "rule successful |" in res.output and "Table 15" in res.output
    res = CliRunner().invoke(app, ["audit", str(run)])
    assert res.exit_code == 2 and "--backend is required" in res.output
    # the whole command against a server answering malformed, valid and contradictory
    # verdicts at random: every refused reply is counted, the tables come out
    fresh = _fresh(runs, "expert", tmp_path / "cli")
    with BaselineServer(auditor="mixed", seed=4) as srv:
        args = ["audit", str(fresh), "--backend", "openai-chat", "--endpoint",
                srv.openai_base_url, "--model", "judge", "--verdict-retries", "1"]  # fmt: skip
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        assert "2 episode(s) audited, 0 already done, of 2" in res.output
        assert "refused replies: " in res.output and "Table 4" in res.output
        statuses = [
            c["status"] for rec in load_audits(fresh).values() for c in rec["criteria"].values()
        ]
        assert len(statuses) == 4 and set(statuses) <= {"valid", "invalid"}
        res = CliRunner().invoke(app, args)
        assert "0 episode(s) audited, 2 already done" in res.output


def test_demonstration_videos_reach_an_image_only_auditor_as_their_frames(tmp_path):
    from vical.demos import load_demo_package
    from vical.run import RunOptions, run_eval
    from vical.spec import get_task, select_tasks

    run = tmp_path / "video"
    with BaselineServer(record_bodies=True) as srv:
        kw = {"endpoint": srv.openai_base_url, **FAST}
        run_eval(select_tasks("cliffwalking/base"), run, agent="openrouter",
                 agent_kwargs={**kw, "model": "first"},
                 options=RunOptions(workers=1, progress=False))  # fmt: skip
        acted = [r for r in srv.requests if r.get("n_videos")]
        srv.requests.clear()
        _audit(run, srv, "auditor-valid")  # openai-chat: images only
        as_frames = [r for r in srv.requests if r.get("n_images")]
        srv.requests.clear()
        audit_run(run, "openrouter", {**kw, "model": "auditor-valid"})  # nothing left to do
        assert not [r for r in srv.requests if r.get("n_images")]  # the preflight only
        import shutil

        shutil.rmtree(run / "audit")
        audit_run(run, "openrouter", {**kw, "model": "auditor-valid"})  # video-capable
        as_videos = [r for r in srv.requests if r.get("n_videos")]
    demos = load_demo_package(get_task("cliffwalking/base"))
    live = acted[-1]["n_images"]  # every live frame the model was sent (videos aside)
    assert acted and acted[0]["n_videos"] == len(demos)
    frames = sum(len(d.frames_jpeg) for d in demos)
    assert len(as_frames) == 2 and all(r["n_videos"] == 0 for r in as_frames)
    assert all(r["n_images"] == live + frames + 1 for r in as_frames)
    assert len(as_videos) == 2 and all(r["n_videos"] == len(demos) for r in as_videos)
    assert all(r["n_images"] == live + 1 for r in as_videos)


def test_evidence_names_a_missing_or_altered_media_file(runs, tmp_path):
    """The evidence is read through the replay's media reader; a file gone from an
    episode's media/ or changed after the run is a run-folder error naming the folder."""
    from vical.audit.evidence import load_evidence
    from vical.errors import RunFolderError

    run = _fresh(runs, "expert", tmp_path)
    folder = run / "episodes" / "cliffwalking__base__r0"
    assert load_evidence(folder).media  # whole as written
    first = sorted((folder / "media").iterdir())[0]
    first.write_bytes(first.read_bytes() + b"x")
    with pytest.raises(RunFolderError, match="does not match its sha256") as e:
        load_evidence(folder)
    assert str(folder) in str(e.value)
    first.unlink()
    with pytest.raises(RunFolderError, match=f"{first.stem} is missing"):
        load_evidence(folder)
