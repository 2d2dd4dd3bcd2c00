"""Float math that gives the same bits on every x86-64 CPU.

The simulators with float physics (highway-env, CartPole, Acrobot, MountainCar,
Flappy Bird) call ``sin``, ``cos``, ``arctan``, ``power``, ``dot`` and the like
every frame. Where those come from decides the bits:

- numpy 1.26 picks its float64 loops for ``tan``, ``arcsin``, ``arctan``,
  ``arctan2``, ``exp``, ``log`` and ``power`` by the CPU it finds at import:
  AVX-512 machines get SVML loops whose last bits differ from the plain loops
  that every other machine runs;
- the plain loops, and Python's ``math``, call glibc's libm, which itself picks
  an FMA or a non-FMA build of ``sin``, ``cos``, ``exp``, ``log``, ``pow``,
  ``atan`` and ``atan2`` by CPU (and its results also change between glibc
  releases);
- ``dot``, ``@`` and ``linalg.norm`` go to OpenBLAS, which picks a kernel per
  CPU family (Haswell, SkylakeX, Cooperlake, Zen, ...) whose sums round
  differently.

Nothing here calls any of them. Every function below is built from the
operations IEEE 754 rounds exactly (``+ - * /``, ``sqrt``, ``floor``,
``ldexp``/``frexp``) on Python floats, in a fixed order, so its result depends
on its inputs alone: not on the CPU, its feature level, glibc, OpenBLAS or
whether numpy was imported first. The price is accuracy of about one or two
units in the last place instead of half a unit, which no simulator notices,
and some speed (``benchmarks/fp_cost.py``).

Each function takes what numpy's function takes for the simulators' uses
(Python and numpy scalars, arrays, nested lists) and returns what numpy
returns: a ``numpy.float64`` for a scalar, an array of the input's shape
otherwise. Arrays are done element by element with the scalar code, so a value
comes out the same whether it was passed alone or inside an array.

:mod:`vical.envs.portable` routes a simulator module's calls and operators here.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

# ---------------------------------------------------------------------------
# Constants, derived from exact rationals so that no libm call is involved.

# pi to 60 significant digits (a fact, not a computation)
_PI = Fraction("3.14159265358979323846264338327950288419716939937510582097494459")
_LN2 = Fraction("0.693147180559945309417232121458176568075500134360255254120680009")


def _f(q: Fraction) -> float:
    """The double nearest to ``q`` (Fraction.__float__ rounds correctly)."""
    return float(q)


def _split(q: Fraction, bits: int) -> tuple[float, Fraction]:
    """``q``'s leading ``bits`` significant bits as a float, and the exact rest."""
    m, e = math.frexp(float(q))
    hi = math.ldexp(math.floor(math.ldexp(m, bits)), e - bits)
    return hi, q - Fraction(hi)


PI = _f(_PI)
PI_2 = _f(_PI / 2)
PI_4 = _f(_PI / 4)
PI_6 = _f(_PI / 6)
_TWO_OVER_PI = _f(2 / _PI)
# pi/2 in three parts of 33, 33 and 53 bits: n * part is exact for |n| < 2**20
_P1, _rest = _split(_PI / 2, 33)
_P2, _rest = _split(_rest, 33)
_P3 = _f(_rest)
_LN2_HI, _rest = _split(_LN2, 32)
_LN2_LO = _f(_rest)
_INV_LN2 = _f(1 / _LN2)
_SQRT3 = math.sqrt(3.0)  # sqrt is correctly rounded by IEEE 754
_SQRT_HALF = math.sqrt(0.5)
_TAN_PI_12 = _f(Fraction(2) - Fraction(_SQRT3))  # about 0.268 (reduction edge)


def _series(terms: int, coef: Callable[[int], Fraction]) -> tuple[float, ...]:
    return tuple(_f(coef(k)) for k in range(terms))


def _fact(n: int) -> int:
    return math.factorial(n)


