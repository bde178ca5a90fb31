"""Loop helpers that replace array expressions Numba compiles slowly: the scaled adjoint
updates of reduction loops (coarsen.ad.reverse.scaled_adds, ``_add_scaledN``) and the
adjoint of ``max``/``min`` along an axis (``_red_adj_*``).  Each gives the bits of the array
expression it replaces, on both targets."""
import ast
import warnings

import gast
import numba
import numpy as np
import pytest

import coarsen
from coarsen.codegen import runtime as R
from coarsen.ad.reverse.scaled_adds import SCALED_MARK, scaled_add_calls

from tests.oracle import check_against_oracle


def _helper(name, jit=False):
    scope = {"np": np}
    exec(compile(R.helper_source([name]), "<helper>", "exec"), scope)
    return numba.njit(error_model="numpy")(scope[name]) if jit else scope[name]


def _text(body):
    return ast.unparse(gast.gast_to_ast(gast.Module(body=body, type_ignores=[])))


def test_marked_updates_become_calls_and_the_rest_stays():
    body = gast.parse("a_bar += s_bar * _acc1\nb_bar += s_bar * _acc2\nfor i in range(3):\n"
                      "    c_bar += s_bar * _acc3\n").body
    setattr(body[0], SCALED_MARK, 2)
    setattr(body[2].body[0], SCALED_MARK, 1)
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    out, used = scaled_add_calls(body)
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before
    text = _text(out)
    assert "_add_scaled2(a_bar, s_bar, _acc1)" in text
    assert "b_bar += s_bar * _acc2" in text              # not marked
    assert "    _add_scaled1(c_bar, s_bar, _acc3)" in text
    assert used == {"_add_scaled1", "_add_scaled2"}


@pytest.mark.parametrize("jit", [False, True], ids=["python", "numba"])
def test_add_scaled_gives_the_array_expressions_bits(jit):
    r = np.random.default_rng(0)
    add = _helper(R.add_scaled(3), jit)
    out, x = r.normal(size=(3, 4, 2)), r.normal(size=(3, 4, 2))
    a = float(r.normal())
    want = out.copy()
    want += a * x
    add(out, a, x)
    assert np.array_equal(out, want)
    view = np.zeros((3, 8, 2))[:, ::2]                    # any layout
    add(view, a, x)
    assert np.array_equal(view, a * x + 0.0)
    with pytest.raises(ValueError, match="another shape"):
        add(out, a, x[:, :3])


def _old_formula(op, a, g, ax, keep):
    red = np.max(a, axis=ax) if op == "amax" else np.min(a, axis=ax)
    m = np.expand_dims(red, ax)
    mask = a == m
    count = np.expand_dims(np.sum(mask, axis=ax), ax)
    gs = g if keep else np.expand_dims(g, ax)
    return mask * (gs / count)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape, ax", [((4, 5), 0), ((4, 5), 1), ((3, 4, 5), 1), ((3, 4, 5), 2)])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_adjoint_shares_ties_as_before(op, shape, ax, keep):
    r = np.random.default_rng(sum(shape) + ax)
    a = r.integers(0, 3, size=shape).astype(float)        # many ties
    a.flat[1] = np.nan                                     # a NaN maximum: NumPy's answer
    gshape = tuple(1 if d == ax else n for d, n in enumerate(shape)) if keep else \
        tuple(n for d, n in enumerate(shape) if d != ax)
    g = r.normal(size=gshape)
    fn = _helper(R.reduce_adjoint(op, len(shape), ax, keep))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = _old_formula(op, a, g, ax, keep)
        got = fn(a, g)
    assert got.shape == a.shape
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    # the in-place form: the bits of ``out += helper(a, g)``
    base = r.normal(size=a.shape)
    base.flat[0] = -0.0
    add = _helper(R.reduce_adjoint_add(op, len(shape), ax, keep))
    expect, inplace = base.copy(), base.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expect += want
        assert add(inplace, a, g) is None
    assert np.array_equal(inplace, expect, equal_nan=True)
    assert np.array_equal(np.signbit(inplace), np.signbit(expect))
    with pytest.raises(ValueError):
        add(np.zeros(tuple(n + 1 for n in a.shape)), a, g)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("jit", [False, True], ids=["python", "numba"])
