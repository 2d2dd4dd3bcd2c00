"""vical.envs.portable: simulator modules run their float math through fpmath."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest

from vical.envs import fpmath as F
from vical.envs import portable

TOY = textwrap.dedent(
    """
    import math
    import numpy as np
    from numpy import cos

    def kinematics(x, h):
        return np.arctan(0.5 * np.tan(h)) + cos(h) * x ** 2 + math.exp(-x)

    def ints(n):
        return 2 ** n

    class Base:
        def size(self):
            return 1.0

    class Car(Base):
        def __init__(self, p):
            self.p = np.asarray(p, dtype=float)

        def size(self):
            return super().size() + np.linalg.norm(self.p)

        @property
        def speed(self):
            return self.p.dot(self.p) ** 0.5

        @staticmethod
        def rotate(a, v):
            m = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
            return m @ v

        @classmethod
        def grow(cls, v):
            v **= 3
            return v

        def not_math(self):
            return np.sqrt(2.0) + np.clip(3.0, 0, 1)
    """
)


@pytest.fixture()
def toy(tmp_path, monkeypatch):
    name = "vical_portable_toy"
    (tmp_path / f"{name}.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    yield importlib.import_module(name), name
    sys.modules.pop(name, None)
    portable._installed.pop(name, None)


def test_rewrite_routes_every_call_and_operator_and_keeps_behaviour(toy):
    mod, name = toy
    before = portable.leftovers(name)
    assert {w.split(": ")[1] for w in before} >= {"np.arctan", "np.tan", "cos", "**", "math.exp"}
    assert {w.split(": ")[1] for w in before} >= {"@", ".dot", "np.linalg.norm", "**="}
    car = mod.Car([3.0, 4.0])  # made before install: existing objects pick it up too
    portable.install([name])
    assert portable.leftovers(name) == []
    assert "Car.not_math" not in portable.installed()[name]  # nothing to rewrite there
    x, h = 1.7, 0.3
    want = F.arctan(0.5 * F.tan(h)) + F.cos(h) * (x * x) + F.exp_(-x)
    assert mod.kinematics(x, h) == want
    assert mod.ints(10) == 1024 and type(mod.ints(10)) is int
    assert car.size() == 6.0  # zero-argument super() still works
    assert car.speed == F.pow_(25.0, 0.5)
    v = np.array([1.0, 0.0])
    assert mod.Car.rotate(0.5, v).tolist() == [F.cos_(0.5), F.sin_(0.5)]
    assert mod.Car.grow(2.0) == 8.0
    portable.install([name])  # idempotent
    assert car.size() == 6.0


def test_every_simulator_module_is_fully_rewritten():
    from vical.envs import classic, flappy, highway

    for adapter in (highway, classic, flappy):
        assert adapter.PORTABLE_MODULES
        for name in adapter.PORTABLE_MODULES:
            assert name in portable.installed()
            assert portable.leftovers(name) == [], name
    # the kinematics that differed across CPUs are among the rewritten functions
    done = portable.installed()
    assert "Vehicle.step" in done["highway_env.vehicle.kinematics"]
    assert "ControlledVehicle.steering_control" in done["highway_env.vehicle.controller"]
    assert "IDMVehicle.acceleration" in done["highway_env.vehicle.behavior"]
    assert "CartPoleEnv.step" in done["gymnasium.envs.classic_control.cartpole"]
    assert "MountainCarEnv.step" in done["gymnasium.envs.classic_control.mountain_car"]
    assert "AcrobotEnv._dsdt" in done["gymnasium.envs.classic_control.acrobot"]


def test_a_closure_other_than_super_is_refused(tmp_path, monkeypatch):
    name = "vical_portable_closure"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            def make(k):
                def f(x):
                    return np.sin(x) * k
                return f

            g = make(2.0)
            g.__module__ = __name__
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    try:
        with pytest.raises(ValueError, match="closure"):
            portable.install([name])
    finally:
        sys.modules.pop(name, None)
        portable._installed.pop(name, None)
