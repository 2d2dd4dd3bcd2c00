"""The adversarial reference models, opaque request ids and held-out cases."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from vical.cli import app
from vical.wm.cases import (
    HELD_OUT_FILE,
    NO_ACTION,
    Scenario,
    _origins,
    build,
    build_scenario,
    is_held_out,
    load_cases,
    write_cases,
)
from vical.wm.evaluate import evaluate

runner = CliRunner()


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    """Two Freeway contexts (a NOOP, a real-time world) and one Taxi context (no NOOP)."""
    out = tmp_path_factory.mktemp("wm-ref-cases")
    cases = build_scenario(Scenario("t-freeway", "", ("freeway",)), out, contexts=2)
    cases += build_scenario(Scenario("t-taxi", "", ("taxi",)), out, contexts=1)
    write_cases(out, cases)
    return out


BLIND = ("fixed-action", "all-action-average", "context-mean", "blurred-copy-last")


@pytest.fixture(scope="module")
def summaries(cases_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("wm-ref-runs")
    names = (*BLIND, "other-case", "blurred-truth", "copy-last", "simulator")
    return {m: evaluate(m, cases_dir, root / m) for m in names}


@pytest.mark.parametrize("model", BLIND)
def test_action_blind_references_score_at_most_zero_and_are_flagged(summaries, model):
    s = summaries[model]
    assert s["index"]["action_skill"]["mean"] == 0.0
    for sc in s["scenarios"].values():
        assert sc["action_skill"]["mean"] == 0.0
    assert s["index"]["response"]["mean"] == 0.0 and "ignores the action" in s["flag"]


def test_fixed_action_still_climbs_a_pooled_error_skill(summaries):
    """Why the index is the action part: on the whole future the simulator under a
    fixed action beats persistence (Freeway's cars move whatever the chicken does)."""
    assert summaries["fixed-action"]["scenarios"]["t-freeway"]["mse_skill"]["mean"] > 0.0


def test_blurred_truth_scores_above_every_action_blind_model(summaries):
    top = summaries["blurred-truth"]
    assert top["flag"] is None and top["index"]["response"]["mean"] == 100.0
    for sc in top["scenarios"].values():
        assert sc["action_skill"]["mean"] > 0.0
    for m in BLIND:
        assert top["index"]["action_skill"]["mean"] > summaries[m]["index"]["action_skill"]["mean"]
    assert summaries["simulator"]["index"]["action_skill"]["mean"] == 100.0
    assert summaries["copy-last"]["index"]["action_skill"]["mean"] == 0.0


def test_another_cases_truth_is_worse_than_persistence_on_the_action(summaries, cases_dir):
    s = summaries["other-case"]
    assert s["scenarios"]["t-freeway"]["action_skill"]["mean"] < 0.0
    assert s["index"]["action_skill"]["mean"] < 0.0


def test_reference_models_predict_what_they_say(cases_dir):
    from vical.wm.cases import load_frames
    from vical.wm.evaluate import request_for
    from vical.wm.models import blur, get_wm

    cases = load_cases(cases_dir)
    case = cases[0]
    req = request_for(case, cases_dir)
    truth = load_frames(cases_dir, case.truth_frames)
    got = get_wm("blurred-truth").predict(req, case)
    assert all(np.array_equal(g, blur(t)) for g, t in zip(got, truth, strict=True))
    mean = get_wm("context-mean").predict(req, case)[0]
    want = np.rint(np.mean([f.astype(float) for f in req.context], axis=0))
    assert np.array_equal(mean, want.astype(np.uint8))
    other = get_wm("other-case", cases=cases, folder=cases_dir).predict(req, case)
    assert all(
        np.array_equal(a, b)
        for a, b in zip(other, load_frames(cases_dir, cases[5].truth_frames), strict=True)
    )


def test_requests_name_cases_by_opaque_ids_fresh_per_evaluation(cases_dir, tmp_path):
    from vical.wm.models import WorldModel

    seen: list[list[str]] = [[], []]

    class Spy(WorldModel):
        def __init__(self, log):
            self.log = log

        def predict(self, request, case):
            self.log.append(request.case)
            return [request.context[-1] for _ in request.intervention]

    a = evaluate(Spy(seen[0]), cases_dir, tmp_path / "a", ["t-taxi"])
    b = evaluate(Spy(seen[1]), cases_dir, tmp_path / "b", ["t-taxi"])
    assert a["index"] == b["index"]
    assert len(seen[0]) == len(set(seen[0])) == 5
    assert not set(seen[0]) & set(seen[1])  # fresh for every evaluation
    for i in seen[0]:
        assert len(i) == 16 and "taxi" not in i and "/" not in i


def test_the_protocol_accepts_the_no_action_name():
    from vical.wm.cases import Request
    from vical.wm.protocol import ProtocolError, parse_request, request_body

    frame = np.zeros((4, 4, 3), np.uint8)
    req = Request("x", "taxi", ["Up"], [frame], [], [NO_ACTION, NO_ACTION])
    assert parse_request(request_body(req)).intervention == [NO_ACTION, NO_ACTION]
    bad = Request("x", "taxi", ["Up"], [frame], [], ["Jump"])
    with pytest.raises(ProtocolError, match="not in the vocabulary"):
        parse_request(request_body(bad))


def test_held_out_cases_build_score_and_are_not_published(tmp_path):
    """`vical wm build --private-seed`: cases from states the published set never uses,
    their frames not among the published ones, the same bytes for the same seed, the
    folder marked without the seed, scored like any other, refused by the dataset."""
    res = runner.invoke(
        app,
        ["wm", "build", "-o", str(tmp_path / "held"), "-s", "grid-navigation", "--contexts", "1",
         "--private-seed", "s3cret", "-j", "1"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "5 held-out cases" in res.output
    held = tmp_path / "held"
    assert is_held_out(held)
    marker = json.loads((held / HELD_OUT_FILE).read_text())
    assert "s3cret" not in json.dumps(marker) and marker["held_out"] is True
    cases = load_cases(held)
    public = {o for env in ("taxi", "cliffwalking") for o in _origins(env)}
    assert cases and all(c.origin not in public for c in cases)
    published = build(tmp_path / "pub", ["grid-navigation"], contexts=2)
    pub_frames = {h for c in published for h in c.truth_sha256 + c.context_sha256}
    assert not {h for c in cases for h in c.truth_sha256} & pub_frames
    again = build(tmp_path / "again", ["grid-navigation"], contexts=1, private_seed="s3cret")
    assert [c.model_dump() for c in again] == [c.model_dump() for c in cases]
    other = build(tmp_path / "other", ["grid-navigation"], contexts=1, private_seed="other")
    assert [c.origin for c in other] != [c.origin for c in cases]
    summary = evaluate("simulator", held, tmp_path / "run")
    assert summary["index"]["action_skill"]["mean"] == 100.0
    res = runner.invoke(
        app, ["dataset", "build", "-o", str(tmp_path / "ds"), "--wm-cases", str(held)]
    )
    assert res.exit_code != 0 and "held-out" in res.output
