"""Scoring a world model's predicted frames against the simulator's true frames.

The headline, the **world-model index**, is built so that a model cannot climb it
without reading the action (the design and the figures behind it are in
``docs/wm-index.md``). It is the ``action_skill``, a skill score that pools
squared errors over every case of a scenario before taking the ratio (never a
mean of per-case ratios, whose tiny denominators let one nearly static case swing
a mean by hundreds of points), on the part of the future that the action decides.
Per context and step, the truth's *branch deviations* are each branch's true
frame minus the mean of the context's true frames over its branches; the model's
are its predicted frames minus their mean over the branches::

    action_skill = 100 (1 - sum SE(model's deviations - truth's) / sum SE(truth's))

with SE a frame's mean squared pixel error, summed over steps, branches and the
scenario's contexts. A model whose frames do not depend on the intervention has
no deviations and scores exactly 0, copy-last too; the simulator 100; drawing
the wrong branch's effect scores below 0.

``mse_skill``, ``100 (1 - sum SE(model) / sum SE(copy-last))`` over the same
cases, scores the whole future (copy-last 0, the simulator 100). Most of what
changes on screen is the same whatever the action, so an action-blind model can
climb it: it is shown beside the index, never instead of it.

Per case, descriptive columns: ``fidelity`` (mean SSIM over the steps,
scikit-image, colour, clamped at 0, times 100) and ``psnr`` (dB, capped at
:data:`PSNR_CAP`); ``counterfactual`` (100 when the prediction is closer to this
case's truth than to every other branch's, else 0); ``spec`` (the specification
checks: for the exactly rendered families the predicted last frame is read back
into facts, :mod:`vical.wm.readback`; elsewhere the checks are made on pixels
within :data:`PIXEL_TOLERANCE`), and the case score, their mean.

``response`` catches action-blindness directly: over the pairs of requests whose
true futures differ visibly (:data:`MIN_CHANGED_PIXELS` pixels in some step: the
branches of a context, a control's target and the case's own truth), the share
whose predicted futures differ visibly too. A run below
:data:`RESPONSE_FLOOR` percent is flagged as ignoring the action.

A prediction with the wrong number of frames counts every step as a black frame;
a frame of the wrong size counts as a black frame (and scores 0 on SSIM, PSNR,
the counterfactual and the specification). Under a control intervention
(:mod:`vical.wm.controls`) the action skill, the counterfactual and the
specification belong to the case's own intervention and are None.

Scenario values are pooled over their cases; the index of each part is the mean
of its scenario values. A scenario has two to four environments, too few for a
resampling interval, so scenario rows are descriptive: their value and the range
of their environments' values. The index's 95% interval is a stratified
delete-one-environment jackknife (environments are the clusters, scenarios the
strata) with a t quantile on (environments - scenarios) degrees of freedom, the
usual remedy when clusters are few.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from vical.wm.cases import MIN_CHANGED_PIXELS, Case
from vical.wm.sim import Frame

Arr = npt.NDArray[np.float64]
PSNR_CAP = 60.0
PIXEL_TOLERANCE = 8
RESPONSE_FLOOR = 50.0  # % of differing pairs a model must tell apart, else it is flagged
CONFIDENCE = 0.95


class CaseScore(BaseModel):
    """One case's score and its parts (0-100; PSNR in dB; squared errors per pixel)."""

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
    exact: bool
    se: float  # the prediction's squared error against the target, summed over the steps
    se_copy: float  # copy-last's
    act_err: float | None  # squared error of the prediction's branch deviations
    act_var: float | None  # the truth's branch deviations' squared size
    pairs: int  # pairs of requests (with this case) whose true futures differ visibly
    moved: int  # ... whose predicted futures differ visibly too


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


def as_target(truth: Sequence[Frame], pred: Sequence[Frame]) -> list[Frame]:
    """The prediction as scored by the pooled errors: a missing, extra or wrongly sized
    frame counts as a black frame of the target's size."""
    out = []
    for i, t in enumerate(truth):
        p = pred[i] if len(pred) == len(truth) else None
        if p is None or p.shape != t.shape:
            p = np.zeros_like(t)
        out.append(p)
    return out


