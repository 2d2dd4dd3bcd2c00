"""Scoring against the simulator's truth, the controls and their targets, and re-scoring."""

import json

import numpy as np
import pytest
from conftest import build_wm_cases

from vical.wm.evaluate import SCORES, evaluate, rescore
from vical.wm.report import report_markdown
from vical.wm.score import CaseScore, score_case, spec_on_pixels, summarize


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    """Three contexts: Breakout (exact read-back), Freeway (pixel checks), Taxi (no NOOP)."""
    return build_wm_cases(tmp_path_factory.mktemp("wm-cases"), ("breakout", "freeway", "taxi"))


RUNS = {
    "simulator": ("simulator", "own"),
    "copy-last": ("copy-last", "own"),
    "branch-swap": ("branch-swap", "own"),
    "copy-last/noop": ("copy-last", "noop"),
    "simulator/noop": ("simulator", "noop"),
    "copy-last/shuffled": ("copy-last", "shuffled"),
    "simulator/shuffled": ("simulator", "shuffled"),
}


@pytest.fixture(scope="module")
def runs(cases_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("wm-runs")
    out = {}
    for key, (model, control) in RUNS.items():
        run = root / key.replace("/", "-")
        out[key] = (run, evaluate(model, cases_dir, run, control=control))
    return out


def _scores(run):
    return [json.loads(x) for x in (run / SCORES).read_text().splitlines()]


def test_simulator_is_the_ceiling(runs):
    summary = runs["simulator"][1]
    for part in ("score", "fidelity", "counterfactual", "spec", "action_skill"):
        assert summary["index"][part]["mean"] == 100.0
    assert summary["index"]["mse_skill"]["mean"] == 100.0
    scores = _scores(runs["simulator"][0])
    assert len(scores) == 15 and all(s["score"] == 100.0 for s in scores)
    assert summary["flag"] is None and summary["index"]["response"]["mean"] == 100.0


def test_skill_is_zero_for_copy_last_and_100_for_the_simulator(runs):
    """Under every intervention, per scenario and in the index, by construction."""
    for control in ("", "/noop", "/shuffled"):
        for model, want in (("copy-last", 0.0), ("simulator", 100.0)):
            summary = runs[model + control][1]
            parts = ("mse_skill",) if control else ("mse_skill", "action_skill")
            for part in parts:
                assert summary["index"][part]["mean"] == want, (model, control, part)
                # one environment a scenario: no degrees of freedom, so no interval
                assert summary["index"][part]["ci95"] == [None, None]
                for sc in summary["scenarios"].values():
                    # None: the target is the context frame (Taxi left alone), nothing to predict
                    assert sc[part]["mean"] in (want, None)


def _cs(env, v, err=0.0, base=1.0, act=(0.0, 1.0), pairs=(0, 0), scenario="s"):
    return CaseScore(
        case=f"{env}{v}{err}{act}",
        scenario=scenario,
        env=env,
        score=v,
        fidelity=v,
        counterfactual=v,
        spec=v,
        required=None,
        protected=1.0,
        psnr=0.0,
        exact=False,
        se=err,
        se_copy=base,
        act_err=act[0],
        act_var=act[1],
        pairs=pairs[0],
        moved=pairs[1],
    )


def test_skills_pool_errors_before_the_ratio():
    """A nearly static case (tiny copy-last error) cannot swing the skill: the errors
    are summed over the cases first. A mean of per-case ratios would give -4950 here."""
    cases = [_cs("a", 0, err=1.0, base=0.01), _cs("a", 0, err=10.0, base=100.0)]
    entry = summarize(cases)["scenarios"]["s"]["mse_skill"]
    assert entry["mean"] == pytest.approx(100 * (1 - 11.0 / 100.01), abs=1e-3)
    cases = [_cs("a", 0, err=10.0, base=100.0, act=(3.0, 4.0))]
    entry = summarize(cases)["scenarios"]["s"]
    assert entry["action_skill"]["mean"] == 25.0 and entry["mse_skill"]["mean"] == 90.0


def test_an_action_blind_model_scores_zero_on_the_action_skill_by_construction():
    """Whatever one frame it predicts for every branch, its branch deviations are 0, so
    its error on them is exactly the truth's deviations' size."""
    from vical.wm.score import branch_deviations

    rng = np.random.default_rng(3)
    truths = [[rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(2)] for _ in range(5)]
    blind = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(2)]
    devs = branch_deviations(truths, [blind] * 5)
    assert all(e == pytest.approx(v) and v > 0 for e, v in devs)
    perfect = branch_deviations(truths, truths)
    assert all(e == 0.0 for e, _ in perfect)
    # a constant shift of every branch changes nothing in the deviations
    shifted = [[np.clip(f.astype(int) // 2, 0, 255).astype(np.uint8) for f in t] for t in truths]
    assert sum(e for e, _ in branch_deviations(truths, shifted)) > 0


def test_jackknife_interval_over_few_environments():
    """Scenario rows give the environments' range, the index a jackknife t interval on
    (environments - scenarios) degrees of freedom."""
    cases = [
        _cs("a", 0, err=0.0, base=1.0),
        _cs("b", 0, err=1.0, base=1.0),
        _cs("c", 0, err=0.5, base=1.0, scenario="t"),
        _cs("d", 0, err=0.5, base=1.0, scenario="t"),
    ]
    summary = summarize(cases)
    sc = summary["scenarios"]["s"]["mse_skill"]
    assert sc["mean"] == 50.0 and sc["range"] == [0.0, 100.0] and "ci95" not in sc
    idx = summary["index"]["mse_skill"]
    assert idx["mean"] == 50.0
    assert summary["interval"]["df"] == 2
    # jackknife: replicates of scenario s are 100 and 0 (index 75, 25), variance 1/2 * 2 * 25^2
    from scipy.stats import t

    half = t.ppf(0.975, 2) * 25.0
    assert idx["ci95"] == [pytest.approx(max(-1e9, 50 - half), abs=1e-3), 100.0]


def test_report_shows_the_index_the_references_and_the_targets(runs):
    text = report_markdown([runs[m][0] for m in RUNS])
    assert "| run | WM index (action skill) | MSE skill | responds (%) | counterfactual |" in text
    assert "SSIM x100 | PSNR dB |" in text
    # one environment a scenario here: no interval (see test_jackknife_interval_...)
    assert "| simulator (control) | 100.0 | 100.0 | 100.0 | 100.0 |" in text
    assert "| copy-last (control) **FLAGGED** | 0.0 | 0.0 | 0.0 |" in text
    assert "## Controls and their targets" in text
    assert "| noop intervention | any model's frames | the simulator left alone" in text
    assert "| shuffled intervention |" in text and "| branch-swap (model) |" in text
    assert "| fixed-action (model) |" in text and "| blurred-truth (model) |" in text
    assert "Scenario rows are descriptive" in text
    assert "copy-last (control), noop intervention **FLAGGED**: scored against" in text


def test_action_blind_control_wins_at_most_one_branch_per_context(runs):
    summary = runs["copy-last"][1]
    assert summary["index"]["counterfactual"]["mean"] <= 20.0
    assert summary["index"]["score"]["mean"] < 100.0


def test_branch_swap_control_never_wins_its_own_branch(runs):
    # it predicts another branch's truth exactly, so it is always closer to that one
    assert runs["branch-swap"][1]["index"]["counterfactual"]["mean"] == 0.0


def test_control_interventions_score_image_metrics_only(runs):
    for key in ("copy-last/noop", "copy-last/shuffled"):
        for s in _scores(runs[key][0]):
            assert s["counterfactual"] is None and s["spec"] is None and s["score"] is None
        assert runs[key][1]["index"]["counterfactual"]["mean"] is None


def test_noop_target_is_the_simulator_left_alone_one_request_a_context(runs, cases_dir):
    """Breakout steps its NOOP; Taxi, which has none, makes the identity transition (the
    context frame held) and is scored too; one case a context is scored."""
    from vical.wm.cases import NO_ACTION, load_cases, load_frames
    from vical.wm.controls import control_target, noop_action
    from vical.wm.evaluate import MANIFEST, load_predictions
    from vical.wm.sim import ContextSim

    run = runs["simulator/noop"][0]
    manifest = json.loads((run / MANIFEST).read_text())
    cases = load_cases(cases_dir)
    breakout, taxi = cases[0], cases[-5]
    assert manifest["cases"] == [cases[0].id, cases[5].id, cases[10].id]
    assert manifest["unavailable"] == {}
    assert noop_action(taxi) is None
    assert manifest["interventions"][taxi.id] == [NO_ACTION] * 4
    ctx = load_frames(cases_dir, taxi.context_frames[-1:])[0]
    held = control_target(taxi, "noop")
    assert all(np.array_equal(f, ctx) for f in held.frames)
    name = noop_action(breakout)
    assert name == "NOOP" and manifest["interventions"][breakout.id] == [name] * 4
    with ContextSim(breakout.origin, snapshot=False) as sim:
        stepped = sim.play_noop(4)
    target = control_target(breakout, "noop")
    assert all(np.array_equal(a, b) for a, b in zip(target.frames, stepped, strict=True))
    # the simulator run predicted exactly that target, and was scored against it
    assert all(
        np.array_equal(a, b) for a, b in zip(load_predictions(run, breakout), stepped, strict=True)
    )
    assert runs["simulator/noop"][1]["cases"] == 3


def test_controls_flag_a_model_whose_predictions_ignore_the_intervention(runs):
    """Each control run also predicts the own interventions: copy-last's predictions do
    not change under the no-op or the shuffled order, and it is flagged; the simulator's
    change wherever the target does, and it is not. Under the own intervention, a model
    that draws the same future for every branch is flagged too."""
    for key in ("copy-last/noop", "copy-last/shuffled", "copy-last"):
        summary = runs[key][1]
        assert summary["index"]["response"]["mean"] == 0.0
        assert summary["flag"] and "ignores the action" in summary["flag"]
    for key in ("simulator/noop", "simulator/shuffled", "simulator", "branch-swap"):
        summary = runs[key][1]
        assert summary["index"]["response"]["mean"] == 100.0 and summary["flag"] is None
    scores = _scores(runs["copy-last/noop"][0])
    assert all(s["pairs"] > 0 and s["moved"] == 0 for s in scores)


def test_shuffled_target_is_the_simulator_on_the_shuffled_order(runs, cases_dir):
    from vical.wm.cases import load_cases, load_frames
    from vical.wm.controls import control_target, shuffled_order
    from vical.wm.evaluate import MANIFEST
    from vical.wm.sim import ContextSim

    manifest = json.loads((runs["simulator/shuffled"][0] / MANIFEST).read_text())
    cases = load_cases(cases_dir)
    mixed = [c for c in cases if len(set(c.intervention)) > 1]
    held = [c for c in cases if len(set(c.intervention)) == 1]
    assert mixed and held
    for c in held:
        assert shuffled_order(c) is None and c.id in manifest["unavailable"]
    case = next(c for c in mixed if c.id in manifest["cases"])
    order = shuffled_order(case)
    assert order != case.intervention and sorted(order) == sorted(case.intervention)
    assert shuffled_order(case) == order  # seeded: the same order every time
    assert manifest["interventions"][case.id] == order
    with ContextSim(case.origin, snapshot=False) as sim:
        stepped = [sim.env.step(a).frame.copy() for a in order]
    target = control_target(case, "shuffled")
    assert all(np.array_equal(a, b) for a, b in zip(target.frames, stepped, strict=True))
    # the own target is the stored truth
    own = control_target(case, "own", cases_dir)
    truth = load_frames(cases_dir, case.truth_frames)
    assert all(np.array_equal(a, b) for a, b in zip(own.frames, truth, strict=True))


def test_control_runs_rescore_and_catch_tampering(runs, cases_dir):
    from vical.wm.evaluate import MANIFEST

    run = runs["copy-last/shuffled"][0]
    assert rescore(run, cases_dir) == []
    path = run / MANIFEST
    manifest = json.loads(path.read_text())
    cid = manifest["cases"][0]
    manifest["interventions"][cid] = list(reversed(manifest["interventions"][cid]))
    path.write_text(json.dumps(manifest))
    assert any(cid in p for p in rescore(run, cases_dir))


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
    assert "## t-breakout" in text and "## t-freeway" in text and "## t-taxi" in text
    assert "| simulator (control) | 100.0 (100.0 to 100.0)" in text


def test_wrong_frame_count_or_size_scores_zero(cases_dir):
    from vical.wm.cases import load_cases, load_frames

    case = load_cases(cases_dir)[6]  # a Freeway case
    truth = load_frames(cases_dir, case.truth_frames)
    last = load_frames(cases_dir, case.context_frames[-1:])[0]
    s = score_case(case, last, truth, truth[:-1], [])
    assert s.fidelity == 0.0 and s.counterfactual == 0.0
    black = sum(float(np.mean(t.astype(float) ** 2)) for t in truth)
    assert s.se == pytest.approx(black, abs=1e-5)  # every step counted as a black frame
    small = [f[:-2] for f in truth]
    s = score_case(case, last, truth, small, [])
    assert s.fidelity == 0.0 and s.spec == 0.0 and s.se == pytest.approx(black, abs=1e-5)


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


def _tree(folder):
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(("model", "control"), [("copy-last", "own"), ("simulator", "shuffled")])
def test_two_workers_write_the_same_run_as_one(cases_dir, tmp_path, model, control):
    """Predictions, scores and summary are the same bytes in and out of the pool, and the
    scores re-derive from the stored predictions."""
    from vical.run.pool import run_pool
    from vical.wm.evaluate import score_run

    seen = []
    one = evaluate(model, cases_dir, tmp_path / "one", control=control)
    two = evaluate(
        model,
        cases_dir,
        tmp_path / "two",
        control=control,
        workers=2,
        pool=run_pool,
        progress=lambda n, total, case: seen.append((n, total)),
    )
    assert one == two
    assert _tree(tmp_path / "one") == _tree(tmp_path / "two")
    assert seen[-1][0] == seen[-1][1] == one["cases"] and len(seen) == one["cases"]
    before = _tree(tmp_path / "two")
    assert score_run(tmp_path / "two", cases_dir, workers=2, pool=run_pool) == two
    assert _tree(tmp_path / "two") == before
    assert rescore(tmp_path / "two", cases_dir) == []


def test_copy_last_image_metrics_are_the_per_step_means_of_scikit_image(runs, cases_dir):
    """Scoring reuses the persistence baseline's metrics for a step predicted as the last
    context frame; the numbers must be those of scikit-image on every step."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from vical.wm.cases import load_cases, load_frames
    from vical.wm.score import PSNR_CAP

    by_case = {s["case"]: s for s in _scores(runs["copy-last"][0])}
    for case in load_cases(cases_dir):
        last = load_frames(cases_dir, case.context_frames[-1:])[0]
        ssim, psnr = [], []
        for t in load_frames(cases_dir, case.truth_frames):
            same = np.array_equal(t, last)
            s = 1.0 if same else structural_similarity(t, last, channel_axis=2, data_range=255)
            ssim.append(max(0.0, float(s)))
            p = PSNR_CAP if same else float(peak_signal_noise_ratio(t, last, data_range=255))
            psnr.append(min(PSNR_CAP, p))
        got = by_case[case.id]
        assert got["fidelity"] == round(100.0 * float(np.mean(ssim)), 6)
        assert got["psnr"] == round(float(np.mean(psnr)), 6)


def test_a_remembered_read_back_is_the_read_back_of_that_frame(cases_dir):
    from vical.wm.cases import load_cases, load_frames
    from vical.wm.readback import read_back
    from vical.wm.score import _read_back

    case = next(c for c in load_cases(cases_dir) if c.spec.exact)
    hint = case.spec.context_facts
    ctx = load_frames(cases_dir, case.context_frames[-1:])[0]
    final = load_frames(cases_dir, case.truth_frames[-1:])[0]
    for frame in (ctx, final, ctx, final):
        assert _read_back(case.task, frame, hint) == read_back(case.task, frame, hint)
    assert _read_back(case.task, ctx, hint) != _read_back(case.task, final, hint)


@pytest.mark.parametrize("key", ["copy-last", "simulator/shuffled"])
def test_rescore_on_the_pool_finds_what_it_finds_in_process(cases_dir, tmp_path, key):
    """`vical wm verify -j 2`: the same verdict as one process, clean and tampered."""
    from vical.run.pool import run_pool

    run = tmp_path / "run"
    model, control = RUNS[key]
    evaluate(model, cases_dir, run, control=control)
    assert rescore(run, cases_dir, workers=2, pool=run_pool) == []
    lines = (run / SCORES).read_text().splitlines()
    k = len(lines) - 1
    changed = json.loads(lines[k])
    changed["fidelity"] = round(changed["fidelity"] - 1.0, 6)  # scored under every control
    lines[k] = json.dumps(changed, sort_keys=True)
    (run / SCORES).write_text("\n".join(lines) + "\n")
    one = rescore(run, cases_dir)
    assert one and changed["case"] in one[0]
    assert rescore(run, cases_dir, workers=2, pool=run_pool) == one


def test_rescore_refuses_a_case_folder_whose_truth_frames_were_altered(runs, cases_dir, tmp_path):
    """Scores are computed against the case folder's truth frames, so each must be the
    frame the case's hashes name (the simulator's replay is checked against them too)."""
    import shutil

    from PIL import Image

    from vical.wm.cases import load_cases

    folder = tmp_path / "cases"
    shutil.copytree(cases_dir, folder)
    case = load_cases(folder)[0]
    png = folder / case.truth_frames[0]
    pixels = np.array(Image.open(png))
    pixels[0, 0] = 255 - pixels[0, 0]
    Image.fromarray(pixels).save(png)
    problems = rescore(runs["copy-last"][0], folder)
    assert f"{case.id}: the case folder's truth frames differ from the case's hashes" in problems
