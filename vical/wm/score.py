"""Scoring a world model's predicted frames against the simulator's true frames.

Each case scores three parts on 0-100, and the case score is their mean:

- ``fidelity``: the mean over the intervention's steps of SSIM between the
  predicted and the true frame (scikit-image, colour, clamped at 0), times 100.
  PSNR is reported beside it (capped at :data:`PSNR_CAP` dB) but not scored;
- ``counterfactual``: 100 when the prediction is closer (mean squared error
  over the steps) to this case's truth than to the truth of every other branch
  of the same context, else 0. A model that ignores its actions predicts the
  same frames for every branch, so it can win at most one branch of a context;
- ``spec``: the specification checks. For the exactly rendered families the
  predicted last frame is read back into facts (:mod:`vical.wm.readback`): the
  share of required changes showing their new value and the share of protected
  facts keeping theirs weigh half each (all of it on protection when nothing is
  required to change). For the other families the same two shares are taken on
  pixels (within :data:`PIXEL_TOLERANCE` per channel): the pixels where the true
  last frame differs from the last context frame must match the truth; the
  pixels no true frame changes must keep the context's values.

Beside them, the *skill scores* put each image metric on a scale relative to
persistence: for metric m (SSIM, or PSNR in dB)

    skill = 100 * (m(prediction) - m(copy-last)) / (m(simulator) - m(copy-last))

per case, where copy-last repeats the last context frame and the simulator's
prediction is the target itself (SSIM 1, PSNR :data:`PSNR_CAP`). Copy-last
scores 0 and the simulator 100 by construction; a model worse than persistence
scores below 0 (shown as it is, not clamped). When copy-last already reaches the
simulator's value (every target frame equals the last context frame: there is
nothing to predict) the skill is undefined: the case has none, is left out of the
skill means and is counted (the ``n`` beside every mean).

A prediction with the wrong number of frames or a wrong frame size scores 0 on
every part it affects. Under a control intervention (:mod:`vical.wm.controls`)
only the image metrics and their skills are scored: the counterfactual
comparison and the specification belong to the case's own intervention, so
those parts and the case score are None there.

Scenario scores are case means (of the cases that have the part); the index is
the mean of the scenario scores; intervals are percentile bootstraps of
:data:`BOOTSTRAP_SAMPLES` resamples that resample whole environments within each
scenario (cases of one environment are not independent).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict

from vical.wm.cases import Case
from vical.wm.sim import Frame

PSNR_CAP = 60.0
PIXEL_TOLERANCE = 8
BOOTSTRAP_SAMPLES = 10_000  # as vical.report.stats.DEFAULT_RESAMPLES
BOOTSTRAP_SEED = 20


class CaseScore(BaseModel):
    """One case's score and its parts (0-100; PSNR in dB)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case: str
    scenario: str
    env: str
    score: float | None
    fidelity: float
    counterfactual: float | None
    spec: float | None
    required: float | None
    protected: float | None
    psnr: float
    ssim_skill: float | None
    psnr_skill: float | None
    exact: bool


def _ssim(truth: Frame, pred: Frame) -> float:
    from skimage.metrics import structural_similarity

    if truth.shape != pred.shape:
        return 0.0
    if np.array_equal(truth, pred):
        return 1.0
    ssim = cast("Callable[..., float]", structural_similarity)  # scikit-image is untyped
    v = ssim(truth, pred, channel_axis=2, data_range=255)
    return max(0.0, float(v))


def _psnr(truth: Frame, pred: Frame) -> float:
    from skimage.metrics import peak_signal_noise_ratio

    if truth.shape != pred.shape:
        return 0.0
    if np.array_equal(truth, pred):
        return PSNR_CAP
    psnr = cast("Callable[..., float]", peak_signal_noise_ratio)
    return min(PSNR_CAP, float(psnr(truth, pred, data_range=255)))


def _mse(a: Sequence[Frame], b: Sequence[Frame]) -> float:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return math.inf
    return float(
        np.mean(
            [
                np.mean((x.astype(np.float64) - y.astype(np.float64)) ** 2)
                for x, y in zip(a, b, strict=True)
            ]
        )
    )


_READ: OrderedDict[tuple[str, str, str], dict[str, Any] | None] = OrderedDict()
READ_MEMO = 64  # frames read back remembered per process (a context's branches share one)


