"""Human-auditor agreement: known answers on hand-built labels, then the command on files."""

from __future__ import annotations

import json

import pytest

from vical.audit.agreement import Pair, agreement_report, judgments, render_markdown


def pair(env, human, auditor, run="m1", case="c"):
    return Pair(case=case, run=run, env=env, human=judgments(*human), auditor=judgments(*auditor))


S, U = "successful", "unsuccessful"


def test_agreement_kappa_and_confusion_have_the_known_values():
    pairs = [
        # env a: every judgment agrees on both cases
        pair("a", (S, "correct", "none"), (S, "correct", "none")),
        pair("a", (U, "underfit", "planning"), (U, "underfit", "planning")),
        # env b: the rule differs on both; strategy overfit vs underfit (binary agrees);
        # the stage differs on one
        pair("b", (U, "overfit", "state_grounding"), (S, "underfit", "state_grounding"), run="m2"),
        pair("b", (U, "overfit", "knowledge_induction"), (S, "underfit", "planning"), run="m2"),
    ]
    r = agreement_report(pairs, resamples=2000, seed=1)
    rule = r["judgments"]["rule_transfer"]
    assert (rule["matches"], rule["n"], rule["agreement"]) == (2, 4, 50.0)
    # person: S,U,U,U / auditor: S,U,S,S -> po = 0.5, pe = .25*.75 + .75*.25 = .375
    assert rule["kappa"] == pytest.approx((0.5 - 0.375) / (1 - 0.375))
    # two environments, one agreeing fully and one not at all: resampling two of them
    # gives 0, 0.5 or 1, so the 95% interval spans 0-100
    assert (rule["ci_low"], rule["ci_high"]) == (0.0, 100.0)
    assert r["judgments"]["strategy_three_way"]["agreement"] == 50.0
    binary = r["judgments"]["strategy_binary"]
    assert binary["agreement"] == 100.0 and (binary["ci_low"], binary["ci_high"]) == (100.0, 100.0)
    assert binary["kappa"] == pytest.approx(1.0)
    assert r["judgments"]["stage_attribution"]["matches"] == 3
    assert r["by_run"]["m1"]["rule_transfer"] == 100.0 and r["by_run"]["m2"]["rule_transfer"] == 0
    m = r["strategy_confusion"]  # rows: person, columns: auditor
    assert m["labels"] == ["correct", "underfit", "overfit"]
    assert m["rows"] == [[1, 0, 0], [0, 1, 0], [0, 2, 0]]
    assert m["row_totals"] == [1, 1, 2] and m["column_totals"] == [1, 3, 0]
    stages = r["stage_confusion"]
    ki = stages["labels"].index("knowledge_induction")
    assert stages["rows"][ki][stages["labels"].index("planning")] == 1
    assert r["pooled_primary"] == {"matches": 2 + 4 + 3, "n": 12}
    assert r["all_primary_agree"] == {"matches": 2, "n": 4}
    text = render_markdown(r)
    assert "| Rule transfer | 2/4 | 50.0% | 0.0–100.0% | 0.200 |" in text
    assert "Table 13" in text and "Table 14" in text


def test_the_interval_is_seeded_clustered_and_kappa_undefined_is_shown_as_such():
    pairs = [pair(f"e{i % 5}", (S, "correct", "none"), (S if i % 3 else U, "correct", "none"),
                  case=str(i)) for i in range(15)]  # fmt: skip
    a = agreement_report(pairs, resamples=500, seed=7)
    assert a == agreement_report(pairs, resamples=500, seed=7)
    rule = a["judgments"]["rule_transfer"]
    assert rule["agreement"] == pytest.approx(100 * 10 / 15)
    # every environment holds exactly one disagreement in three cases, so any resample of
    # whole environments agrees on 2/3: a clustered interval has no width (a case-level
    # bootstrap would have)
    assert rule["ci_low"] == pytest.approx(rule["agreement"]) == pytest.approx(rule["ci_high"])
    uneven = agreement_report([*pairs, pair("e9", (S, "correct", "none"), (U, "correct", "none"))],
                              resamples=500, seed=7)  # fmt: skip
    r9 = uneven["judgments"]["rule_transfer"]
    assert r9["ci_low"] < r9["agreement"] < r9["ci_high"]
    # the person always says successful: kappa is 0 (the auditor's extra labels are chance)
    assert rule["kappa"] == pytest.approx(0.0)
    # both always "correct": chance agreement is 1 and kappa is undefined, never invented
    assert a["judgments"]["strategy_three_way"]["kappa"] is None
    assert "| Strategy transfer (three-way) | 15/15 | 100.0% |" in render_markdown(a)
    with pytest.raises(ValueError, match="no labelled case"):
        agreement_report([])