# sin r = r + r^3 * S(z), z = r^2:  S = sum_k (-1)^(k+1) / (2k+3)!
_SIN = _series(10, lambda k: Fraction((-1) ** (k + 1), _fact(2 * k + 3)))
# cos r = 1 - z/2 + z^2 * C(z):  C = sum_k (-1)^k / (2k+4)!
_COS = _series(10, lambda k: Fraction((-1) ** k, _fact(2 * k + 4)))
# atan t = t + t^3 * A(z): A = sum_k (-1)^(k+1) / (2k+3)   (|t| <= 0.268)
_ATAN = _series(15, lambda k: Fraction((-1) ** (k + 1), 2 * k + 3))
# exp r = 1 + r + r^2 * E(r): E = sum_k 1 / (k+2)!   (|r| <= ln2/2)
_EXP = _series(14, lambda k: Fraction(1, _fact(k + 2)))
# log(1+f) = 2 atanh(s), s = f/(2+f): 2 s + s^3 * L(z): L = sum_k 2/(2k+3)
_LOG = _series(13, lambda k: Fraction(2, 2 * k + 3))

_HUGE_REDUCTION = 2.0**19  # beyond this, reduce by pi/2 exactly with fractions
_PI_EXACT = Fraction(
    "3." + "14159265358979323846264338327950288419716939937510"
    "58209749445923078164062862089986280348253421170679"
    "82148086513282306647093844609550582231725359408128"
    "48111745028410270193852110555964462294895493038196"
    "44288109756659334461284756482337867831652712019091"
    "45648566923460348610454326648213393607260249141273"
    "72458700660631558817488152092096282925409171536436"
    "78925903600113305305488204665213841469519415116094"
)


def _poly(z: float, c: tuple[float, ...]) -> float:
    acc = c[-1]
    for k in range(len(c) - 2, -1, -1):
        acc = acc * z + c[k]
    return acc


# ---------------------------------------------------------------------------
# Scalar functions on Python floats.


def _reduce_half_pi(x: float) -> tuple[int, float]:
    """n and r with x = n * pi/2 + r, |r| <= about pi/4."""
    if abs(x) < _HUGE_REDUCTION:
        n = math.floor(x * _TWO_OVER_PI + 0.5)
        r = ((x - n * _P1) - n * _P2) - n * _P3
        return n, r
    q = Fraction(x) / (_PI_EXACT / 2)
    n = math.floor(q + Fraction(1, 2))
    return n, float(Fraction(x) - n * (_PI_EXACT / 2))


def _sin_r(r: float) -> float:
    z = r * r
    return r + r * z * _poly(z, _SIN)


def _cos_r(r: float) -> float:
    z = r * r
    hz = 0.5 * z
    w = 1.0 - hz
    # (1 - w) - hz recovers what 1 - hz lost to rounding
    return w + (((1.0 - w) - hz) + z * z * _poly(z, _COS))


def sin_(x: float) -> float:
    if not math.isfinite(x):
        return math.nan
    if abs(x) < 2.0**-27:
        return x
    n, r = _reduce_half_pi(x)
    q = n & 3
    if q == 0:
        return _sin_r(r)
    if q == 1:
        return _cos_r(r)
    if q == 2:
        return -_sin_r(r)
    return -_cos_r(r)


def cos_(x: float) -> float:
    if not math.isfinite(x):
        return math.nan
    if abs(x) < 2.0**-27:
        return 1.0
    n, r = _reduce_half_pi(x)
    q = n & 3
    if q == 0:
        return _cos_r(r)
    if q == 1:
        return -_sin_r(r)
    if q == 2:
        return -_cos_r(r)
    return _sin_r(r)


def tan_(x: float) -> float:
    if not math.isfinite(x):
        return math.nan
    if abs(x) < 2.0**-27:
        return x
    n, r = _reduce_half_pi(x)
    s, c = _sin_r(r), _cos_r(r)
    return s / c if n & 1 == 0 else -c / s