def test_reduce_adjoint_counts_ties_in_one_pass(op, jit):
    """The helper finds the extremum and counts its ties in one pass: fibers whose ties come
    before and after a larger (smaller) value, signed zeros, infinities, a NaN first, last
    and in the middle, all equal, one element.  NumPy's formula is the reference, bit for bit."""
    big, small = (np.inf, -np.inf) if op == "amax" else (-np.inf, np.inf)
    sign = 1.0 if op == "amax" else -1.0
    fibers = [
        [1.0, 1.0, 2.0, 1.0, 2.0, 0.5],            # ties of a smaller value before the extremum
        [2.0, 1.0, 2.0, 3.0, 3.0, 3.0],            # the extremum last, three ties
        [-0.0, 0.0, -0.0, -1.0, -2.0, -0.0],        # signed zeros tie with each other
        [big, 1.0, big, small, 0.0, 1.0],
        [np.nan, 1.0, 5.0, 5.0, 1.0, 1.0],          # a NaN first: every element gets NaN
        [1.0, 5.0, np.nan, 5.0, 9.0, 9.0],          # a NaN in the middle, larger values after
        [4.0, 4.0, 4.0, 4.0, 4.0, np.nan],          # a NaN last
        [7.0] * 6,
    ]
    a = sign * np.array(fibers)
    g = np.linspace(-1.5, 2.0, a.shape[0])
    g[1] = -0.0
    for ax, arr, gg in ((1, a, g), (0, np.ascontiguousarray(a.T), g)):
        fn = _helper(R.reduce_adjoint(op, 2, ax, False), jit)
        add = _helper(R.reduce_adjoint_add(op, 2, ax, False), jit)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = _old_formula(op, arr, gg, ax, False)
            got = fn(arr, gg)
            base = np.full(arr.shape, -0.0)
            expect = base.copy()
            expect += want
            add(base, arr, gg)
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
        assert np.array_equal(base, expect, equal_nan=True)
        assert np.array_equal(np.signbit(base), np.signbit(expect))
    one = sign * np.array([[3.0], [np.nan], [-0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.array_equal(_helper(R.reduce_adjoint(op, 2, 1, True), jit)(one, g[:3, None]),
                              _old_formula(op, one, g[:3, None], 1, True), equal_nan=True)


def test_reduce_adjoint_compiled_matches_python():
    r = np.random.default_rng(9)
    a = r.integers(0, 3, size=(3, 4, 5)).astype(float)
    g = r.normal(size=(3, 5))
    name = R.reduce_adjoint("amax", 3, 1, False)
    assert np.array_equal(_helper(name, jit=True)(a, g), _helper(name)(a, g))


def maxes(T, w):
    c = np.max(T * w, axis=1)
    d = np.min(T, axis=0, keepdims=True)
    s = 0.0
    for i in range(T.shape[0]):
        s += np.sum(T[i] * T[i]) * w
    return np.sum(np.exp(c)) + np.sum(d * d) + s


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_gradients_through_the_helpers_match_the_oracle(target):
    r = np.random.default_rng(4)
    args = (r.normal(size=(3, 4)), 0.7)
    _, value, grads = check_against_oracle(maxes, args, target)
    if target == "cpu":
        src = coarsen.differentiate(maxes).source_for(*args)
        # np.max of a temporary: the helper; np.min of the parameter T: added into T_bar in place
        assert "_red_adj_amax_2_1(" in src and "_red_adj_add_amin_2_0_k(T_bar, " in src
        # the reduction loop's scaled pass is T_bar's first write (scaled_adds._scaled_first_writes)
        assert "_set_scaled2(T_bar, s_bar, " in src and "T_bar = np.empty(T.shape)" in src
        py = coarsen.differentiate(maxes, target="python")
        pv, pg = py.value_and_grad(*args)
        assert pv == value and all(np.array_equal(a, b) for a, b in zip(pg, grads))
