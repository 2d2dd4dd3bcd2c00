"""Scoring against the simulator's truth, the four controls, and re-scoring."""

import json

import numpy as np
import pytest
from conftest import build_wm_cases

from vical.wm.evaluate import SCORES, evaluate, rescore
from vical.wm.report import report_markdown
from vical.wm.score import CaseScore, score_case, spec_on_pixels, summarize


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    """Two contexts of small-framed games: Breakout (exact read-back), Freeway (pixel checks)."""
    return build_wm_cases(tmp_path_factory.mktemp("wm-cases"), ("breakout", "freeway"))


@pytest.fixture(scope="module")
def runs(cases_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("wm-runs")
    return {
        m: (root / m, evaluate(m, cases_dir, root / m))
        for m in ("simulator", "copy-last", "noop", "shuffled")
    }


def test_simulator_is_the_ceiling(runs):
    summary = runs["simulator"][1]
    for part in ("score", "fidelity", "counterfactual", "spec"):
        assert summary["index"][part]["mean"] == 100.0
    scores = [json.loads(x) for x in (runs["simulator"][0] / SCORES).read_text().splitlines()]
    assert len(scores) == 10 and all(s["score"] == 100.0 for s in scores)


def test_action_blind_controls_win_at_most_one_branch_per_context(runs):
    for m in ("copy-last", "noop"):
        summary = runs[m][1]
        assert summary["index"]["counterfactual"]["mean"] <= 20.0
        assert summary["index"]["score"]["mean"] < 100.0


def test_shuffled_control_never_wins_its_own_branch(runs):
    # it predicts another branch's truth exactly, so it is always closer to that one
    assert runs["shuffled"][1]["index"]["counterfactual"]["mean"] == 0.0


def test_rescore_rederives_and_catches_tampering(runs, cases_dir):
    run = runs["copy-last"][0]
    assert rescore(run, cases_dir) == []
    lines = (run / SCORES).read_text().splitlines()
    first = json.loads(lines[0])
    first["score"] = 99.0
    (run / SCORES).write_text("\n".join([json.dumps(first, sort_keys=True), *lines[1:]]) + "\n")
    problems = rescore(run, cases_dir)
    assert problems and first["case"] in problems[0]


def test_report_lists_every_run_per_scenario(runs):
    text = report_markdown([runs[m][0] for m in ("simulator", "copy-last")])
    assert "## t-breakout" in text and "## t-freeway" in text
    assert "| simulator (control) | 100.0 [100.0, 100.0]" in text


def test_wrong_frame_count_or_size_scores_zero(cases_dir):
    from vical.wm.cases import load_cases, load_frames

    case = load_cases(cases_dir)[6]  # a Freeway case
    truth = load_frames(cases_dir, case.truth_frames)
    last = load_frames(cases_dir, case.context_frames[-1:])[0]
    s = score_case(case, last, truth, truth[:-1], [])
    assert s.fidelity == 0.0 and s.counterfactual == 0.0
    small = [f[:-2] for f in truth]
    s = score_case(case, last, truth, small, [])
    assert s.fidelity == 0.0 and s.spec == 0.0


def test_pixel_checks():
    ctx = np.zeros((8, 8, 3), np.uint8)
    final = ctx.copy()
    final[0, 0] = 200
    assert spec_on_pixels(ctx, [final], final) == (1.0, 1.0)
    assert spec_on_pixels(ctx, [final], ctx) == (0.0, 1.0)
    wrong = ctx.copy()
    wrong[7, 7] = 100
    r, p = spec_on_pixels(ctx, [final], wrong)
    assert r == 0.0 and p == pytest.approx(62 / 63)


def test_bootstrap_resamples_environments():
    def cs(env, v):
        return CaseScore(
            case=f"{env}{v}",
            scenario="s",
            env=env,
            score=v,
            fidelity=v,
            counterfactual=v,
            spec=v,
            required=None,
            protected=1.0,
            psnr=0.0,
            exact=False,
        )

    summary = summarize([cs("a", 0.0), cs("a", 0.0), cs("b", 100.0)], samples=200)
    entry = summary["scenarios"]["s"]["score"]
    assert entry["mean"] == pytest.approx(33.333, abs=1e-3)
    assert entry["ci95"][0] == 0.0 and entry["ci95"][1] == 100.0


def test_a_world_model_class_outside_vical(cases_dir, tmp_path, monkeypatch):
    """`--wm package.module:Class` loads a WorldModel subclass; anything else is refused."""
    from vical.wm.models import get_wm

    (tmp_path / "my_wm.py").write_text(
        "from vical.wm.models import WorldModel\n"
        "class Still(WorldModel):\n"
        "    def predict(self, request, case):\n"
        "        return [request.context[-1] for _ in request.intervention]\n"
        "class NotOne:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = evaluate("my_wm:Still", cases_dir, tmp_path / "run")
    assert summary["model"] == "my_wm:Still"
    assert summary["index"]["counterfactual"]["mean"] <= 20.0
    with pytest.raises(KeyError, match=r"not a vical\.wm\.models\.WorldModel subclass"):
        get_wm("my_wm:NotOne")
    with pytest.raises(KeyError, match="cannot be loaded"):
        get_wm("no_such_module_here:X")
