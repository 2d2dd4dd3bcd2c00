"""vical.envs.fpmath: close to the platform's math, and the same bits on every CPU level."""

from __future__ import annotations

import hashlib
import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest

from tests.behaviour import LEVELS, child_environ
from vical.envs import fpmath as F


def ulps(got: float, want: float) -> float:
    if got == want or (math.isnan(got) and math.isnan(want)):
        return 0.0
    return abs(got - want) / math.ulp(want)


R = random.Random(7)
CASES = {
    "sin": (F.sin_, math.sin, [R.uniform(-60, 60) for _ in range(4000)], 1),
    "cos": (F.cos_, math.cos, [R.uniform(-60, 60) for _ in range(4000)], 1),
    "tan": (F.tan_, math.tan, [R.uniform(-1.5, 1.5) for _ in range(4000)], 4),
    "atan": (F.atan_, math.atan, [R.uniform(-40, 40) for _ in range(4000)], 2),
    "asin": (F.asin_, math.asin, [R.uniform(-1, 1) for _ in range(4000)], 4),
    "acos": (F.acos_, math.acos, [R.uniform(-1, 1) for _ in range(4000)], 4),
    "exp": (F.exp_, math.exp, [R.uniform(-700, 700) for _ in range(4000)], 1),
    "log": (F.log_, math.log, [math.exp(R.uniform(-700, 700)) for _ in range(4000)], 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_within_a_few_ulps_of_libm(name):
    mine, ref, xs, bound = CASES[name]
    worst = max(ulps(mine(x), ref(x)) for x in xs)
    assert worst <= bound, f"{name}: {worst} ulps"


def test_atan2_and_pow_close_and_exact_where_they_must_be():
    pts = [(R.uniform(-5, 5), R.uniform(-5, 5)) for _ in range(4000)]
    assert max(ulps(F.atan2_(y, x), math.atan2(y, x)) for y, x in pts) <= 2
    ps = [(R.uniform(0.01, 10), R.uniform(-8, 8)) for _ in range(4000)]
    assert max(ulps(F.pow_(a, b), math.pow(a, b)) for a, b in ps) <= 64
    # integer powers multiply: x**2 is exactly x*x, as IEEE rounds it
    for a, _ in ps:
        assert F.pow_(a, 2.0) == a * a
        assert F.pow_(a, 3.0) == (a * a) * a or ulps(F.pow_(a, 3.0), a**3) <= 2


SPECIAL_ATAN2 = [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (1.0, 0.0), (-1.0, 0.0)]
SPECIAL_ATAN2 += [(0.0, -1.0), (-0.0, -1.0), (math.inf, math.inf), (-math.inf, 1.0)]
SPECIAL_ATAN2 += [(1.0, -math.inf), (-1.0, -math.inf), (1.0, math.inf), (math.inf, -math.inf)]


@pytest.mark.parametrize("y,x", SPECIAL_ATAN2)
def test_atan2_special_values_match_ieee(y, x):
    got, want = F.atan2_(y, x), math.atan2(y, x)
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


SPECIAL_POW = [(0.0, 2.0), (-0.0, 3.0), (-0.0, -3.0), (0.0, -2.0), (-2.0, 3.0), (-2.0, 0.5)]
SPECIAL_POW += [(math.inf, 2.0), (-math.inf, 3.0), (-math.inf, -3.0), (2.0, math.inf)]
SPECIAL_POW += [(0.5, math.inf), (1.0, math.nan), (math.nan, 0.0), (-1.0, math.inf)]


@pytest.mark.parametrize("x,y", SPECIAL_POW)
def test_pow_special_values_match_numpy(x, y):
    with np.errstate(all="ignore"):
        want = float(np.power(np.float64(x), np.float64(y)))
    got = F.pow_(x, y)
    assert (math.isnan(got) and math.isnan(want)) or (
        got == want and math.copysign(1, got) == math.copysign(1, want)
    )


def test_special_inputs_of_the_unary_functions():
    for fn in (F.sin_, F.cos_, F.tan_):
        assert math.isnan(fn(math.inf)) and math.isnan(fn(math.nan))
    assert F.exp_(1000.0) == math.inf and F.exp_(-1000.0) == 0.0 and F.exp_(0.0) == 1.0
    assert F.log_(0.0) == -math.inf and math.isnan(F.log_(-1.0)) and F.log_(1.0) == 0.0
    assert F.atan_(math.inf) == F.PI_2 and F.asin_(1.0) == F.PI_2 and math.isnan(F.asin_(1.5))
    assert F.exp_(-740.0) > 0.0  # subnormal results survive
    assert ulps(F.sin_(1e12), math.sin(1e12)) <= 1  # the exact reduction for huge inputs


def test_numpy_shapes_and_types_follow_numpy():
    x = np.array([[0.1, 0.2], [0.3, 0.4]])
    assert F.sin(x).shape == (2, 2) and F.sin(x).dtype == np.float64
    assert type(F.sin(0.5)) is np.float64 and type(F.sin(np.float32(0.5))) is np.float64
    # an element gives the same bits alone or inside an array
    assert all(F.arctan(x)[i, j] == F.arctan(x[i, j]) for i in range(2) for j in range(2))
    assert F.arctan2(np.array([1.0, -1.0]), 2.0).shape == (2,)
    # ** keeps numpy's and Python's types: ints stay ints, Python floats stay floats
    assert F.power(2, 10) == 1024 and type(F.power(2, 10)) is int
    assert type(F.power(2.0, 2)) is float and type(F.power(np.float64(2.0), 2)) is np.float64
    assert F.power(np.arange(4), 2).tolist() == [0, 1, 4, 9]
    assert F.power(np.array([1.5, 2.0]), 2).tolist() == [2.25, 4.0]
    with np.errstate(divide="ignore"):  # a numpy zero divides to inf, as before
        assert 1.0 / F.power(np.float64(0.0), 2) == math.inf


def test_products_without_blas_are_exact_sums_in_order():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    v = np.array([0.5, -1.0])
    assert F.matmul(a, v).tolist() == (a @ v).tolist()
    assert F.matmul(a, a).tolist() == (a @ a).tolist()
    assert F.matmul(v, a).tolist() == (v @ a).tolist()
    assert F.dot(v, v) == 1.25 and F.dot([1.0, 2.0], [3.0, 4.0]) == 11.0
    assert F.dot(a, v).tolist() == [-1.5, -2.5]
    assert F.norm([3.0, 4.0]) == 5.0 and F.norm(np.array([[3.0], [4.0]])) == 5.0
    # left to right: (1e16 + 1) - 1e16 loses the 1, a pairwise or FMA sum might not
    assert F.dot([1e16, 1.0, -1e16], [1.0, 1.0, 1.0]) == 0.0
    with pytest.raises(ValueError):
        F.matmul(a, np.ones(3))


_BATTERY = """
import hashlib, json, random, sys
import numpy as np
from vical.envs import fpmath as F
r = random.Random(3)
xs = [r.uniform(-50, 50) for _ in range(3000)]
ps = [(r.uniform(0.01, 9), r.uniform(-6, 6)) for _ in range(3000)]
out = {}
for name in ("sin", "cos", "tan", "arctan", "exp"):
    f = getattr(F, name)
    arg = np.array(xs) / (10.0 if name == "exp" else 1.0)
    out[name] = hashlib.sha256(np.asarray(f(arg)).tobytes()).hexdigest()
out["arcsin"] = hashlib.sha256(F.arcsin(np.array(xs) / 50).tobytes()).hexdigest()
out["log"] = hashlib.sha256(F.log(np.abs(xs)).tobytes()).hexdigest()
out["arctan2"] = hashlib.sha256(F.arctan2(np.array(xs), np.array(xs[::-1])).tobytes()).hexdigest()
out["power"] = hashlib.sha256(
    F.power(np.array([a for a, _ in ps]), np.array([b for _, b in ps])).tobytes()
).hexdigest()
m = np.array(xs[:1200]).reshape(-1, 3, 4)
out["matmul"] = hashlib.sha256(F.matmul(m[0], m[1].T).tobytes()).hexdigest()
print(json.dumps(out, sort_keys=True))
"""


def test_same_bits_under_every_cpu_level():
    """One battery of inputs hashes the same with numpy, glibc and OpenBLAS held to
    each level; numpy is imported before vical, as a user's script may do."""
    from numpy.core._multiarray_umath import __cpu_features__

    found = [k for k, v in __cpu_features__.items() if v]
    seen = {}
    for level in sorted(LEVELS):
        env = child_environ(level, found)
        r = subprocess.run(
            [sys.executable, "-c", _BATTERY], env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        seen[level] = json.loads(r.stdout)
    first = seen[sorted(LEVELS)[0]]
    assert all(v == first for v in seen.values()), {
        k: [n for n in v if v[n] != first[n]] for k, v in seen.items()
    }
    assert hashlib.sha256(json.dumps(first).encode()).hexdigest()  # a real battery ran
    assert set(first) == {
        "sin",
        "cos",
        "tan",
        "arctan",
        "exp",
        "arcsin",
        "log",
        "arctan2",
        "power",
        "matmul",
    }