def squared_error(truth: Sequence[Frame], pred: Sequence[Frame]) -> float:
    """Mean squared pixel error of each step (over pixels and channels), summed over steps."""
    return float(
        sum(
            np.mean((t.astype(np.float64) - p.astype(np.float64)) ** 2)
            for t, p in zip(truth, as_target(truth, pred), strict=True)
        )
    )


def differ(a: Sequence[Frame], b: Sequence[Frame]) -> bool:
    """Whether two futures differ visibly: at some step, in at least
    :data:`MIN_CHANGED_PIXELS` pixels (a different size or length differs)."""
    if len(a) != len(b):
        return True
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or int(np.any(x != y, axis=2).sum()) >= MIN_CHANGED_PIXELS:
            return True
    return False


def branch_deviations(
    truths: Sequence[Sequence[Frame]], preds: Sequence[Sequence[Frame]]
) -> list[tuple[float, float]]:
    """Per branch of one context: (squared error of the prediction's branch deviations
    against the truth's, squared size of the truth's), each summed over the steps.

    ``truths[b]`` and ``preds[b]`` are branch b's true and predicted frames; the
    deviations at a step are the frames minus their mean over the branches.
    """
    shown = [as_target(t, p) for t, p in zip(truths, preds, strict=True)]
    out = [[0.0, 0.0] for _ in truths]
    for step in range(len(truths[0])):
        t = np.stack([x[step].astype(np.float64) for x in truths])
        p = np.stack([x[step].astype(np.float64) for x in shown])
        dt = t - t.mean(axis=0)
        dp = p - p.mean(axis=0)
        for b in range(len(truths)):
            out[b][0] += float(np.mean((dp[b] - dt[b]) ** 2))
            out[b][1] += float(np.mean(dt[b] ** 2))
    return [(e, v) for e, v in out]


_READ: OrderedDict[tuple[str, str, str], dict[str, Any] | None] = OrderedDict()
READ_MEMO = 64  # frames read back remembered per process (a context's branches share one)


