"""Score families: bounds, monotonicity and edge cases."""

import pytest

from vical.envs.scoring import (
    EventCounter,
    Milestones,
    capped_ratio,
    clamp,
    horizon_ratio,
    path_efficiency,
)


def test_capped_ratio_floor_cap_and_linear():
    assert capped_ratio(-5, 10) == 0.0
    assert capped_ratio(5, 10) == 50.0
    assert capped_ratio(50, 10) == 100.0
    with pytest.raises(ValueError):
        capped_ratio(1, 0)


def test_event_counter_is_monotonic():
    c = EventCounter(target=4)
    c.add(1)
    c.add(-3)
    assert c.count == 1 and c.score() == 25.0
    c.add(10)
    assert c.score() == 100.0


def test_horizon_ratio():
    assert horizon_ratio(15, 30) == 50.0
    assert horizon_ratio(40, 30) == 100.0


def test_path_efficiency_orders_outcomes():
    none = path_efficiency(10, 10, False, 0, 10)
    half = path_efficiency(10, 5, False, 5, 10)
    slow = path_efficiency(10, 0, True, 20, 10)
    best = path_efficiency(10, 0, True, 10, 10)
    assert none == 0.0 < half < slow < best == 100.0
    assert half == 40.0


def test_milestones_partial_and_weights():
    m = Milestones({"a": 40, "b": 40, "c": 20})
    m.partial = 0.5
    assert m.score() == 20.0
    m.hit("a")
    assert m.score() == 60.0
    m.hit_all(["b", "c"])
    assert m.score() == 100.0
    with pytest.raises(KeyError):
        m.hit("z")
    with pytest.raises(ValueError):
        Milestones({"a": 10})


def test_clamp():
    assert clamp(-1) == 0.0 and clamp(101) == 100.0