def _atan_small(t: float) -> float:
    z = t * t
    return t + t * z * _poly(z, _ATAN)


def atan_(x: float) -> float:
    if math.isnan(x):
        return x
    a = abs(x)
    if a < 2.0**-27:
        return x
    if a > 1.0:
        r = PI_2 if a == math.inf else PI_2 - atan_(1.0 / a)
    elif a > _TAN_PI_12:
        # atan a = pi/6 + atan((a*sqrt3 - 1) / (a + sqrt3))
        r = PI_6 + _atan_small((a * _SQRT3 - 1.0) / (a + _SQRT3))
    else:
        r = _atan_small(a)
    return r if x > 0 else -r


def atan2_(y: float, x: float) -> float:
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if y == 0.0:
        if x > 0.0 or (x == 0.0 and math.copysign(1.0, x) > 0):
            return y  # +-0
        return math.copysign(PI, y)
    if x == 0.0:
        return math.copysign(PI_2, y)
    if math.isinf(x):
        if math.isinf(y):
            return math.copysign(PI_4 if x > 0 else 3.0 * PI_4, y)
        return math.copysign(0.0, y) if x > 0 else math.copysign(PI, y)
    if math.isinf(y):
        return math.copysign(PI_2, y)
    if x > 0.0:
        return atan_(y / x)
    if y > 0.0:
        return PI - atan_(-y / x)
    return -(PI - atan_(y / x))


def asin_(x: float) -> float:
    if math.isnan(x) or abs(x) > 1.0:
        return math.nan
    if abs(x) == 1.0:
        return math.copysign(PI_2, x)
    return atan2_(x, math.sqrt((1.0 - x) * (1.0 + x)))


def acos_(x: float) -> float:
    if math.isnan(x) or abs(x) > 1.0:
        return math.nan
    return atan2_(math.sqrt((1.0 - x) * (1.0 + x)), x)


def exp_(x: float) -> float:
    if math.isnan(x):
        return x
    if x > 709.782712893384:
        return math.inf
    if x < -745.1332191019412:
        return 0.0
    if abs(x) < 2.0**-54:
        return 1.0 + x
    n = math.floor(x * _INV_LN2 + 0.5)
    r = (x - n * _LN2_HI) - n * _LN2_LO
    p = 1.0 + (r + r * r * _poly(r, _EXP))
    if n < -1021:  # keep the scaling of a subnormal result to one rounding
        return math.ldexp(math.ldexp(p, n + 60), -60)
    return math.ldexp(p, n)


def log_(x: float) -> float:
    if math.isnan(x) or x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    if math.isinf(x):
        return x
    m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= m < 1
    if m < _SQRT_HALF:
        m *= 2.0
        e -= 1
    f = m - 1.0  # exact: m lies in [sqrt(1/2), sqrt(2))
    s = f / (2.0 + f)
    z = s * s
    lm = 2.0 * s + s * z * _poly(z, _LOG)
    return e * _LN2_HI + (e * _LN2_LO + lm)


def _int_power(x: float, n: int) -> float:
    """x**n by squaring: one fixed sequence of IEEE multiplications."""
    neg = n < 0
    n = -n if neg else n
    result = 1.0
    base = x
    first = True
    while n:
        if n & 1:
            result = base if first else result * base
            first = False
        n >>= 1
        if n:
            base = base * base
    return 1.0 / result if neg else result


