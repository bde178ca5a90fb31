"""The max/min along an axis in four lanes (``coarsen.codegen.runtime._reduce_source``).

The generated helper, compiled by Numba, against the one-chain loop it replaces, written here:
the same bits for every fiber (ties of -0.0 and 0.0, NaNs of two payloads, integers, fibers of
1 to 21 elements, every axis of 2-D and 3-D arrays).  The lanes' path gives the one-chain bits
by design, so its values cannot tell the two apart: the maximum put at every position of
fibers of 8 to 17 elements shows a lane or a tail that is dropped or combined wrongly.

The adjoint of max/min along an axis (``_reduce_adjoint_source``: the extremum in four lanes,
its ties counted in a pass of their own) against the one pass it replaces, written here: the
same bits of the whole output (``g / count`` spread on the ties; a NaN fiber's ``0.0 * (g / 0)``)
for ties, all-equal fibers, several NaNs, -0.0/0.0, infinities, ``g`` with zeros, infinities
and NaNs, fibers of 1 to 21, 40 and 41 elements, ranks 1 to 3, every axis, ``keepdims`` and
the in-place ``add`` form, float32 and integer operands, and the helper's text run as Python.
"""
import numba
import numpy as np
import pytest

import coarsen
from coarsen.codegen.runtime import _reduce_adjoint_source, _reduce_source


def _compiled(op, nd, ax, jit=True):
    src = _reduce_source(op, nd, ax)
    ns = {"np": np}
    exec(compile(src, f"<_red_{op}_{nd}_{ax}>", "exec"), ns)
    f = ns[f"_red_{op}_{nd}_{ax}"]
    return numba.njit(f) if jit else f


def _one_chain(a, op, ax):
    """The loop before the lanes: one chain of comparisons per fiber."""
    moved = np.moveaxis(a, ax, -1)
    out = np.empty(moved.shape[:-1])
    for idx in np.ndindex(*moved.shape[:-1]):
        fiber = moved[idx]
        acc = fiber[0]
        for v in fiber[1:]:
            if (v > acc if op == "amax" else v < acc) or v != v:
                acc = v
        out[idx] = acc
    return out


def _fibers(rng, n, kind):
    if kind == "normal":
        return rng.standard_normal(n)
    if kind == "ties":
        return rng.integers(-2, 3, n).astype(float)
    if kind == "zeros":
        return rng.choice([-0.0, 0.0, -1.0], n)
    if kind == "nan":
        x = rng.standard_normal(n)
        quiet = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
        x[rng.integers(0, n)] = np.nan
        x[rng.integers(0, n)] = quiet          # another payload: the last NaN's bits win
        return x
    return np.full(n, 3.0)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("kind", ["normal", "ties", "zeros", "nan", "equal"])
def test_every_fiber_has_the_one_chain_bits(op, kind):
    rng = np.random.default_rng(len(kind))
    f = _compiled(op, 2, 1)
    for n in range(1, 22):
        a = np.stack([_fibers(rng, n, kind) for _ in range(6)])
        assert f(a).tobytes() == _one_chain(a, op, 1).tobytes(), (n, a)


@pytest.mark.parametrize("nd, ax", [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)])
def test_every_axis_and_rank_and_integers(nd, ax):
    rng = np.random.default_rng(nd * 10 + ax)
    shape = [3, 4, 5][:nd]
    shape[ax] = 13
    a = rng.standard_normal(shape)
    for op in ("amax", "amin"):
        f = _compiled(op, nd, ax)
        assert f(a).tobytes() == _one_chain(a, op, ax).tobytes()
        ints = rng.integers(-5, 5, shape)
        assert np.array_equal(f(ints), _one_chain(ints, op, ax))
        # the helper's text runs as plain Python too (the python target)
        assert _compiled(op, nd, ax, jit=False)(a).tobytes() == _one_chain(a, op, ax).tobytes()


def test_an_empty_fiber_raises_as_numpy_does():
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        _compiled("amax", 2, 1)(np.empty((3, 0)))


def test_the_lanes_decide_where_they_may():
    # the maximum in each lane and in the tail (a nonzero maximum: the lanes alone give it)
    src = _reduce_source("amax", 2, 1)
    assert src.count("if n >= 8:") == 1 and "if n < 8 or acc == 0.0 or acc != acc:" in src
    f = _compiled("amax", 2, 1)
    for n in (8, 9, 11, 12, 13, 17):
        for at in range(n):
            x = -np.arange(1.0, n + 1.0)
            x[at] = 5.0
            assert f(x[None, :])[0] == 5.0, (n, at)


