"""Uncertainty for the report: environment-clustered bootstrap, agreement and Cohen's kappa.

Tasks of one environment share a simulator, a rules text and demonstrations,
so their outcomes are not independent; the unit that is resampled is the
*cluster* (an environment, for the report), never the single task. One
bootstrap resample draws as many clusters as there are, with replacement,
and keeps every observation of each drawn cluster as often as its cluster
was drawn. That is the same as giving each observation the weight "how often
was my cluster drawn", which is how every statistic here is computed: a
statistic takes the observations and a ``(resamples, n)`` array of weights
and returns one number per resample, so 10,000 resamples are a handful of
matrix products rather than a Python loop.

Public API:

- :func:`cluster_bootstrap` (values, clusters, statistic) -> :class:`Interval`
  (point estimate, percentile interval, level, resamples, number of clusters);
- statistics by name: ``"mean"`` (every observation weighs the same),
  ``"cluster_mean"`` (the mean of the cluster means: every cluster weighs the
  same, the report's Table-1 aggregation), ``"agreement"`` and ``"kappa"``
  (values: an ``(n, 2)`` array of two raters' labels); or any callable
  ``statistic(values, weights) -> (resamples,)``;
- :func:`agreement` and :func:`cohen_kappa` for two label sequences, and
  :func:`agreement_interval` / :func:`kappa_interval`, their clustered
  intervals;
- :func:`table1_intervals` (one run's Table-1 columns) and
  :func:`paired_table1` (the per-column difference of two runs on matched
  episodes), used by ``vical report`` and the leaderboard.

The interval is the percentile interval of the resampled statistic. With few
clusters it is somewhat narrow (tests/test_report_stats.py measures its
coverage on a simulated population); with a single cluster there is nothing
to resample and the bounds are NaN.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from vical.paper import TABLE1_COLUMNS
from vical.run.results import EvalResult

FloatArray = npt.NDArray[np.float64]
Statistic = Callable[[npt.NDArray[Any], FloatArray], FloatArray]

DEFAULT_RESAMPLES = 10_000
DEFAULT_LEVEL = 0.95
# cap on resamples x observations held at once by a callable statistic (about 32 MB)
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    level: float
    resamples: int
    clusters: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN bounds (nothing to resample) become None."""

        def num(x: float) -> float | None:
            return None if not np.isfinite(x) else float(x)

        return {
            "estimate": num(self.estimate),
            "low": num(self.low),
            "high": num(self.high),
            "level": self.level,
            "resamples": self.resamples,
            "clusters": self.clusters,
        }


# -- statistics: (values, weights (B, n)) -> (B,) ----------------------------
def weighted_mean(values: npt.NDArray[Any], weights: FloatArray) -> FloatArray:
    """Mean of ``values`` under each row of ``weights`` (NaN where a row weighs nothing)."""
    v = np.asarray(values, dtype=np.float64)
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((weights @ v) / total, dtype=np.float64)


def _label_codes(pairs: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], int]:
    """Two raters' labels as integer codes over their joint label set."""
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(
            f"agreement statistics need an (n, 2) array of two raters' labels, got shape "
            f"{pairs.shape}; stack them with np.column_stack([a, b])"
        )
    _, codes = np.unique(pairs.reshape(-1), return_inverse=True)
    n_labels = int(codes.max()) + 1 if codes.size else 0
    return codes.reshape(pairs.shape).astype(np.int64), n_labels


def _confusions(pairs: npt.NDArray[Any], weights: FloatArray) -> FloatArray:
    """Weighted confusion matrices, one per row of ``weights``: shape (B, L, L)."""
    codes, n = _label_codes(pairs)
    cell = codes[:, 0] * n + codes[:, 1]
    onehot = np.zeros((codes.shape[0], n * n))
    onehot[np.arange(codes.shape[0]), cell] = 1.0
    return np.asarray((weights @ onehot).reshape(-1, n, n), dtype=np.float64)


def agreement_statistic(values: npt.NDArray[Any], weights: FloatArray) -> FloatArray:
    """Share of observations on which the two raters agree, per weight row."""
    conf = _confusions(np.asarray(values), weights)
    total = conf.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.trace(conf, axis1=1, axis2=2) / total, dtype=np.float64)


def kappa_statistic(values: npt.NDArray[Any], weights: FloatArray) -> FloatArray:
    """Cohen's kappa per weight row; NaN where chance agreement is 1 (kappa undefined)."""
    conf = _confusions(np.asarray(values), weights)
    total = conf.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = conf / total[:, None, None]
        observed = np.trace(p, axis1=1, axis2=2)
        chance = (p.sum(axis=2) * p.sum(axis=1)).sum(axis=1)
        kappa = (observed - chance) / (1.0 - chance)
    kappa[np.isclose(chance, 1.0)] = np.nan
    return np.asarray(kappa, dtype=np.float64)