def _read_back(task: str, frame: Frame, hint: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`vical.wm.readback.read_back`, remembered by the frame's pixels: the cases of
    one context often show the same predicted frame (copy-last's), which reads back once."""
    from vical.wm.readback import read_back
    from vical.wm.sim import pixels_sha256

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


def _step_metrics(truth: Frame, pred: Frame) -> tuple[float, float]:
    return _ssim(truth, pred), _psnr(truth, pred)


def _metrics(truth: Sequence[Frame], pred: Sequence[Frame]) -> tuple[float, float]:
    """Mean SSIM (0-1) and mean PSNR (dB) over the steps; 0 for a wrong frame count."""
    if len(pred) != len(truth):
        return 0.0, 0.0
    steps = [_step_metrics(t, p) for t, p in zip(truth, pred, strict=True)]
    return float(np.mean([v[0] for v in steps])), float(np.mean([v[1] for v in steps]))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def _e(x: float) -> float:
    """A squared error as stored (rounded, so that a re-score finds the same bytes)."""
    return round(float(x), 6)


def score_case(
    case: Case,
    last_context: Frame,
    truth: Sequence[Frame],
    pred: Sequence[Frame],
    others: Sequence[Sequence[Frame]] | None,
    deviations: tuple[float, float] | None = None,
    pairs: tuple[int, int] = (0, 0),
) -> CaseScore:
    """Score one prediction against ``truth`` (the target).

    ``others``: the true frames of the context's other branches; None under a control
    intervention, whose target is not the case's truth (then the counterfactual and
    the specification are not scored). ``deviations``: the case's terms of
    :func:`branch_deviations` (None: not scored); ``pairs``: its (pairs, moved) counts.
    """
    pred = [np.asarray(p, dtype=np.uint8) for p in pred]
    ssim, psnr = _metrics(truth, pred)
    fid = 100.0 * ssim
    common: dict[str, Any] = {
        "case": case.id,
        "scenario": case.scenario,
        "env": case.env,
        "fidelity": round(fid, 6),
        "psnr": round(psnr, 6),
        "exact": case.spec.exact,
        "se": _e(squared_error(truth, pred)),
        "se_copy": _e(squared_error(truth, [last_context for _ in truth])),
        "act_err": None if deviations is None else _e(deviations[0]),
        "act_var": None if deviations is None else _e(deviations[1]),
        "pairs": pairs[0],
        "moved": pairs[1],
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


def score_context(
    cases: Sequence[Case],
    last_context: Frame,
    truths: Sequence[Sequence[Frame]],
    preds: Sequence[Sequence[Frame]],
) -> list[CaseScore]:
    """Score every branch of one context under its own intervention (``cases`` in
    branch order, with their truths and predictions): the per-case parts, the branch
    deviations and the pairs of branches told apart."""
    devs = branch_deviations(truths, preds)
    out = []
    for b, case in enumerate(cases):
        others = [t for k, t in enumerate(truths) if k != b]
        n = sum(differ(truths[b], truths[k]) for k in range(len(cases)) if k != b)
        moved = sum(
            differ(truths[b], truths[k]) and differ(preds[b], preds[k])
            for k in range(len(cases))
            if k != b
        )
        out.append(score_case(case, last_context, truths[b], preds[b], others, devs[b], (n, moved)))
    return out


# -- aggregation ----------------------------------------------------------------------
# name -> (kind, numerator field, denominator field); "skill": 100 (1 - N / D) over the
# pooled sums, "share": 100 N / D, "mean": the mean of the field over the cases that have it
PARTS: dict[str, tuple[str, str, str]] = {
    "action_skill": ("skill", "act_err", "act_var"),
    "mse_skill": ("skill", "se", "se_copy"),
    "response": ("share", "moved", "pairs"),
    "counterfactual": ("mean", "counterfactual", ""),
    "spec": ("mean", "spec", ""),
    "score": ("mean", "score", ""),
    "fidelity": ("mean", "fidelity", ""),
    "psnr": ("mean", "psnr", ""),
}
INDEX = "action_skill"  # the headline: the world-model index
COLUMNS = tuple(PARTS)


def _sums(cases: Sequence[CaseScore]) -> Arr:
    """(parts, 2): each part's numerator and denominator summed over ``cases``."""
    out = np.zeros((len(PARTS), 2))
    for c in cases:
        for j, (kind, num, den) in enumerate(PARTS.values()):
            v = getattr(c, num)
            if v is None:
                continue
            out[j, 0] += v
            out[j, 1] += 1 if kind == "mean" else getattr(c, den)
    return out


def _total(sums: Any) -> Arr:
    total: Arr = np.sum(np.stack(list(sums)), axis=0)
    return total


def _values(sums: Arr) -> Arr:
    """(columns,): each part from pooled sums (NaN: undefined)."""
    vals = np.full(len(COLUMNS), np.nan)
    for j, (kind, _, _) in enumerate(PARTS.values()):
        n, d = sums[j]
        if d > 0:
            vals[j] = (
                100.0 * (1.0 - n / d)
                if kind == "skill"
                else (100.0 if kind == "share" else 1.0) * n / d
            )
    return vals


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 3)


def summarize(scores: Sequence[CaseScore]) -> dict[str, Any]:
    """Scenario values (descriptive: pooled value, environments' range, cases counted)
    and the index of each column (the mean of its scenario values) with its stratified
    jackknife 95% interval (see the module docstring)."""
    from scipy import stats

    groups: dict[str, dict[str, list[CaseScore]]] = {}
    for s in scores:
        groups.setdefault(s.scenario, {}).setdefault(s.env, []).append(s)
    out: dict[str, Any] = {"scenarios": {}, "index": {}, "cases": len(scores)}
    names = sorted(groups)
    env_sums = {sc: {e: _sums(groups[sc][e]) for e in sorted(groups[sc])} for sc in names}
    sc_vals = {sc: _values(_total(env_sums[sc].values())) for sc in names}
    for sc in names:
        per_env = np.stack([_values(v) for v in env_sums[sc].values()])
        counts = _counts(c for e in groups[sc].values() for c in e)
        entry: dict[str, Any] = {}
        for j, col in enumerate(COLUMNS):
            col_env = per_env[:, j][~np.isnan(per_env[:, j])]
            entry[col] = {
                "mean": _round(sc_vals[sc][j]),
                "range": [_round(col_env.min()), _round(col_env.max())]
                if len(col_env)
                else [None, None],
                "n": counts[col],
            }
        entry["cases"] = sum(len(v) for v in groups[sc].values())
        entry["environments"] = len(groups[sc])
        out["scenarios"][sc] = entry

    def index(vals: dict[str, Arr]) -> Arr:
        stacked = np.stack(list(vals.values()))
        with np.errstate(invalid="ignore"):
            present = ~np.isnan(stacked)
            n = present.sum(axis=0)
            return np.where(
                n > 0, np.where(present, stacked, 0).sum(axis=0) / np.maximum(n, 1), np.nan
            )

    full = index(sc_vals) if names else np.full(len(COLUMNS), np.nan)
    # stratified delete-one-environment jackknife
    var = np.zeros(len(COLUMNS))
    envs_total = 0
    for sc in names:
        envs = list(env_sums[sc])
        envs_total += len(envs)
        if len(envs) < 2:
            continue
        reps = []
        for drop in envs:
            kept = _total(v for e, v in env_sums[sc].items() if e != drop)
            reps.append(index({**sc_vals, sc: _values(kept)}))
        r = np.stack(reps)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a column with no value
            var += (len(envs) - 1) / len(envs) * np.nansum((r - np.nanmean(r, axis=0)) ** 2, axis=0)
    df = envs_total - len(names)
    half = (
        stats.t.ppf(0.5 + CONFIDENCE / 2, df) * np.sqrt(var)
        if df >= 1
        else np.full(len(COLUMNS), np.nan)
    )
    all_counts = _counts(scores)
    for j, col in enumerate(COLUMNS):
        m = full[j]
        lo_end, hi_end = _BOUNDS.get(col, (-math.inf, 100.0))
        ci = (
            [None, None]
            if math.isnan(m) or math.isnan(half[j])
            else [_round(max(lo_end, m - half[j])), _round(min(hi_end, m + half[j]))]
        )
        out["index"][col] = {"mean": _round(m), "ci95": ci, "n": all_counts[col]}
    out["interval"] = {
        "method": "stratified delete-one-environment jackknife, t quantile",
        "environments": envs_total,
        "scenarios": len(names),
        "df": df,
    }
    return out


# the values a column can take (an interval is cut to them); the skills: at most 100
_BOUNDS = {
    "response": (0.0, 100.0),
    "counterfactual": (0.0, 100.0),
    "spec": (0.0, 100.0),
    "score": (0.0, 100.0),
    "fidelity": (0.0, 100.0),
    "psnr": (0.0, PSNR_CAP),
}


def _counts(scores: Any) -> dict[str, int]:
    """How many cases each column is computed on."""
    cases = list(scores)
    out = {}
    for col, (_, num, _) in PARTS.items():
        out[col] = sum(getattr(c, num) is not None for c in cases)
    return out


def flagged(summary: dict[str, Any]) -> str | None:
    """Why a run's predictions look action-blind (None: they respond)."""
    resp = summary["index"]["response"]["mean"]
    if resp is None or resp >= RESPONSE_FLOOR:
        return None
    return (
        f"ignores the action: its predicted futures differ in {resp:.1f}% of the pairs of "
        f"requests whose true futures differ (below {RESPONSE_FLOOR:.0f}%)"
    )
