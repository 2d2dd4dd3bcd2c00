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

A prediction with the wrong number of frames or a wrong frame size scores 0 on
every part it affects. Scenario scores are case means; the index is the mean of
the scenario scores; intervals are percentile bootstraps that resample whole
environments within each scenario (cases of one environment are not independent).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from vical.wm.cases import Case

PSNR_CAP = 60.0
PIXEL_TOLERANCE = 8
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 20


class CaseScore(BaseModel):
    """One case's score and its parts (0-100; PSNR in dB)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case: str
    scenario: str
    env: str
    score: float
    fidelity: float
    counterfactual: float
    spec: float
    required: float | None
    protected: float
    psnr: float
    exact: bool


def _ssim(truth: np.ndarray, pred: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    if truth.shape != pred.shape:
        return 0.0
    if np.array_equal(truth, pred):
        return 1.0
    v = structural_similarity(truth, pred, channel_axis=2, data_range=255)
    return max(0.0, float(v))


def _psnr(truth: np.ndarray, pred: np.ndarray) -> float:
    from skimage.metrics import peak_signal_noise_ratio

    if truth.shape != pred.shape:
        return 0.0
    if np.array_equal(truth, pred):
        return PSNR_CAP
    return min(PSNR_CAP, float(peak_signal_noise_ratio(truth, pred, data_range=255)))


def _mse(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
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
    last_context: np.ndarray, truth: Sequence[np.ndarray], pred_last: np.ndarray
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


def score_case(
    case: Case,
    last_context: np.ndarray,
    truth: Sequence[np.ndarray],
    pred: Sequence[np.ndarray],
    others: Sequence[Sequence[np.ndarray]],
) -> CaseScore:
    """Score one prediction. ``others``: the true frames of the context's other branches."""
    pred = [np.asarray(p, dtype=np.uint8) for p in pred]
    steps = len(truth)
    if len(pred) != steps:
        fid, psnr = 0.0, 0.0
    else:
        fid = 100.0 * float(np.mean([_ssim(t, p) for t, p in zip(truth, pred, strict=True)]))
        psnr = float(np.mean([_psnr(t, p) for t, p in zip(truth, pred, strict=True)]))
    own = _mse(truth, pred)
    cf = 100.0 if own < math.inf and all(own < _mse(o, pred) for o in others) else 0.0
    if not pred:
        req: float | None = 0.0
        prot = 0.0
    elif case.spec.exact:
        from vical.wm.readback import read_back

        facts = read_back(case.task, pred[-1], case.spec.context_facts)
        req, prot = spec_on_facts(case, facts)
    else:
        req, prot = spec_on_pixels(last_context, truth, pred[-1])
    spec = _halves(req, prot)
    return CaseScore(
        case=case.id,
        scenario=case.scenario,
        env=case.env,
        score=round((fid + cf + spec) / 3.0, 6),
        fidelity=round(fid, 6),
        counterfactual=cf,
        spec=round(spec, 6),
        required=None if req is None else round(req, 6),
        protected=round(prot, 6),
        psnr=round(psnr, 6),
        exact=case.spec.exact,
    )


# -- aggregation ----------------------------------------------------------------------
PARTS = ("score", "fidelity", "counterfactual", "spec")


def _by_scenario(scores: Sequence[CaseScore]) -> dict[str, dict[str, list[CaseScore]]]:
    out: dict[str, dict[str, list[CaseScore]]] = {}
    for s in scores:
        out.setdefault(s.scenario, {}).setdefault(s.env, []).append(s)
    return out


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else math.nan


def summarize(
    scores: Sequence[CaseScore], samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Scenario means and the index, each part with a 95% environment-clustered interval.

    The index is the mean of the scenario means. A bootstrap sample redraws, within
    each scenario, as many environments as it has, with replacement, and takes all
    their cases.
    """
    groups = _by_scenario(scores)
    rng = random.Random(seed)
    out: dict[str, Any] = {"scenarios": {}, "index": {}, "cases": len(scores)}
    draws: dict[str, dict[str, list[float]]] = {sc: {p: [] for p in PARTS} for sc in groups}
    index_draws: dict[str, list[float]] = {p: [] for p in PARTS}
    for _ in range(samples):
        sample_means: dict[str, dict[str, float]] = {}
        for sc in sorted(groups):
            envs = sorted(groups[sc])
            picked = [rng.choice(envs) for _ in envs]
            cases = [c for e in picked for c in groups[sc][e]]
            sample_means[sc] = {p: _mean([getattr(c, p) for c in cases]) for p in PARTS}
            for p in PARTS:
                draws[sc][p].append(sample_means[sc][p])
        for p in PARTS:
            index_draws[p].append(_mean([sample_means[sc][p] for sc in sorted(groups)]))

    def interval(xs: list[float]) -> list[float]:
        s = sorted(xs)
        return [round(s[int(0.025 * (len(s) - 1))], 3), round(s[int(0.975 * (len(s) - 1))], 3)]

    for sc in sorted(groups):
        cases = [c for e in sorted(groups[sc]) for c in groups[sc][e]]
        out["scenarios"][sc] = {
            p: {
                "mean": round(_mean([getattr(c, p) for c in cases]), 3),
                "ci95": interval(draws[sc][p]),
            }
            for p in PARTS
        }
        out["scenarios"][sc]["cases"] = len(cases)
    for p in PARTS:
        out["index"][p] = {
            "mean": round(_mean([out["scenarios"][sc][p]["mean"] for sc in sorted(groups)]), 3),
            "ci95": interval(index_draws[p]),
        }
    return out