def pow_(x: float, y: float) -> float:
    if y == 0.0:
        return 1.0
    if x == 1.0:
        return 1.0
    if math.isnan(x) or math.isnan(y):
        return math.nan
    y_int = math.isfinite(y) and y == math.floor(y)
    if y_int and abs(y) <= 2.0**31 and math.isfinite(x):
        if x == 0.0:
            odd = int(y) & 1
            if y > 0:
                return x if odd else 0.0
            return math.copysign(math.inf, x) if odd else math.inf
        return _int_power(x, int(y))
    if math.isinf(y):
        a = abs(x)
        if a == 1.0:
            return 1.0
        return (math.inf if a > 1.0 else 0.0) if y > 0 else (0.0 if a > 1.0 else math.inf)
    if x == 0.0:
        return 0.0 if y > 0 else math.inf
    if math.isinf(x):
        if x > 0:
            return math.inf if y > 0 else 0.0
        odd = y_int and int(y) & 1
        if y > 0:
            return -math.inf if odd else math.inf
        return -0.0 if odd else 0.0
    if x < 0.0:
        if not y_int:
            return math.nan
        r = pow_(-x, y)
        return -r if int(y) & 1 else r
    return exp_(y * log_(x))


# ---------------------------------------------------------------------------
# numpy-shaped front ends.


# the exact types a simulator passes most often, checked before isinstance
_SCALAR_TYPES = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})
_F64 = np.dtype(np.float64)


def _scalar(v: Any) -> bool:
    if type(v) in _SCALAR_TYPES:
        return True
    return isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, bool)