def test_the_agreement_command_reads_the_sample_the_labels_and_the_audits(tmp_path):
    from typer.testing import CliRunner

    from vical.audit.label import sample_sha256
    from vical.cli import app

    run = tmp_path / "run"
    verdicts = {
        "a__x__r0": ("successful", "correct", "none"),
        "b__y__r0": ("unsuccessful", "underfit", "planning"),
    }
    for episode, (rule, strategy, stage) in verdicts.items():
        rec = {"criteria": {
            "information_transfer": {"status": "valid", "verdict": {
                "rule_transfer": {"label": rule, "justification": "j"},
                "strategy_transfer": {"label": strategy, "justification": "j"}}},
            "failure_attribution": {"status": "valid", "verdict": {
                "player_failure_stage": {"label": stage, "justification": "j"}}},
        }}  # fmt: skip
        (run / "audit").mkdir(parents=True, exist_ok=True)
        (run / "audit" / f"{episode}.json").write_text(json.dumps(rec))
    sample = {"schema_version": 1, "seed": 0, "per_env": 1, "runs": [str(run)], "cases": [
        {"case": "c1", "run": 0, "episode": "a__x__r0", "env": "a", "task_id": "a/x"},
        {"case": "c2", "run": 0, "episode": "b__y__r0", "env": "b", "task_id": "b/y"},
        {"case": "c3", "run": 0, "episode": "b__y__r0", "env": "b", "task_id": "b/y"},
    ]}  # fmt: skip
    sample_path = tmp_path / "sample.json"
    sample_path.write_text(json.dumps(sample))
    labels = {
        "schema_version": 1,
        "sample_sha256": sample_sha256(sample_path),
        "labels": {
            "c1": {
                "rule_transfer": "successful",
                "strategy_transfer": "correct",
                "player_failure_stage": "none",
            },
            "c2": {
                "rule_transfer": "successful",
                "strategy_transfer": "underfit",
                "player_failure_stage": "planning",
            },
        },
    }  # fmt: skip  (c3 is not labelled yet: left out)
    labels_path = tmp_path / "labels.json"
    labels_path.write_text(json.dumps(labels))
    out = tmp_path / "agreement.json"
    res = CliRunner().invoke(
        app, ["audit", "agreement", str(sample_path), str(labels_path), "--resamples", "200",
              "--json", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "| Rule transfer | 1/2 | 50.0% |" in res.output
    assert "| Stage attribution | 2/2 | 100.0% |" in res.output
    data = json.loads(out.read_text())
    assert data["n"] == 2 and data["resamples"] == 200
    # a verdict that is no longer valid is an error, not a dropped case
    (run / "audit" / "a__x__r0.json").write_text(json.dumps({"criteria": {}}))
    res = CliRunner().invoke(app, ["audit", "agreement", str(sample_path), str(labels_path)])
    assert res.exit_code != 0 and "draw a new sample" in res.output
    # a label outside its set is refused with the allowed values
    labels["labels"]["c1"]["player_failure_stage"] = "vibes"
    labels_path.write_text(json.dumps(labels))
    res = CliRunner().invoke(app, ["audit", "agreement", str(sample_path), str(labels_path)])
    assert res.exit_code != 0 and "player_failure_stage is 'vibes'" in res.output
