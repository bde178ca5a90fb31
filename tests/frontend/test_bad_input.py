"""Hardening: bad input is refused with a ``CoarsenError`` that names the problem, and the
edges of the input domain (new signatures, NaN/inf, kinks and ties, empty arrays, huge trip
counts) give the documented results, never a crash from deep inside the generated code.

Conventions checked here (DESIGN.md, coarsen's docstrings; JAX's where JAX is importable):
``abs`` at 0 has derivative 1 (as ``jax.grad``); ``max``/``min``/``np.maximum``/``np.minimum`` at a tie give 0.5 to
each side; ``np.max``/``np.min`` split the adjoint evenly among tied entries; a comparison at a
tie follows the branch Python takes (no derivative of the condition).  NaN and inf propagate as
the derivative formula evaluated in IEEE arithmetic (as NumPy would): each expected value below
is the analytic derivative written out.

Most checks run on the ``python`` target, coarse and fine; a few run on ``cpu`` too (each Numba
compile costs about a second).
"""
import math
import resource
import types

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError

MODES = [pytest.param(True, id="coarse"), pytest.param(False, id="fine")]

try:  # JAX as an optional second reference for the tie conventions
    import jax  # noqa: F401
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    HAVE_JAX = True
except Exception:  # noqa: BLE001
    HAVE_JAX = False


# ---------------------------------------------------------------------------- functions

def f_scale(x, a):
    return x * np.sum(a * a)


def f_int_mul(x, n):
    return x * n


def f_loop(x, a, n):
    s = x
    for i in range(n):
        s = s * 0.5 + a[i % a.shape[0]]
    return s


def f_sum_all(a):
    return np.sum(a * a) + 1.0


def ret_array(a):
    return a * 2.0


def ret_int(x, n):
    return n + 1


def ret_bool(x):
    return x > 1.0


def ret_tuple(x, y):
    return x, y


def ret_axis_sum(a):
    return np.sum(a, axis=0)


def no_return(x):
    y = x * 2.0  # noqa: F841


def f_abs(x):
    return abs(x)


def f_max(x, y):
    return max(x, y)


def f_min(x, y):
    return min(x, y)


def f_np_maximum(a, b):
    return np.sum(np.maximum(a, b))


def f_np_minimum(a, b):
    return np.sum(np.minimum(a, b))


def f_np_max(a):
    return np.max(a)


def f_np_min(a):
    return np.min(a)


def f_compare(x, y):
    if x > y:
        return x * 2.0
    return y * 3.0


def f_compare_ge(x, y):
    if x >= y:
        return x * 2.0
    return y * 3.0


def f_mul(x, y):
    return x * y


def f_tanh(x):
    return math.tanh(x) * 2.0


def f_sqrt(x):
    return math.sqrt(x)


def f_np_sqrt(a):
    return np.sum(np.sqrt(a))


def f_log_scaled(x, y):
    return math.log(x) * y


def f_loop_sum(x, a):
    s = x
    for i in range(a.shape[0]):
        s += a[i] * x
    return s


def f_loop_2d(x, A):
    s = x * x
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            s += A[i, j] * x
    return s


def f_local_array(x, n):
    b = np.zeros(n)
    for i in range(n):
        b[i] = x * i
    return np.sum(b) + x


def f_long_range(x, n):
    s = 0.0
    for i in range(n):
        s = math.sin(s) * x
    return s


# ------------------------------------------------------------------------- helpers

def _problem(info):
    err = info.value
    assert isinstance(err, CoarsenError)
    assert isinstance(err.problem, str) and err.problem.strip()
    return err.problem


def _d(fn, coarse=True, target="python", **kw):
    return coarsen.differentiate(fn, coarsen=coarse, target=target, **kw)


# ===================================================================== wrong arguments