def _unary(fn: Callable[[float], float]) -> Callable[..., Any]:
    def apply(x: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            raise TypeError(f"portable {fn.__name__[:-1]} takes one argument")
        if type(x) in _SCALAR_TYPES or _scalar(x):
            return np.float64(fn(float(x)))
        a = np.asarray(x, dtype=np.float64)
        out = np.array([fn(v) for v in a.ravel().tolist()], dtype=np.float64)
        out = out.reshape(a.shape)
        return out[()] if out.ndim == 0 else out

    apply.__name__ = fn.__name__[:-1]
    apply.__doc__ = f"numpy.{apply.__name__}, with the same bits on every CPU."
    return apply


def _binary(fn: Callable[[float, float], float]) -> Callable[..., Any]:
    def apply(x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            raise TypeError(f"portable {fn.__name__[:-1]} takes two arguments")
        if _scalar(x) and _scalar(y):
            return np.float64(fn(float(x), float(y)))
        a, b = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        out = np.array(
            [fn(u, v) for u, v in zip(a.ravel().tolist(), b.ravel().tolist(), strict=False)],
            dtype=np.float64,
        ).reshape(a.shape)
        return out[()] if out.ndim == 0 else out

    apply.__name__ = fn.__name__[:-1]
    apply.__doc__ = f"numpy.{apply.__name__}, with the same bits on every CPU."
    return apply


sin = _unary(sin_)
cos = _unary(cos_)
tan = _unary(tan_)
arcsin = _unary(asin_)
arccos = _unary(acos_)
arctan = _unary(atan_)
exp = _unary(exp_)
log = _unary(log_)
arctan2 = _binary(atan2_)
_float_power = _binary(pow_)


def _is_float_like(v: Any) -> bool:
    if isinstance(v, (float, np.floating)):
        return True
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "fc"
    if isinstance(v, (list, tuple)):
        return np.asarray(v).dtype.kind in "fc"
    return False


def power(x: Any, y: Any) -> Any:
    """``x ** y`` and ``numpy.power``: integers stay exact integers, floats portable."""
    if not (_is_float_like(x) or _is_float_like(y)):
        return operator.pow(x, y) if not isinstance(x, (list, tuple)) else np.power(x, y)
    if type(x) is float and type(y) in (int, float):
        return pow_(x, float(y))  # Python floats stay Python floats, as ** gives
    return _float_power(x, y)


def _sum_in_order(terms: npt.NDArray[Any], axis: int) -> npt.NDArray[Any]:
    """Sum along ``axis`` strictly left to right (no BLAS, no pairwise blocks)."""
    moved = np.moveaxis(terms, axis, 0)
    acc: npt.NDArray[Any] = moved[0].copy()
    for k in range(1, moved.shape[0]):
        acc = acc + moved[k]
    return acc


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for float operands without BLAS: products, then a left-to-right sum."""
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.dtype.kind not in "fc" and b_arr.dtype.kind not in "fc":
        return np.matmul(a_arr, b_arr)
    a_arr = a_arr.astype(np.float64, copy=False)
    b_arr = b_arr.astype(np.float64, copy=False)
    if a_arr.ndim == 0 or b_arr.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions")
    if a_arr.ndim == 1 and b_arr.ndim == 1:
        if a_arr.shape != b_arr.shape:
            raise ValueError(f"shapes {a_arr.shape} and {b_arr.shape} not aligned")
        acc = 0.0
        for u, v in zip(a_arr.tolist(), b_arr.tolist(), strict=False):
            acc = acc + u * v
        return np.float64(acc)
    a2 = a_arr[None, :] if a_arr.ndim == 1 else a_arr
    b2 = b_arr[:, None] if b_arr.ndim == 1 else b_arr
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(f"shapes {a_arr.shape} and {b_arr.shape} not aligned")
    prod = a2[..., :, :, None] * b2[..., None, :, :]  # (..., n, k, m)
    out = _sum_in_order(prod, prod.ndim - 2)
    if a_arr.ndim == 1:
        out = out[..., 0, :]
    if b_arr.ndim == 1:
        out = out[..., 0]
    return out


def dot(a: Any, b: Any) -> Any:
    """``numpy.dot`` (and ``ndarray.dot``) for vectors and matrices, without BLAS."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype is _F64 and b.dtype is _F64:
        # the common case (2-D positions and directions): the same left-to-right sum
        # as matmul's, without its generality
        x, y = a.tolist(), b.tolist()
        if a.ndim == 1 and b.ndim == 1 and len(x) == len(y):
            if len(x) == 2:
                return np.float64((0.0 + x[0] * y[0]) + x[1] * y[1])
            acc = 0.0
            for u, v in zip(x, y, strict=True):
                acc = acc + u * v
            return np.float64(acc)
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.ndim == 0 or b_arr.ndim == 0:
        return multiply(a, b)
    if a_arr.ndim <= 2 and b_arr.ndim <= 2:
        return matmul(a_arr, b_arr)
    raise ValueError("portable dot handles vectors and matrices only")


def multiply(a: Any, b: Any) -> Any:
    return np.multiply(a, b)  # one IEEE rounding per element on every CPU


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """``numpy.linalg.norm`` (2-norm of a vector, Frobenius of a matrix) without BLAS."""
    if ord is not None or keepdims:
        raise TypeError("portable norm computes the default norm only")
    a = np.asarray(x, dtype=np.float64)
    if axis is None:
        flat = a.ravel()
        acc = 0.0
        for v in flat.tolist():
            acc = acc + v * v
        return np.float64(math.sqrt(acc))
    return np.sqrt(_sum_in_order(a * a, axis))


def hypot(x: Any, y: Any) -> Any:
    return np.sqrt(np.square(np.asarray(x, dtype=np.float64)) + np.square(y))


# The names a simulator module may call on numpy or math, and the portable one.
NUMPY_FUNCTIONS = {
    "sin": sin,
    "cos": cos,
    "tan": tan,
    "arcsin": arcsin,
    "arccos": arccos,
    "arctan": arctan,
    "arctan2": arctan2,
    "exp": exp,
    "log": log,
    "power": power,
    "dot": dot,
    "matmul": matmul,
    "hypot": hypot,
}
NUMPY_LINALG_FUNCTIONS = {"norm": norm}
MATH_FUNCTIONS = {
    "sin": sin_,
    "cos": cos_,
    "tan": tan_,
    "asin": asin_,
    "acos": acos_,
    "atan": atan_,
    "atan2": atan2_,
    "exp": exp_,
    "log": log_,
    "pow": pow_,
}