def softmax_rows(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    return np.sum(W * e / np.sum(e, axis=1)[:, None])


def test_a_program_with_a_max_along_an_axis_matches_the_oracle():
    from tests.oracle import check_against_oracle

    rng = np.random.default_rng(4)
    for shape in ((2, 3), (3, 9), (4, 17)):
        X = rng.standard_normal(shape)
        X[0, -1] = 0.0
        X[0, :-1] = -np.abs(X[0, :-1]) - 1.0       # a row whose maximum is 0.0
        for target in ("python", "cpu"):
            check_against_oracle(softmax_rows, (X, rng.standard_normal(shape)), target=target,
                                 wrt=("X",))
    g = coarsen.differentiate(softmax_rows, wrt=("X",))
    src = g.source_for(X, X)
    assert "if n >= 8:" in src
    # the adjoint of the maximum: its extremum in lanes too
    assert "def _red_adj_add_amax_2_1(" in src and "nan |= (v0 != v0)" in src


# --- the adjoint of max/min along an axis (``_reduce_adjoint_source``): the extremum in four
# lanes, its ties counted in a pass of their own, against the one pass it replaces, written
# here (bits compared whole: the NaNs of ``0.0 * (g / 0)`` and of a NaN ``g`` included)

_ADJOINTS = {}


def _adjoint(op, nd, ax, keep, add, jit=True):
    """The generated helper, compiled once per module (``error_model="numpy"``, as the
    generated modules: a NaN fiber's ``g / 0``)."""
    key = (op, nd, ax, keep, add, jit)
    if key not in _ADJOINTS:
        src = _reduce_adjoint_source(op, nd, ax, keep, add)
        name = f"_red_adj_{'add_' if add else ''}{op}_{nd}_{ax}" + ("_k" if keep else "")
        ns = {"np": np}
        exec(compile(src, f"<{name}>", "exec"), ns)
        _ADJOINTS[key] = numba.njit(error_model="numpy")(ns[name]) if jit else ns[name]
    return _ADJOINTS[key]


@numba.njit(error_model="numpy")
def _one_pass_fibers(out, a, g, is_max, add):
    """The helper before the lanes, over fibers laid out as the rows of ``a``: one pass finds
    the extremum and counts its ties, a NaN extremum counts 0."""
    for i in range(a.shape[0]):
        acc = a[i, 0]
        cnt = 1
        for k in range(1, a.shape[1]):
            v = a[i, k]
            if (v > acc if is_max else v < acc) or v != v:
                acc = v
                cnt = 1
            elif v == acc:
                cnt += 1
        if acc != acc:
            cnt = 0
        q = g[i] / cnt
        for k in range(a.shape[1]):
            if add:
                out[i, k] += (1.0 if a[i, k] == acc else 0.0) * q
            else:
                out[i, k] = (1.0 if a[i, k] == acc else 0.0) * q


def _one_pass(a, g, op, ax, keep, out=None):
    """``_one_pass_fibers`` on the fibers along ``ax`` (``out``: added into, a new array)."""
    moved = np.moveaxis(a, ax, -1)
    rows = np.ascontiguousarray(moved).reshape(-1, a.shape[ax])
    gs = np.moveaxis(g, ax, -1) if keep else g
    res = np.zeros(rows.shape) if out is None else np.moveaxis(out, ax, -1).reshape(rows.shape).copy()
    _one_pass_fibers(res, rows, np.ascontiguousarray(gs).reshape(-1), op == "amax", out is not None)
    return np.moveaxis(res.reshape(moved.shape), -1, ax)


def _run_adjoint(a, g, op, ax, keep, add, out0, jit=True):
    f = _adjoint(op, a.ndim, ax, keep, add, jit)
    if not add:
        return f(a, g)
    out = out0.copy()
    f(out, a, g)
    return out


def _same_bits(x, y):
    return x.shape == y.shape and x.tobytes() == y.tobytes()


_ADJ_KINDS = ("normal", "ties", "zeros", "nan", "inf", "equal", "mixed")


def _adj_fiber(rng, n, kind):
    if kind == "inf":
        x = rng.choice([np.inf, -np.inf, 1.0, -1.0, 0.0], n)
        x[rng.integers(0, n)] = rng.choice([np.inf, -np.inf])
        return x
    if kind == "nan":              # several NaNs, anywhere (the first four elements too)
        x = _fibers(rng, n, "ties")
        x[rng.integers(0, n, rng.integers(1, 4))] = np.nan
        return x
    if kind == "mixed":
        return _adj_fiber(rng, n, _ADJ_KINDS[rng.integers(0, 6)])
    return _fibers(rng, n, kind)


def _adj_g(rng, shape):
    g = rng.standard_normal(shape)
    g[rng.random(shape) < 0.2] = 0.0
    g[rng.random(shape) < 0.1] = -0.0
    g[rng.random(shape) < 0.05] = np.inf
    g[rng.random(shape) < 0.05] = np.nan
    return g


@pytest.mark.parametrize("add", [False, True])
@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("kind", _ADJ_KINDS)
def test_the_adjoint_has_the_one_pass_bits(op, add, kind):
    rng = np.random.default_rng([len(kind), add, op == "amax"])
    for n in list(range(1, 22)) + [40, 41]:
        a = np.stack([_adj_fiber(rng, n, kind) for _ in range(8)])
        g = _adj_g(rng, 8)
        out0 = rng.standard_normal(a.shape) if add else None
        want = _one_pass(a, g, op, 1, False, out0)
        got = _run_adjoint(a, g, op, 1, False, add, out0)
        assert _same_bits(got, want), (n, a, g)


@pytest.mark.parametrize("nd, ax, keep, add", [
    (1, 0, True, False), (1, 0, True, True), (2, 0, False, True), (2, 0, True, False),
    (2, 1, True, True), (3, 0, False, True), (3, 0, True, False), (3, 1, False, False),
    (3, 1, True, True), (3, 2, False, True), (3, 2, True, False)])
def test_the_adjoint_along_every_axis_and_rank(nd, ax, keep, add):
    # every axis with and without keepdims, in both forms (2-D axis 1 without keepdims, in
    # both forms, above); op alternates; every fiber of its own kind
    rng = np.random.default_rng([nd, ax, keep, add])
    op = "amax" if (nd + ax + keep + add) % 2 else "amin"
    for n in (1, 3, 8, 13, 40):
        shape = [3, 4, 2][:nd]
        shape[ax] = n
        fibers = [_adj_fiber(rng, n, _ADJ_KINDS[i % 7]) for i in range(int(np.prod(shape)) // n)]
        a = np.moveaxis(np.stack(fibers).reshape(shape[:ax] + shape[ax + 1:] + [n]), -1, ax)
        gshape = [1 if d == ax else s for d, s in enumerate(shape)] if keep else \
            [s for d, s in enumerate(shape) if d != ax]
        g = _adj_g(rng, gshape)
        out0 = rng.standard_normal(shape) if add else None
        want = _one_pass(a, g, op, ax, keep, out0)
        assert _same_bits(_run_adjoint(a, g, op, ax, keep, add, out0), want), (n, a)


def test_the_adjoint_of_float32_and_integer_operands():
    rng = np.random.default_rng(7)
    for n in (5, 8, 23):
        ints = rng.integers(-3, 3, (6, n))
        ints[0, :] = 2 ** 62 + 1           # ties an int64 to a float64 compare would add
        ints[0, n // 2] = 2 ** 62
        ints[1, :] = 4
        g = _adj_g(rng, 6)
        assert _same_bits(_run_adjoint(ints, g, "amin", 1, False, False, None),
                          _one_pass(ints, g, "amin", 1, False))
        singles = np.stack([_adj_fiber(rng, n, k) for k in _ADJ_KINDS[:6]]).astype(np.float32)
        out0 = rng.standard_normal(singles.shape)
        assert _same_bits(_run_adjoint(singles, g, "amax", 1, False, True, out0),
                          _one_pass(singles, g, "amax", 1, False, out0))


def test_the_adjoint_text_runs_as_python():
    # the python target: NumPy's scalar division (a NaN fiber's g / 0 with a warning)
    rng = np.random.default_rng(8)
    for n in (3, 9, 14):
        a = np.stack([_adj_fiber(rng, n, k) for k in _ADJ_KINDS])
        g = _adj_g(rng, len(_ADJ_KINDS))
        with np.errstate(divide="ignore", invalid="ignore"):
            got = _run_adjoint(a, g, "amax", 1, False, False, None, jit=False)
        want = _one_pass(a, g, "amax", 1, False)
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_the_adjoint_lanes_see_every_position():
    # the extremum, a tie of it and a NaN put at every position of fibers of 8 to 17
    # elements: a lane or a tail dropped, combined wrongly or left out of the NaN test or of
    # the count shows
    for op in ("amax", "amin"):
        for n in range(8, 18):
            rows = []
            for at in range(n):
                base = np.arange(1.0, n + 1.0) * (-1.0 if op == "amax" else 1.0)
                x = base.copy()
                x[at] = 0.0
                rows.append(x)
                for tie in range(at + 1, n):
                    y = x.copy()
                    y[tie] = -0.0
                    rows.append(y)
                z = base.copy()
                z[at] = np.nan
                rows.append(z)
            a = np.stack(rows)
            g = np.linspace(-1.0, 2.0, len(rows))
            got = _run_adjoint(a, g, op, 1, False, False, None)
            assert _same_bits(got, _one_pass(a, g, op, 1, False)), (op, n)


def test_the_adjoint_text():
    src = _reduce_adjoint_source("amax", 2, 1, False, True)
    assert src.count("if n >= 8:") == 1 and "cnt += 1 if a[i0, k] == acc else 0" in src
    assert "m3 = v3 if v3 > m3 else m3" in src and "nan |= (v0 != v0)" in src
    assert "m3 = v3 if v3 < m3 else m3" in _reduce_adjoint_source("amin", 2, 1, False)