@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("args,param,what", [
    ((1.0, [1.0, 2.0]), "a", "list"),
    (("1.0", np.ones(3)), "x", "str"),
    ((1.0, np.ones(3, dtype=complex)), "a", "complex128"),
    ((1j, np.ones(3)), "x", "complex"),
    ((1.0, np.array([1.0, None], dtype=object)), "a", "object"),
    ((None, np.ones(3)), "x", "NoneType"),
    ((1.0, np.array(2.0)), "a", "0-d"),
], ids=["list", "str", "complex_array", "complex_scalar", "object_array", "none", "zero_d"])
def test_wrong_argument_type_names_the_parameter(target, args, param, what):
    g = _d(f_scale, target=target)
    with pytest.raises(CoarsenError) as info:
        g(*args)
    problem = _problem(info)
    assert repr(param) in problem and what in problem, problem
    assert info.value.hint


def test_wrong_argument_count():
    g = _d(f_scale)
    with pytest.raises(CoarsenError) as info:
        g(1.0)
    problem = _problem(info)
    assert "2 arguments" in problem and "got 1" in problem


def test_float_where_range_needs_int():
    g = _d(f_loop)
    with pytest.raises(CoarsenError) as info:
        g(1.0, np.ones(2), 2.0)
    assert "range" in _problem(info) and info.value.lineno is not None


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_new_signatures_specialize(target):
    """float then int scalar, rank 1 then rank 2, float64 then float32 then int arrays: a new
    specialization each, with the right numbers for every one."""
    g = _d(f_scale, target=target)
    a1 = np.array([1.0, 2.0, 3.0])
    gx, ga = g(2.0, a1)
    assert gx == 14.0 and np.array_equal(ga, 2 * 2.0 * a1)
    A2 = np.array([[1.0, -1.0], [0.5, 2.0]])
    gx, gA = g(3.0, A2)
    assert gx == np.sum(A2 * A2) and gA.shape == (2, 2) and np.array_equal(gA, 6.0 * A2)
    # int x: not differentiated, only a's gradient comes back
    (ga,) = g(3, a1)
    assert np.array_equal(ga, 6.0 * a1)
    # float32 array: gradient computed in float64, returned as float32
    gx, ga32 = g(2.0, a1.astype(np.float32))
    assert ga32.dtype == np.float32 and np.array_equal(ga32, (4.0 * a1).astype(np.float32))
    # int array: not differentiated
    (gx,) = g(2.0, np.array([1, 2, 3]))
    assert gx == 14.0
    # back to the first signature: still right
    gx, ga = g(1.0, a1)
    assert gx == 14.0 and np.array_equal(ga, 2 * a1)


# ======================================================================= bad returns

@pytest.mark.parametrize("fn,args,what", [
    (ret_array, (np.ones(3),), "array"),
    (ret_axis_sum, (np.ones((2, 2)),), "array"),
    (ret_int, (1.0, 2), "integer"),
    (ret_bool, (1.0,), "bool"),
    (ret_tuple, (1.0, 2.0), "tuple"),
    (no_return, (1.0,), "no return"),
], ids=["array", "axis_sum", "int", "bool", "tuple", "none"])
def test_non_scalar_or_non_float_return(fn, args, what):
    with pytest.raises(CoarsenError) as info:
        _d(fn)(*args)
    problem = _problem(info)
    assert what in problem, problem
    assert info.value.lineno is not None and info.value.hint


# ============================================================================ wrt

@pytest.mark.parametrize("wrt,needle", [
    ("n", "'n'"), (1, "'n'"), (5, "position 5"), (-1, "position -1"), ("zz", "'zz'"),
    (("x", "zz"), "'zz'"), (1.5, "1.5"),
], ids=["int_param_name", "int_param_position", "position_5", "position_negative", "missing",
        "missing_in_tuple", "float_position"])
def test_bad_wrt(wrt, needle):
    with pytest.raises(CoarsenError) as info:
        _d(f_int_mul, wrt=wrt)(1.0, 2)
    assert needle in _problem(info), info.value.problem


def test_no_float_parameter():
    with pytest.raises(CoarsenError) as info:
        _d(f_int_mul)(1, 2)
    assert "no float parameters" in _problem(info)


# ============================================================= functions without source

def test_function_from_exec():
    ns = {"math": math}
    exec("def made(x):\n    return math.sin(x) * x\n", ns)
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(ns["made"])
    problem = _problem(info)
    assert "source" in problem and "made" in problem


@pytest.mark.parametrize("fn,needle", [(math.sin, "sin"), (np.sin, "sin"), (len, "len")],
                         ids=["math_sin", "np_sin", "len"])
