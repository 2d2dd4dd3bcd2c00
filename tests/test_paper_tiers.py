"""Table 23's difficulty tiers as a check on the random reference: each environment's
random mean against the most its tier allows (a report, never a target)."""

from __future__ import annotations

import pytest

from vical.paper import ENVS, TABLE23, TABLE23_TIERS, TierCheck, tier_random_bound, tier_report


def test_table23_places_every_environment_once():
    assert set(TABLE23) == set(ENVS)
    counts = {t: sum(1 for v in TABLE23.values() if v == t) for t in TABLE23_TIERS}
    assert counts == {"Easy": 9, "Medium": 19, "Hard": 9}  # Table 23's "Games" column
    assert TABLE23["mountaincar"] == "Easy" and TABLE23["tennis"] == "Hard"
    assert TABLE23["dodgeball"] == "Hard" and TABLE23["ninja"] == "Medium"


def test_observed_gaps_lie_inside_each_tiers_definition():
    for (lo, hi), (seen_lo, seen_hi) in TABLE23_TIERS.values():
        assert seen_lo <= seen_hi
        assert lo is None or seen_lo >= lo
        assert hi is None or seen_hi <= hi


def test_bounds_are_100_minus_the_lowest_observed_gap():
    assert tier_random_bound("Easy") == pytest.approx(28.3)
    assert tier_random_bound("Medium") == pytest.approx(70.0)
    assert tier_random_bound("Hard") == pytest.approx(93.1)
    with pytest.raises(ValueError, match="unknown Table 23 tier 'Trivial'"):
        tier_random_bound("Trivial")


def test_report_flags_a_random_mean_above_its_bound_and_passes_one_below():
    rows = tier_report({"mountaincar": 29.2, "taxi": 7.8, "ninja": 70.0, "tennis": 95.0})
    by = {r.env: r for r in rows}
    assert [r.env for r in rows] == sorted(by)
    assert by["mountaincar"] == TierCheck("mountaincar", "Easy", 29.2, 28.3)
    assert not by["mountaincar"].within and by["mountaincar"].excess == pytest.approx(0.9)
    assert by["taxi"].within and by["taxi"].excess == 0.0
    assert by["ninja"].within  # the bound itself is allowed
    assert not by["tennis"].within and by["tennis"].bound == pytest.approx(93.1)


def test_report_names_an_unknown_environment():
    with pytest.raises(ValueError, match="not an environment of Table 23: pacman"):
        tier_report({"pacman": 1.0, "taxi": 2.0})
    assert tier_report({}) == []