_NAMED: dict[str, Statistic] = {
    "agreement": agreement_statistic,
    "kappa": kappa_statistic,
}
STATISTICS = ("mean", "cluster_mean", *_NAMED)


# -- the bootstrap -------------------------------------------------------------
def _cluster_index(clusters: Sequence[Hashable], n: int) -> tuple[npt.NDArray[np.int64], int]:
    labels = list(clusters)
    if len(labels) != n:
        raise ValueError(
            f"clusters has {len(labels)} labels but values has {n} observations; "
            "give one cluster label per observation"
        )
    order: dict[Hashable, int] = {}
    index = np.fromiter((order.setdefault(c, len(order)) for c in labels), np.int64, n)
    return index, len(order)


def _counts(rng: np.random.Generator, k: int, resamples: int) -> FloatArray:
    """How often each of ``k`` clusters is drawn in each resample: shape (resamples, k)."""
    draws = rng.integers(0, k, size=(resamples, k)) + k * np.arange(resamples)[:, None]
    return (
        np.bincount(draws.ravel(), minlength=resamples * k).reshape(resamples, k).astype(np.float64)
    )


def _resampled(
    values: npt.NDArray[Any],
    index: npt.NDArray[np.int64],
    k: int,
    statistic: str | Statistic,
    counts: FloatArray,
) -> FloatArray:
    """The statistic under every row of cluster ``counts`` (shape (B, k))."""
    if statistic in ("mean", "cluster_mean"):
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1:
            raise ValueError(f"{statistic!r} needs one number per observation, got {v.shape}")
        sums = np.bincount(index, weights=v, minlength=k)
        sizes = np.bincount(index, minlength=k).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            if statistic == "mean":
                return np.asarray((counts @ sums) / (counts @ sizes), dtype=np.float64)
            return np.asarray((counts @ (sums / sizes)) / counts.sum(axis=1), dtype=np.float64)
    fn = _NAMED[statistic] if isinstance(statistic, str) else statistic
    n = index.shape[0]
    step = max(1, _CHUNK_CELLS // max(n, 1))
    out = [
        np.asarray(fn(values, counts[i : i + step][:, index]), dtype=np.float64)
        for i in range(0, counts.shape[0], step)
    ]
    return np.concatenate(out)


def cluster_bootstrap(
    values: Iterable[Any] | npt.NDArray[Any],
    clusters: Sequence[Hashable],
    statistic: str | Statistic,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> Interval:
    """The statistic of ``values`` with a cluster-bootstrap percentile interval.

    Args:
        values: one entry per observation (an ``(n, 2)`` label array for
            ``"agreement"`` and ``"kappa"``).
        clusters: the cluster of each observation (an environment name, say).
        statistic: a name from :data:`STATISTICS`, or a callable taking the
            values and a ``(B, n)`` weight array and returning ``(B,)``.
        resamples: number of bootstrap resamples (B).
        seed: seed of the ``numpy.random.Generator``; the same seed gives the
            same interval.
        level: coverage of the interval, e.g. 0.95.

    Raises:
        ValueError: for no observations, mismatched lengths, an unknown
            statistic name, a level outside (0, 1) or fewer than one resample.
    """
    arr = np.asarray(values if isinstance(values, np.ndarray) else list(values))
    if arr.shape[0] == 0:
        raise ValueError("cluster_bootstrap needs at least one observation")
    if isinstance(statistic, str) and statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), not {level!r}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    index, k = _cluster_index(clusters, arr.shape[0])
    estimate = float(_resampled(arr, index, k, statistic, np.ones((1, k)))[0])
    if k < 2:
        return Interval(estimate, float("nan"), float("nan"), level, resamples, k)
    rng = np.random.default_rng(seed)
    stats = _resampled(arr, index, k, statistic, _counts(rng, k, resamples))
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return Interval(estimate, float("nan"), float("nan"), level, resamples, k)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return Interval(estimate, float(low), float(high), level, resamples, k)


# -- two raters ------------------------------------------------------------------
def _pairs(a: Sequence[Hashable], b: Sequence[Hashable]) -> npt.NDArray[Any]:
    if len(a) != len(b):
        raise ValueError(f"the two label lists differ in length ({len(a)} vs {len(b)})")
    if not a:
        raise ValueError("agreement needs at least one pair of labels")
    return np.column_stack([np.asarray(a, dtype=object), np.asarray(b, dtype=object)]).astype(str)


def agreement(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Share of items that raters ``a`` and ``b`` labelled the same."""
    return float(agreement_statistic(_pairs(a, b), np.ones((1, len(a))))[0])


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels: (observed - chance) / (1 - chance).

    Chance agreement comes from each rater's own label frequencies. NaN when
    both raters use one and the same label throughout (chance agreement is 1).
    """
    return float(kappa_statistic(_pairs(a, b), np.ones((1, len(a))))[0])


def agreement_interval(
    a: Sequence[Hashable], b: Sequence[Hashable], clusters: Sequence[Hashable], **kw: Any
) -> Interval:
    """:func:`agreement` with a cluster-bootstrap interval (keywords as :func:`cluster_bootstrap`)."""
    return cluster_bootstrap(_pairs(a, b), clusters, "agreement", **kw)


def kappa_interval(
    a: Sequence[Hashable], b: Sequence[Hashable], clusters: Sequence[Hashable], **kw: Any
) -> Interval:
    """:func:`cohen_kappa` with a cluster-bootstrap interval (resamples where kappa is
    undefined are left out of the percentiles)."""
    return cluster_bootstrap(_pairs(a, b), clusters, "kappa", **kw)


# -- Table 1 -----------------------------------------------------------------------
def _column_members(tags: dict[str, Any]) -> list[str]:
    return [*tags["types"], tags["memory"], tags["dynamics"], "All"]


def _task_means(
    results: Iterable[EvalResult],
) -> dict[str, tuple[str, dict[str, Any], float, float]]:
    """task id -> (environment, tags, mean score, mean pass 0-100) over its runs."""
    by_task: dict[str, list[EvalResult]] = defaultdict(list)
    for r in results:
        by_task[r.task_id].append(r)
    return {
        t: (
            rs[0].env,
            rs[0].tags,
            float(np.mean([r.score for r in rs])),
            100.0 * float(np.mean([float(r.passed) for r in rs])),
        )
        for t, rs in sorted(by_task.items())
    }


def _column_intervals(
    rows: list[tuple[str, dict[str, Any], float, float]], resamples: int, seed: int, level: float
) -> dict[str, dict[str, dict[str, Any] | None]]:
    out: dict[str, dict[str, dict[str, Any] | None]] = {}
    for c in TABLE1_COLUMNS:
        members = [row for row in rows if c in _column_members(row[1])]
        if not members:
            out[c] = {"score": None, "pass_rate": None}
            continue
        envs = [row[0] for row in members]
        out[c] = {
            m: cluster_bootstrap(
                [row[i] for row in members],
                envs,
                "cluster_mean",
                resamples=resamples,
                seed=seed,
                level=level,
            ).as_dict()
            for m, i in (("score", 2), ("pass_rate", 3))
        }
    return out


def table1_intervals(
    results: Iterable[EvalResult],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> dict[str, dict[str, dict[str, Any] | None]]:
    """Every Table-1 column's score and pass rate with an environment-clustered interval.

    The estimate is the column as Table 1 computes it (runs averaged per task,
    tasks per environment, environments weighted equally); a resample draws the
    column's environments with replacement. Returns ``{column: {"score": ...,
    "pass_rate": ...}}`` with :meth:`Interval.as_dict` values (None for a
    column without environments).
    """
    return _column_intervals(list(_task_means(results).values()), resamples, seed, level)


def paired_table1(
    a: Iterable[EvalResult],
    b: Iterable[EvalResult],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
) -> dict[str, Any]:
    """Run A minus run B per Table-1 column, on the episodes both played.

    Episodes are matched by task and run index; each task's difference is the
    mean over its matched episodes, and a column's difference is the
    equal-environment mean of those, so it equals A's column minus B's column
    computed on the matched episodes alone. The interval resamples
    environments, keeping each task's pair together.

    Returns ``{"matched_episodes", "matched_tasks", "only_a", "only_b",
    "columns": {column: {"score": ..., "pass_rate": ...}}}``.

    Raises:
        ValueError: when the two runs share no episode.
    """
    ka = {(r.task_id, r.run_index): r for r in a}
    kb = {(r.task_id, r.run_index): r for r in b}
    keys = sorted(set(ka) & set(kb))
    if not keys:
        raise ValueError(
            "the two runs share no episode (same task and run index); a paired "
            "comparison needs runs over the same tasks"
        )
    diffs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    where: dict[str, EvalResult] = {}
    for k in keys:
        ra, rb = ka[k], kb[k]
        where.setdefault(k[0], ra)
        diffs[k[0]].append((ra.score - rb.score, 100.0 * (float(ra.passed) - float(rb.passed))))
    rows = [
        (
            where[t].env,
            where[t].tags,
            float(np.mean([d[0] for d in ds])),
            float(np.mean([d[1] for d in ds])),
        )
        for t, ds in sorted(diffs.items())
    ]
    return {
        "matched_episodes": len(keys),
        "matched_tasks": len(rows),
        "only_a": len(set(ka) - set(kb)),
        "only_b": len(set(kb) - set(ka)),
        "columns": _column_intervals(rows, resamples, seed, level),
    }