def test_builtin(fn, needle):
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(fn)
    problem = _problem(info)
    assert needle in problem and "not a plain Python function" in problem


def test_lambda():
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(lambda x: x * x)
    assert "lambda" in _problem(info)


def test_not_callable():
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(types.SimpleNamespace())
    _problem(info)


# ================================================================== NaN and inf inputs

@pytest.mark.parametrize("coarse", MODES)
def test_nan_and_inf_propagate(coarse):
    g = _d(f_scale, coarse)
    a = np.array([1.0, 2.0])
    gx, ga = g(np.nan, a)                     # d/dx = sum(a^2), d/da = 2 x a
    assert gx == 5.0 and np.all(np.isnan(ga))
    gx, ga = g(np.inf, a)
    assert gx == 5.0 and np.array_equal(ga, [np.inf, np.inf])
    gx, ga = g(-np.inf, np.array([1.0, -2.0]))
    assert gx == 5.0 and np.array_equal(ga, [-np.inf, np.inf])
    a = np.array([1.0, np.nan, 3.0])
    gx, ga = g(2.0, a)
    assert np.isnan(gx) and ga[0] == 4.0 and np.isnan(ga[1]) and ga[2] == 12.0

    g = _d(f_mul, coarse)                     # d/dx = y, d/dy = x
    assert g(2.0, np.inf) == (np.inf, 2.0)
    gx, gy = g(np.nan, 3.0)
    assert gx == 3.0 and np.isnan(gy)

    g = _d(f_tanh, coarse)                    # 2 (1 - tanh^2): 0 at +-inf, nan at nan
    (gx,) = g(np.inf)
    assert gx == 0.0
    (gx,) = g(np.nan)
    assert np.isnan(gx)

    g = _d(f_log_scaled, coarse)              # d/dx = y / x, d/dy = log x
    assert g(np.inf, 1.0) == (0.0, np.inf)

    # a linear recurrence: the gradient never multiplies a NaN entry
    g = _d(f_loop, coarse)
    gx, ga = g(1.0, np.array([1.0, np.nan]), 3)
    assert gx == 0.125 and np.array_equal(ga, [1.25, 0.5])


@pytest.mark.parametrize("coarse", MODES)
def test_np_sqrt_at_zero_is_inf(coarse):
    with np.errstate(divide="ignore"):
        (ga,) = _d(f_np_sqrt, coarse)(np.array([0.0, 4.0]))
    assert np.array_equal(ga, [np.inf, 0.25])


@pytest.mark.parametrize("coarse", MODES)
def test_math_sqrt_at_zero_is_inf(coarse):
    # the compiled target uses NumPy's error model: an infinite derivative, as np.sqrt and JAX
    (gx,) = _d(f_sqrt, coarse, "cpu")(0.0)
    assert gx == np.inf
    # the python target (for debugging) keeps Python's float semantics, documented
    with pytest.raises(ZeroDivisionError):
        _d(f_sqrt, coarse, "python")(0.0)


# ===================================================== non-differentiable points (JAX-style)

def _jax_grad(fn, *args):
    import jax
    return jax.grad(fn, argnums=tuple(range(len(args))))(*args)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", MODES)
