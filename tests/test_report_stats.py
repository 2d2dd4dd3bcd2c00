"""vical.report.stats on hand-built data whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.test_report import res
from vical.report import stats
from vical.report.table import build_report


def _wiki_raters() -> tuple[list[str], list[str]]:
    """50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15.

    Observed agreement 35/50 = 0.7; A says yes half the time, B 60%, so chance
    agreement is 0.5 * 0.6 + 0.5 * 0.4 = 0.5 and kappa = (0.7 - 0.5) / 0.5 = 0.4.
    """
    a = ["yes"] * 20 + ["yes"] * 5 + ["no"] * 10 + ["no"] * 15
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    return a, b


def test_kappa_and_agreement_match_hand_computation():
    a, b = _wiki_raters()
    assert stats.agreement(a, b) == pytest.approx(0.7)
    assert stats.cohen_kappa(a, b) == pytest.approx(0.4)
    assert stats.cohen_kappa(b, a) == pytest.approx(0.4)  # symmetric


def test_kappa_three_labels_by_hand():
    # confusion (rows A, columns B) over labels x, y, z:
    #   x: 4 1 0 / y: 0 3 1 / z: 1 0 2   (n = 12)
    # observed = 9/12 = 0.75; A margins 5,4,3; B margins 5,4,3
    # chance = (25 + 16 + 9) / 144 = 50/144; kappa = (0.75 - 50/144) / (1 - 50/144) = 58/94
    a = ["x"] * 5 + ["y"] * 4 + ["z"] * 3
    b = ["x"] * 4 + ["y"] + ["y"] * 3 + ["z"] + ["x"] + ["z"] * 2
    assert stats.agreement(a, b) == pytest.approx(0.75)
    assert stats.cohen_kappa(a, b) == pytest.approx(58 / 94)


def test_kappa_edge_cases():
    assert stats.cohen_kappa([1, 2, 3, 1], [1, 2, 3, 1]) == pytest.approx(1.0)
    assert math.isnan(stats.cohen_kappa(["a", "a"], ["a", "a"]))  # chance agreement is 1
    # agreement no better than chance: A always "a", B half and half
    assert stats.cohen_kappa(["a"] * 4, ["a", "b", "a", "b"]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="differ in length"):
        stats.cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="at least one"):
        stats.agreement([], [])


def test_named_estimates():
    values = [1.0, 3.0, 10.0]
    clusters = ["a", "a", "b"]
    m = stats.cluster_bootstrap(values, clusters, "mean", resamples=200)
    cm = stats.cluster_bootstrap(values, clusters, "cluster_mean", resamples=200)
    assert m.estimate == pytest.approx(14 / 3)
    assert cm.estimate == pytest.approx((2 + 10) / 2)
    assert cm.clusters == 2 and cm.resamples == 200 and cm.level == 0.95
    # two clusters: a resample is {a,a}, {a,b} or {b,b}, so the cluster mean is 2, 6 or 10
    assert 2.0 <= cm.low <= cm.estimate <= cm.high <= 10.0


def test_seeded_and_reproducible():
    rng = np.random.default_rng(1)
    values = rng.normal(size=200)
    clusters = [f"e{i % 20}" for i in range(200)]
    a = stats.cluster_bootstrap(values, clusters, "mean", seed=3, resamples=2000)
    b = stats.cluster_bootstrap(values, clusters, "mean", seed=3, resamples=2000)
    c = stats.cluster_bootstrap(values, clusters, "mean", seed=4, resamples=2000)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    assert a.low < a.estimate < a.high


def test_callable_statistic_equals_named():
    """The chunked (B, n) weight path gives what the per-cluster fast path gives."""
    rng = np.random.default_rng(2)
    values = rng.uniform(0, 100, size=90)
    clusters = [f"e{i % 13}" for i in range(90)]
    named = stats.cluster_bootstrap(values, clusters, "mean", seed=5, resamples=3000)
    fn = stats.cluster_bootstrap(values, clusters, stats.weighted_mean, seed=5, resamples=3000)
    assert fn.estimate == pytest.approx(named.estimate)
    assert fn.low == pytest.approx(named.low) and fn.high == pytest.approx(named.high)


def test_resample_weights_equal_explicit_resampling():
    """A weight row gives the statistic of the data set with each cluster repeated."""
    values = np.array([1.0, 2.0, 7.0, 4.0, 9.0])
    clusters = ["a", "a", "b", "c", "c"]
    index, k = stats._cluster_index(clusters, len(values))
    counts = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]])
    explicit_mean, explicit_cm = [], []
    for row in counts:
        data = [
            (v, c)
            for v, c in zip(values, clusters, strict=True)
            for _ in range(int(row[ord(c) - 97]))
        ]
        explicit_mean.append(np.mean([v for v, _ in data]))
        # cluster mean: each drawn copy of a cluster contributes its mean once
        means = {"a": 1.5, "b": 7.0, "c": 6.5}
        explicit_cm.append(sum(row[i] * means[c] for i, c in enumerate("abc")) / row.sum())
    got_mean = stats._resampled(values, index, k, "mean", counts)
    got_cm = stats._resampled(values, index, k, "cluster_mean", counts)
    assert got_mean == pytest.approx(explicit_mean)
    assert got_cm == pytest.approx(explicit_cm)


def test_coverage_near_nominal():
    """Over many simulated experiments the 95% interval holds the true mean about 95%
    of the time (30 clusters with their own offsets, 5 noisy observations each)."""
    rng = np.random.default_rng(12345)
    truth, trials, k, per = 50.0, 400, 30, 5
    clusters = np.repeat(np.arange(k), per)
    hits = naive_hits = 0
    for t in range(trials):
        offsets = rng.normal(0.0, 10.0, size=k)
        values = truth + offsets[clusters] + rng.normal(0.0, 5.0, size=k * per)
        iv = stats.cluster_bootstrap(values, clusters, "cluster_mean", resamples=1000, seed=t)
        hits += iv.low <= truth <= iv.high
        # the same data resampled observation by observation ignores the shared offsets
        naive = stats.cluster_bootstrap(values, np.arange(k * per), "mean", resamples=1000, seed=t)
        naive_hits += naive.low <= truth <= naive.high
    coverage = hits / trials
    assert naive_hits / trials < 0.8  # the simulation does punish ignoring the clusters
    # binomial s.d. at 95% over 400 trials is 1.1 points; percentile intervals with
    # 30 clusters run a little narrow
    assert 0.91 <= coverage <= 0.985, coverage


def test_ignoring_clusters_would_be_too_narrow():
    """Clustered data: treating every observation as its own cluster narrows the interval."""
    rng = np.random.default_rng(7)
    k, per = 20, 10
    clusters = np.repeat(np.arange(k), per)
    values = rng.normal(0, 10, size=k)[clusters] + rng.normal(0, 1, size=k * per)
    clustered = stats.cluster_bootstrap(values, clusters, "mean", resamples=2000)
    naive = stats.cluster_bootstrap(values, np.arange(k * per), "mean", resamples=2000)
    assert (clustered.high - clustered.low) > 2 * (naive.high - naive.low)


def test_kappa_interval():
    a, b = _wiki_raters()
    a, b = a * 7, b * 7  # 350 items
    envs = [f"env{i % 37}" for i in range(len(a))]
    kappa = stats.kappa_interval(a, b, envs)  # default 10,000 resamples
    agree = stats.agreement_interval(a, b, envs)
    assert kappa.estimate == pytest.approx(0.4) and agree.estimate == pytest.approx(0.7)
    assert kappa.resamples == 10_000 and kappa.clusters == 37
    assert kappa.low < 0.4 < kappa.high and agree.low < 0.7 < agree.high


def test_degenerate_and_bad_input():
    one = stats.cluster_bootstrap([1.0, 2.0], ["a", "a"], "mean")
    assert one.estimate == pytest.approx(1.5)
    assert math.isnan(one.low) and math.isnan(one.high)
    assert one.as_dict()["low"] is None
    with pytest.raises(ValueError, match="one cluster label per observation"):
        stats.cluster_bootstrap([1.0, 2.0], ["a"], "mean")
    with pytest.raises(ValueError, match="unknown statistic 'median'"):
        stats.cluster_bootstrap([1.0], ["a"], "median")
    with pytest.raises(ValueError, match="level must be between 0 and 1"):
        stats.cluster_bootstrap([1.0], ["a"], "mean", level=95)
    with pytest.raises(ValueError, match=r"\(n, 2\) array"):
        stats.cluster_bootstrap([1.0, 2.0], ["a", "b"], "kappa")
    with pytest.raises(ValueError, match="at least one observation"):
        stats.cluster_bootstrap([], [], "mean")


def _run(offset: float = 0.0, flip: bool = False) -> list:
    out = []
    for e, types, n in (("a", ("Maze",), 3), ("b", ("Shooter",), 2), ("c", ("Maze", "Dodge"), 4)):
        for v in range(n):
            for k in range(2):
                score = min(100.0, 10.0 * v + 5 * k + 20 * (e == "b") + offset)
                out.append(res(e, str(v), k, score, (v + k) % 2 == int(flip), types=types))
    return out


def test_table1_intervals_estimate_the_table1_columns():
    results = _run()
    rep = build_report(results, "run")
    iv = stats.table1_intervals(results, resamples=500)
    for c, cell in rep.columns.items():
        if cell.score is None:
            assert iv[c] == {"score": None, "pass_rate": None}
            continue
        assert iv[c]["score"]["estimate"] == pytest.approx(cell.score)
        assert iv[c]["pass_rate"]["estimate"] == pytest.approx(cell.pass_rate)
        assert iv[c]["score"]["clusters"] == cell.n_envs
    assert iv["All"]["score"]["low"] < rep.columns["All"].score < iv["All"]["score"]["high"]


def test_paired_difference_is_the_column_difference():
    a, b = _run(offset=10.0), _run(flip=True)
    b = [r for r in b if not (r.task_id == "a/0" and r.run_index == 1)]  # one unmatched
    paired = stats.paired_table1(a, b, resamples=500)
    assert paired["matched_episodes"] == len(b) and paired["only_a"] == 1 and paired["only_b"] == 0
    keys = {(r.task_id, r.run_index) for r in b}
    ra = build_report([r for r in a if (r.task_id, r.run_index) in keys], "a")
    rb = build_report(b, "b")
    for c in ("All", "Maze", "Shooter", "Dodge"):
        d = paired["columns"][c]
        assert d["score"]["estimate"] == pytest.approx(ra.columns[c].score - rb.columns[c].score)
        assert d["pass_rate"]["estimate"] == pytest.approx(
            ra.columns[c].pass_rate - rb.columns[c].pass_rate
        )
    # A scores exactly 10 points above B on every matched episode (no score reaches
    # the cap), so every resample's difference is 10
    all_score = paired["columns"]["All"]["score"]
    assert all_score["low"] == pytest.approx(10.0) and all_score["high"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="share no episode"):
        stats.paired_table1(a, [res("z", "0", 0, 1.0, False)])