def _read_back(task: str, frame: Frame, hint: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`vical.wm.readback.read_back`, remembered by the frame's pixels: the cases of
    one context often show the same predicted frame (copy-last's), which reads back once."""
    from vical.wm.cases import pixels_sha256
    from vical.wm.readback import read_back

    key = (task, pixels_sha256(frame), json.dumps(hint, sort_keys=True, default=str))
    if key in _READ:
        _READ.move_to_end(key)
        return _READ[key]
    facts = read_back(task, frame, hint)
    _READ[key] = facts
    while len(_READ) > READ_MEMO:
        _READ.popitem(last=False)
    return facts


def _halves(required: float | None, protected: float) -> float:
    return 100.0 * protected if required is None else 50.0 * (required + protected)


def spec_on_facts(case: Case, facts: dict[str, Any] | None) -> tuple[float | None, float]:
    """Shares of required changes and of protected facts that ``facts`` satisfy."""
    req = case.spec.required_change
    prot = case.spec.protected_state
    if facts is None:
        return (0.0 if req else None), 0.0
    r = sum(facts.get(f.fact) == f.after for f in req) / len(req) if req else None
    p = sum(facts.get(f.fact) == f.after for f in prot) / len(prot) if prot else 1.0
    return r, p


def spec_on_pixels(
    last_context: Frame, truth: Sequence[Frame], pred_last: Frame
) -> tuple[float | None, float]:
    """Shares of the changed pixels predicted right and of the unchanged pixels kept."""
    if pred_last.shape != last_context.shape:
        return 0.0, 0.0
    ctx = last_context.astype(np.int16)
    final = truth[-1].astype(np.int16)
    changed = np.any(final != ctx, axis=2)
    still = np.ones(changed.shape, dtype=bool)
    for f in truth:
        still &= np.all(f.astype(np.int16) == ctx, axis=2)
    pred = pred_last.astype(np.int16)
    right = np.all(np.abs(pred - final) <= PIXEL_TOLERANCE, axis=2)
    kept = np.all(np.abs(pred - ctx) <= PIXEL_TOLERANCE, axis=2)
    r = float(right[changed].mean()) if changed.any() else None
    p = float(kept[still].mean()) if still.any() else 1.0
    return r, p


def skill(model: float, copy_last: float, top: float) -> float | None:
    """100 (model - copy_last) / (top - copy_last); None when copy-last already reaches ``top``."""
    if copy_last >= top:
        return None
    return 100.0 * (model - copy_last) / (top - copy_last)


def _step_metrics(truth: Frame, pred: Frame) -> tuple[float, float]:
    return _ssim(truth, pred), _psnr(truth, pred)


def _metrics(
    truth: Sequence[Frame],
    pred: Sequence[Frame],
    known: tuple[Frame, Sequence[tuple[float, float]]] | None = None,
) -> tuple[float, float]:
    """Mean SSIM (0-1) and mean PSNR (dB) over the steps; 0 for a wrong frame count.

    ``known``: a frame and its metrics against each true frame, taken for any step whose
    prediction is that frame (copy-last's: its metrics are the persistence baseline's).
    """
    if len(pred) != len(truth):
        return 0.0, 0.0
    steps = [
        known[1][i] if known is not None and np.array_equal(p, known[0]) else _step_metrics(t, p)
        for i, (t, p) in enumerate(zip(truth, pred, strict=True))
    ]
    ssim = float(np.mean([v[0] for v in steps]))
    psnr = float(np.mean([v[1] for v in steps]))
    return ssim, psnr


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def score_case(
    case: Case,
    last_context: Frame,
    truth: Sequence[Frame],
    pred: Sequence[Frame],
    others: Sequence[Sequence[Frame]] | None,
) -> CaseScore:
    """Score one prediction against ``truth`` (the target).

    ``others``: the true frames of the context's other branches; None under a control
    intervention, whose target is not the case's truth (then only the image metrics
    and their skills are scored).
    """
    pred = [np.asarray(p, dtype=np.uint8) for p in pred]
    base = [_step_metrics(t, last_context) for t in truth]
    ssim, psnr = _metrics(truth, pred, (last_context, base))
    base_ssim, base_psnr = _metrics(truth, [last_context for _ in truth], (last_context, base))
    ssim_skill = skill(ssim, base_ssim, 1.0)
    psnr_skill = skill(psnr, base_psnr, PSNR_CAP)
    fid = 100.0 * ssim
    common: dict[str, Any] = {
        "case": case.id,
        "scenario": case.scenario,
        "env": case.env,
        "fidelity": round(fid, 6),
        "psnr": round(psnr, 6),
        "ssim_skill": _r(ssim_skill),
        "psnr_skill": _r(psnr_skill),
        "exact": case.spec.exact,
    }
    if others is None:
        return CaseScore(
            score=None, counterfactual=None, spec=None, required=None, protected=None, **common
        )
    own = _mse(truth, pred)
    cf = 100.0 if own < math.inf and all(own < _mse(o, pred) for o in others) else 0.0
    if not pred:
        req: float | None = 0.0
        prot = 0.0
    elif case.spec.exact:
        facts = _read_back(case.task, pred[-1], case.spec.context_facts)
        req, prot = spec_on_facts(case, facts)
    else:
        req, prot = spec_on_pixels(last_context, truth, pred[-1])
    spec = _halves(req, prot)
    return CaseScore(
        score=round((fid + cf + spec) / 3.0, 6),
        counterfactual=cf,
        spec=round(spec, 6),
        required=_r(req),
        protected=round(prot, 6),
        **common,
    )


# -- aggregation ----------------------------------------------------------------------
# the skill scores first (the index relative to persistence), then the other parts
PARTS = ("ssim_skill", "psnr_skill", "counterfactual", "spec", "score", "fidelity", "psnr")


def _by_scenario(scores: Sequence[CaseScore]) -> dict[str, dict[str, list[CaseScore]]]:
    out: dict[str, dict[str, list[CaseScore]]] = {}
    for s in scores:
        out.setdefault(s.scenario, {}).setdefault(s.env, []).append(s)
    return out


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 3)


def _interval(xs: Frame) -> list[float | None]:
    s = np.sort(xs[~np.isnan(xs)])
    if not len(s):
        return [None, None]
    return [_round(s[int(0.025 * (len(s) - 1))]), _round(s[int(0.975 * (len(s) - 1))])]


def _ratio(num: Frame, den: Frame) -> Frame:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def summarize(
    scores: Sequence[CaseScore], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Scenario means and the index, each part with a 95% environment-clustered interval.

    A part's scenario mean is over the cases that have it (``n``: a case without a
    skill, see the module docstring, is left out and counted); the index is the mean
    of the scenario means that exist. A bootstrap sample redraws, within each
    scenario, as many environments as it has, with replacement, and takes all their
    cases.
    """
    groups = _by_scenario(scores)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"scenarios": {}, "index": {}, "cases": len(scores)}
    scenario_draws: list[Frame] = []  # per scenario: (samples, parts) means
    for sc in sorted(groups):
        envs = sorted(groups[sc])
        # per environment and part: the sum of the values and how many cases have one
        sums = np.zeros((len(envs), len(PARTS)))
        counts = np.zeros((len(envs), len(PARTS)))
        for i, e in enumerate(envs):
            for c in groups[sc][e]:
                for j, p in enumerate(PARTS):
                    v = getattr(c, p)
                    if v is not None:
                        sums[i, j] += v
                        counts[i, j] += 1
        picked = rng.integers(0, len(envs), size=(samples, len(envs)))
        draws = _ratio(sums[picked].sum(axis=1), counts[picked].sum(axis=1))
        scenario_draws.append(draws)
        means = _ratio(sums.sum(axis=0), counts.sum(axis=0))
        entry: dict[str, Any] = {
            p: {
                "mean": _round(means[j]),
                "ci95": _interval(draws[:, j]),
                "n": int(counts[:, j].sum()),
            }
            for j, p in enumerate(PARTS)
        }
        entry["cases"] = sum(len(v) for v in groups[sc].values())
        out["scenarios"][sc] = entry
    if scenario_draws:
        stacked = np.stack(scenario_draws)  # (scenarios, samples, parts)
        with np.errstate(invalid="ignore"):
            present = ~np.isnan(stacked)
            index_draws = _ratio(np.where(present, stacked, 0).sum(axis=0), present.sum(axis=0))
    for j, p in enumerate(PARTS):
        sc_means = [
            out["scenarios"][sc][p]["mean"]
            for sc in sorted(groups)
            if out["scenarios"][sc][p]["mean"] is not None
        ]
        out["index"][p] = {
            "mean": _round(sum(sc_means) / len(sc_means)) if sc_means else None,
            "ci95": _interval(index_draws[:, j]) if scenario_draws else [None, None],
            "n": sum(out["scenarios"][sc][p]["n"] for sc in groups),
        }
    return out