def test_kinks_and_ties(coarse, target):
    D = lambda f: _d(f, coarse, target)  # noqa: E731
    assert D(f_abs)(0.0) == (1.0,)      # as jax.grad(jnp.abs)(0.0)
    assert D(f_abs)(-0.0) == (1.0,)
    assert D(f_max)(1.5, 1.5) == (0.5, 0.5)
    assert D(f_min)(-2.0, -2.0) == (0.5, 0.5)
    ga, gb = D(f_np_maximum)(np.array([1.0, 2.0, 5.0]), np.array([1.0, 3.0, 4.0]))
    assert np.array_equal(ga, [0.5, 0.0, 1.0]) and np.array_equal(gb, [0.5, 1.0, 0.0])
    ga, gb = D(f_np_minimum)(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    assert np.array_equal(ga, [0.5, 1.0]) and np.array_equal(gb, [0.5, 0.0])
    (ga,) = D(f_np_max)(np.array([1.0, 3.0, 3.0, 3.0]))
    np.testing.assert_allclose(ga, [0.0, 1 / 3, 1 / 3, 1 / 3], rtol=1e-15)
    (ga,) = D(f_np_min)(np.array([-1.0, -1.0, 3.0]))
    assert np.array_equal(ga, [0.5, 0.5, 0.0])
    # a comparison at a tie: the branch Python takes, no derivative of the condition
    assert D(f_compare)(1.0, 1.0) == (0.0, 3.0)
    assert D(f_compare_ge)(1.0, 1.0) == (2.0, 0.0)


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
def test_tie_conventions_match_jax():
    jx = _jax_grad(lambda x, y: jnp.maximum(x, y), 1.5, 1.5)
    assert tuple(map(float, jx)) == _d(f_max)(1.5, 1.5)
    jx = _jax_grad(lambda x, y: jnp.minimum(x, y), -2.0, -2.0)
    assert tuple(map(float, jx)) == _d(f_min)(-2.0, -2.0)
    a, b = np.array([1.0, 2.0, 5.0]), np.array([1.0, 3.0, 4.0])
    jx = _jax_grad(lambda u, v: jnp.sum(jnp.maximum(u, v)), a, b)
    for j, c in zip(jx, _d(f_np_maximum)(a, b)):
        assert np.array_equal(np.asarray(j), c)
    for fn, jfn, v in ((f_np_max, jnp.max, np.array([1.0, 3.0, 3.0, 3.0])),
                       (f_np_min, jnp.min, np.array([-1.0, -1.0, 3.0]))):
        np.testing.assert_allclose(np.asarray(_jax_grad(jfn, v)[0]), _d(fn)(v)[0], rtol=1e-15)
    assert tuple(map(float, _jax_grad(lambda x, y: jnp.where(x > y, 2 * x, 3 * y), 1.0, 1.0))) \
        == _d(f_compare)(1.0, 1.0)


@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
@pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed")
def test_abs_at_zero_matches_jax():
    assert float(_jax_grad(lambda x: jnp.abs(x), 0.0)[0]) == _d(f_abs)(0.0)[0]


# ========================================================================= empty arrays

@pytest.mark.parametrize("coarse", MODES)
def test_empty_arrays(coarse):
    (ga,) = _d(f_sum_all, coarse)(np.zeros(0))
    assert ga.shape == (0,) and ga.dtype == np.float64
    (gA,) = _d(f_sum_all, coarse)(np.zeros((0, 3)))
    assert gA.shape == (0, 3)
    gx, ga = _d(f_loop_sum, coarse)(1.5, np.zeros(0))        # zero trips: s = x
    assert gx == 1.0 and ga.shape == (0,)
    gx, gA = _d(f_loop_2d, coarse)(1.5, np.zeros((3, 0)))    # zero inner trips
    assert gx == 3.0 and gA.shape == (3, 0)
    (gx,) = _d(f_local_array, coarse)(2.0, 0)                # np.zeros(0), zero trips
    assert gx == 1.0
    gx, ga = _d(f_loop, coarse)(2.0, np.ones(3), 0)          # range(0)
    assert gx == 1.0 and np.array_equal(ga, np.zeros(3))
    (gx,) = _d(f_long_range, coarse)(0.5, -5)                # negative trip count: zero trips
    assert gx == 0.0


# ========================================================= tapes that cannot fit: MemoryError

@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", MODES)
def test_tape_too_large_raises_memory_error_at_once(coarse, target):
    g = _d(f_long_range, coarse, target)
    assert g(0.5, 3) == (pytest.approx(0.0),)  # compiles; s stays 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
    with pytest.raises(MemoryError) as info:
        g(0.5, 2 ** 33)                      # >= 8 bytes per trip: 64 GiB of tape
    msg = str(info.value)
    assert "tape" in msg and "GiB" in msg and "coarsen" in msg, msg
    # raised before the loop: a tape grown trip by trip up to the limit would have written
    # gigabytes (the last doubling copies 2 GiB into a 4 GiB tape) before the same error
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < 512 * 1024, f"the peak memory grew by {grown // 1024} MiB: not before the loop"
    # the gradient object still works afterwards
    (gx,) = g(0.5, 2)
    assert gx == pytest.approx(0.0)
