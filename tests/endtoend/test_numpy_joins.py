"""Issue 44b: joining, splitting and building arrays, lists passed to NumPy, ``assert`` and nested
``def``s, against the extended-precision oracle (``tests/oracle.py``), in both modes.

Each program puts many functions on 1-D, 2-D and 3-D inputs (axis variants, negative axes,
broadcasting) into one differentiated function, so one compile checks many gradients: the
python target for breadth, one combined program on the cpu target (Numba).  Gradients are
compared with ``fd_grad`` (central differences in ``np.longdouble``), the JVP with the oracle's
gradient dotted with the tangent, the value with the function itself.  Metamorphic variants:
renamed variables (the same bits), the program split into a module-level helper and a nested
``def`` (the same gradient), float32 inputs (computed in float64, gradients cast back to
float32, as for every other function).  Then the forms that stay refused, each a
``CoarsenError`` at the call, and NumPy's run-time errors.  The programs live in
``tests/zoo/numpy_joins.py`` (pytest rewrites the ``assert`` statements of test modules).
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.oracle import assert_grad_close, fd_grad
from tests.zoo import numpy_joins as Z
from tests.zoo.numpy_joins import A1, A2, B1, B2, S, T3


def _floats(args):
    return [k for k, a in enumerate(args) if isinstance(a, float)
            or (isinstance(a, np.ndarray) and a.dtype.kind == "f")]


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check(fn, args, target="python", jvp=True):
    """The value, the gradient (against the oracle) and, with ``jvp``, the JVP of ``fn``."""
    pos = _floats(args)
    g = coarsen.differentiate(fn, target=target)
    value, grads = g.value_and_grad(*_copies(args))
    ref = fn(*_copies(args))
    assert np.isclose(value, ref, rtol=1e-13, atol=1e-300), (value, ref)
    exp = fd_grad(fn, _copies(args), pos)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert_grad_close(list(grads), exp, err_msg=fn.__name__)
    if jvp:
        rng = np.random.default_rng(7)
        tans = [rng.normal(size=np.shape(args[p])) if isinstance(args[p], np.ndarray)
                else float(rng.normal()) for p in pos]
        j = coarsen.jvp(fn, target=target)
        v2, tangent = j(*_copies(args), tangents=tuple(tans) if len(tans) > 1 else tans[0])
        assert np.isclose(v2, ref, rtol=1e-13, atol=1e-300)
        terms = [np.asarray(e, dtype=np.float64) * t for e, t in zip(exp, tans)]
        want = sum(float(np.sum(t)) for t in terms)
        scale = sum(float(np.sum(np.abs(t))) for t in terms)
        assert abs(tangent - want) <= 1e-10 * scale, (tangent, want)
    return g, grads


JOIN_ARGS = (A1, B1, A2, B2, T3)


@pytest.fixture(scope="module")
def joined():
    return check(Z.joins, JOIN_ARGS)


def test_joins_against_the_oracle(joined):
    g, _ = joined
    assert g(*JOIN_ARGS) is not None


def test_joins_renamed_are_the_same_bits(joined):
    _, grads = joined
    _, again = coarsen.differentiate(Z.joins_renamed, target="python").value_and_grad(*JOIN_ARGS)
    for x, y in zip(grads, again):
        assert np.array_equal(x, y)


def test_joins_of_float32_inputs_are_computed_in_float64():
    args32 = [a.astype(np.float32) for a in JOIN_ARGS]
    args64 = [a.astype(np.float64) for a in args32]
    g = coarsen.differentiate(Z.joins, target="python")
    value, grads = g.value_and_grad(*args32)
    value64, grads64 = g.value_and_grad(*args64)
    assert value == value64
    for x, y in zip(grads, grads64):
        assert x.dtype == np.float32 and np.array_equal(x, y.astype(np.float32))


def test_splits_against_the_oracle():
    check(Z.splits, (A1, A2, T3))


def test_building_against_the_oracle():
    check(Z.building, (A1, A2, T3, S))


def test_lists_assert_and_nested_defs_against_the_oracle():
    check(Z.lists, (S, 0.3, A1, A2))


def test_nested_scopes_against_the_oracle():
    g, _ = check(Z.nested_scopes, (np.array([0.3, 0.8, 1.4]), S))
    assert g(np.array([0.3, 0.8, 1.4]), 6.0)[1] == 0.0


def test_failed_assert_raises_with_its_message():
    g = coarsen.differentiate(Z.lists, target="python")
    with pytest.raises(AssertionError, match="x is far too small"):
        g(-20.0, 0.3, A1, A2)
    with pytest.raises(AssertionError):
        g(S, 20.0, A1, A2)


def test_lists_split_into_helpers_give_the_same_gradient():
    args = (S, 0.3, A1, A2)
    _, g1 = coarsen.differentiate(Z.lists, target="python").value_and_grad(*args)
    _, g2 = coarsen.differentiate(Z.lists_split, target="python").value_and_grad(*args)
    for x, y in zip(g1, g2):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-13)


def test_hessian_reads_the_joins_back():
    """coarsen.hessian: reverse mode over the JVP read back as coarsen's input language
    (np.repeat, np.tile, np.roll, np.kron, np.gradient, the asserts as assert statements)."""
    x = np.array([0.3, -0.5, 0.9, 1.2])
    hess = coarsen.hessian(Z.hessian_of_joins, target="python")
    H = np.asarray(hess(x)).reshape(4, 4)
    g = coarsen.differentiate(Z.hessian_of_joins, target="python")
    cols = [(np.asarray(g(x + 1e-6 * e)) - np.asarray(g(x - 1e-6 * e))).ravel() / 2e-6
            for e in np.eye(4)]
    np.testing.assert_allclose(H, np.array(cols), rtol=1e-6, atol=1e-6)
    with pytest.raises(AssertionError, match="must be positive"):
        hess(-x)


def test_the_cpu_target():
    g, _ = check(Z.on_cpu, (A1, A2, T3, S), target="cpu")
    with pytest.raises(AssertionError, match="s must be positive"):
        g(A1, A2, T3, -S)


REFUSED = [
    (Z.r_sections, "number of sections"), (Z.r_tile_reps, "reps"), (Z.r_roll_shifts, "shift"),
    (Z.r_repeat_counts, "count"), (Z.r_gradient_axes, "axis"),
    (Z.r_gradient_coords, "spacing"), (Z.r_concat_scalars, "scalars"),
    (Z.r_concat_ranks, "ranks"), (Z.r_sum_array, "sum()"), (Z.r_assert_message, "message"),
    (Z.r_def_in_branch, "top level"), (Z.r_def_as_value, "used as a value"),
    (Z.r_def_recursive, "recursive"), (Z.r_concat_dtype, "dtype"),
    (Z.r_select_condition, "boolean"), (Z.r_def_called_early, "before its def"),
]


@pytest.mark.parametrize("fn, words", REFUSED, ids=[f.__name__ for f, _ in REFUSED])
def test_refused_with_location(fn, words):
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(fn, target="python")(A2[:2].copy(), 2)
    assert words in str(info.value), str(info.value)
    assert info.value.filename == Z.__file__ and info.value.lineno is not None


@pytest.mark.parametrize("fn, arg, exc", [
    (Z.e_split_unequal, A1, "equal division"), (Z.e_gradient_short, A1, "too small"),
    (Z.e_concat_shapes, A2, None)], ids=["split", "gradient", "concatenate"])
def test_numpys_run_time_errors(fn, arg, exc):
    with pytest.raises(ValueError, match=exc):
        fn(arg)
    with pytest.raises(ValueError, match=exc):
        coarsen.differentiate(fn, target="python")(arg)
