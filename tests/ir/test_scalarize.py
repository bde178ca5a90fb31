"""Element-wise array expressions as loop nests (``coarsen.ir.scalarize``).

Every program is written the way NumPy users write array code (slices, ``np.newaxis``,
broadcasting, full sums, in-place updates) and checked against the extended-precision oracle
on the cpu target, where it is scalarized, and against the same gradient with
``scalarize=False`` (NumPy's array operations).  The near misses must keep NumPy's meaning: a
store whose right-hand side reads the stored array elsewhere (NumPy evaluates it first), views
of the stored array, shapes that broadcast only at run time (an axis of length 1) or not at all
(``ValueError``, as NumPy raises), empty slices.  Metamorphic checks: renamed variables,
reordered independent statements and a stencil split into a helper give the same bits.
"""
import math

import numpy as np
import pytest

import coarsen
from coarsen.frontend.lower import lower
from coarsen.ir.printer import format_function
from coarsen.ir.scalarize import scalarize
from coarsen.ir.typeinfer import infer
from coarsen.transforms.artifact import arg_type
from tests.oracle import check_against_oracle


# ----------------------------------------------------------------------------- programs
def jacobi(A0, c, W, target, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        B[1:-1, 1:-1] = c * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1]
                             + A[:-2, 1:-1])
        A[1:-1, 1:-1] = c * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1]
                             + B[:-2, 1:-1])
    e = A - target
    return np.sum(W * e * e)


def heat_slices(u0, kappa, nt):
    u = u0.copy()
    for t in range(nt):
        v = u.copy()
        v[1:-1] = u[1:-1] + kappa * (u[:-2] - 2.0 * u[1:-1] + u[2:])
        u = v
    return np.sum(u * u)


def broadcasts(X, mu, w, s):
    """A row vector, a column through np.newaxis, an outer product, a scalar."""
    Z = (X - mu) / s
    P = np.outer(w, mu) + X * w[:, np.newaxis]
    return np.sum(np.tanh(Z) * P) + np.sum(np.exp(-Z * Z))


def runtime_broadcast(X, r, c):
    """``r`` is (1, n) and ``c`` is (m, 1) at run time: same rank, broadcast axes."""
    Y = X * r + c
    return np.sum(Y * Y) + np.sum(np.sin(r - c))


def strides(x, A, k):
    """Negative and non-unit steps, variable bounds, a fixed row."""
    n = x.shape[0]
    y = x[::-2] * 2.0
    z = A[::-1, 1:] - A[0, 1:]
    return np.sum(y * y) + np.sum(z * x[1:n]) + np.sum(x[k:] * x[:n - k]) + np.sum(A[1, ::3] ** 2)


def updates(A, B, c):
    """Augmented stores into regions, a store of a whole array, a store into a fixed column."""
    C = A.copy()
    C[1:-1, :] += c * B[:-2, :]
    C[:, 1:] -= np.sqrt(B[:, :-1] * B[:, :-1] + 1.0)
    D = np.zeros((A.shape[0], A.shape[1]))
    D[:, :] = C * C
    D[:, 0] = np.log(np.abs(B[:, 0]) + 1.0)
    return np.sum(D * A)


def overlap(x, a):
    """Near misses: the stored array read elsewhere on the right-hand side (shifted either
    way); the one safe overlap (each element read where it is written)."""
    y = x.copy()
    y[1:] = y[:-1] * a + 1.0          # NumPy reads y[:-1] before it writes
    y[:-1] = y[1:] * 2.0 - y[:-1]     # and here y[1:]
    y[:] = y * a                      # element by element, in place
    return np.sum(np.sin(y) * x)


def maths(x, y, a):
    """Unary functions, maximum and minimum with a scalar, powers."""
    m = np.maximum(x, 0.1) * np.minimum(y, 0.5)
    return np.sum(np.exp(-x * x) * np.log1p(y * y) + m ** 2 + a * np.cos(x) ** 3) \
        + np.sum(np.arctan2(x, y + 2.0))


def empty_slices(x, a):
    """Slices past the end are empty: sums of nothing, stores of nothing."""
    y = x.copy()
    y[5:] = a * x[5:]
    return np.sum(y * x) + np.sum(x[7:] * a)


def dots(L, b, w):
    """Dot products of 1-D trees: forward substitution's row times the solved part, np.dot,
    element-wise operations on either side, a vector with itself."""
    n = b.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return np.dot(w, x) + (x - 1.0) @ (w * 2.0) + x @ x


def matvecs(A, u, v, y, beta):
    """Matrix-vector products of a 2-D tree and a 1-D tree: gemver's rank-1 update, then the
    updated matrix transposed and scaled (read along its rows: the loops interchanged), and
    not transposed, a broadcast column on the matrix side, a vector on both sides."""
    B = A + np.outer(u, v)
    x = (beta * B.T) @ y
    w = (B * 0.5 - u[:, np.newaxis]) @ (x + v)
    z = (B + v) @ (v * v)
    return 0.5 * np.sum(w * w) + np.sum(z) + x @ x


def _r(seed=0):
    return np.random.default_rng(seed)


CASES = {
    jacobi: lambda: (_r(1).normal(size=(6, 5)), 0.2, 1.0 + _r(2).random((6, 5)),
                     _r(3).normal(size=(6, 5)), 3),
    heat_slices: lambda: (np.sin(np.linspace(0.0, 3.0, 7)), 0.3, 4),
    broadcasts: lambda: (_r(4).normal(size=(4, 3)), _r(5).normal(size=3), _r(6).normal(size=4), 1.7),
    runtime_broadcast: lambda: (_r(7).normal(size=(3, 4)), _r(8).normal(size=(1, 4)),
                                _r(9).normal(size=(3, 1))),
    strides: lambda: (_r(10).normal(size=5), _r(11).normal(size=(3, 5)), 2),
    updates: lambda: (_r(12).normal(size=(4, 3)), _r(13).normal(size=(4, 3)), 0.7),
    overlap: lambda: (_r(14).normal(size=6), 0.9),
    maths: lambda: (_r(15).normal(size=5), _r(16).normal(size=5), 0.3),
    empty_slices: lambda: (_r(17).normal(size=3), 1.3),
    dots: lambda: (np.tril(_r(18).normal(size=(5, 5))) + 4.0 * np.eye(5), _r(19).normal(size=5),
                   _r(23).normal(size=5)),
    matvecs: lambda: (_r(24).normal(size=(4, 4)), _r(25).normal(size=4), _r(26).normal(size=4),
                      _r(27).normal(size=4), 1.3),
}
#: the loops each program's qualifying expressions become (one per axis of each nest)
SCALARIZED = {jacobi: 8, heat_slices: 2, broadcasts: 8, runtime_broadcast: 6, strides: 8,
              updates: 9, overlap: 4, maths: 3, empty_slices: 3, dots: 4, matvecs: 10}


@pytest.fixture(scope="module")
def grads():
    """One compiled gradient per (program, coarse, scalarize), shared by the tests."""
    cache = {}

    def get(fn, coarse=True, scal=True):
        key = (fn, coarse, scal)
        if key not in cache:
            cache[key] = coarsen.differentiate(fn, coarsen=coarse, target="cpu", scalarize=scal)
        return cache[key]
    return get


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def _loops(fn, args):
    """The loops scalarize makes in ``fn`` at ``args`` (one per axis of each nest), and the
    IR text; checks that the input IR is left as it was."""
    fn_ir, _ = lower(fn)
    infer(fn_ir, [arg_type("a", a)[0] for a in args])
    before = format_function(fn_ir)
    out = scalarize(fn_ir)
    assert format_function(fn_ir) == before, "scalarize modified its input"
    text = format_function(out)
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("for _i")), text


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_oracle_coarse(fn):
    check_against_oracle(fn, CASES[fn](), "cpu", coarse=True)


@pytest.mark.parametrize("fn", [jacobi, overlap], ids=lambda f: f.__name__)
def test_oracle_fine(fn):
    check_against_oracle(fn, CASES[fn](), "cpu", coarse=False)


def _same_values(got, want):
    (v1, g1), (v0, g0) = got, want
    assert math.isclose(v1, v0, rel_tol=1e-13, abs_tol=1e-13)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("fn", [jacobi, broadcasts, updates, strides, overlap, dots, matvecs],
                         ids=lambda f: f.__name__)
def test_same_as_array_code(fn, grads):
    """The loop nests compute what NumPy's array operations compute (sums may round
    differently: NumPy sums pairwise).  The reference is the python target, which keeps the
    array operations and runs them in NumPy itself."""
    args = CASES[fn]()
    numpy_ref = coarsen.differentiate(fn, target="python")
    _same_values(grads(fn, True, True).value_and_grad(*_copies(args)),
                 numpy_ref.value_and_grad(*_copies(args)))


@pytest.mark.parametrize("fn", [strides, dots], ids=lambda f: f.__name__)
def test_cpu_array_code_as_numpy(fn, grads):
    """``scalarize=False`` on the cpu target (Numba's array operations) against NumPy's.  Two
    small cases: Numba compiles array expressions slowly (jacobi's took 20 s)."""
    args = CASES[fn]()
    numpy_ref = coarsen.differentiate(fn, target="python")
    _same_values(grads(fn, True, False).value_and_grad(*_copies(args)),
                 numpy_ref.value_and_grad(*_copies(args)))


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_which_expressions_become_loops(fn):
    count, text = _loops(fn, CASES[fn]())
    assert count == SCALARIZED[fn], text


def test_overlaps_stay_array_code():
    """The two stores whose right-hand side reads the stored array elsewhere stay array
    stores: each copies a new array, the nest of its right-hand side (``unstored``), as
    NumPy's statement does; they are not nests writing ``y`` in place."""
    _, text = _loops(overlap, CASES[overlap]())
    assert "y[1:] = _t" in text and "y[:-1] = _t" in text, text
    assert "y[:] = " not in text, text          # the safe overlap is scalarized


def test_python_target_keeps_arrays():
    """Python's scalar math raises where NumPy's returns inf or nan: the python target keeps
    the array operations (the cpu target's Numba follows NumPy)."""
    g = coarsen.differentiate(jacobi, target="python")
    assert "for _i" not in g.specialize(CASES[jacobi]()).source


def test_broadcast_error_as_numpy():
    def bad(x, y):
        return np.sum(x * y)
    g = coarsen.differentiate(bad, target="cpu")
    with pytest.raises(ValueError):
        bad(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="broadcast"):
        g(np.ones(3), np.ones(4))


def test_dot_lengths_as_numpy():
    """A dot product of two 1-D trees needs one length on both sides (NumPy's dot does not
    broadcast a length-1 side), and a length-0 product is 0."""
    def dot_of(x, y):
        return (x * 2.0) @ y
    g = coarsen.differentiate(dot_of, target="cpu")
    assert "for _i" in g.specialize((np.ones(3), np.ones(3))).ir_text
    for x, y in ((np.ones(3), np.ones(4)), (np.ones(1), np.ones(3))):
        with pytest.raises(ValueError):
            dot_of(x, y)
        with pytest.raises(ValueError, match="shapes not aligned"):
            g(x, y)
    v, (gx, gy) = g.value_and_grad(np.ones(0), np.ones(0))
    assert v == 0.0 and gx.shape == (0,) and gy.shape == (0,)


def test_matvec_shapes_as_numpy():
    """A matrix-vector product of trees needs the matrix's columns to match the vector (no
    broadcasting between them, as NumPy's matmul), whatever the tree broadcasts inside; a
    transposed matrix is read along its rows."""
    def mv(A, y):
        return np.sum((2.0 * A.T) @ y)
    g = coarsen.differentiate(mv, target="cpu")
    text = g.specialize((np.ones((3, 2)), np.ones(3))).ir_text
    assert "matmul" not in text and "transpose" not in text, text
    for A, y in ((np.ones((3, 2)), np.ones(2)), (np.ones((1, 2)), np.ones(3))):
        with pytest.raises(ValueError):
            mv(A, y)
        with pytest.raises(ValueError):
            g(A, y)
    v, (gA, gy) = g.value_and_grad(np.ones((0, 2)), np.ones(0))
    assert v == 0.0 and gA.shape == (0, 2) and gy.shape == (0,)


def test_reads_along_an_outer_axis_hoisted():
    """In a 2-D nest a value read along the outer axis only (``u[:, np.newaxis]``) is read once
    per outer trip, and a scalar factor of a matrix-vector product scales each sum once."""
    _, text = _loops(matvecs, CASES[matvecs]())
    lines = text.splitlines()
    outer = [k for k, line in enumerate(lines) if line.startswith("  for _i1 ")][0]
    inner = [k for k, line in enumerate(lines) if line.startswith("    for _i2 ")][0]
    assert any("getitem(_t1[" in line for line in lines[outer + 1:inner]), text
    assert any("= mul(beta, " in line and "[" not in line for line in lines), text


def test_reverse_evaluates_extents_once_per_loop(grads):
    """The integers a nest's indices are computed from (extents, broadcast strides) are
    evaluated once before the reverse of the loop they are invariant in, not per element."""
    g = grads(jacobi)
    g(*CASES[jacobi]())
    rev = g.source[g.source.index("# reverse sweep"):]
    lines = rev.splitlines()
    for k, line in enumerate(lines):
        if line.lstrip().startswith("for _i2 "):
            depth = len(line) - len(line.lstrip())
            body = []
            for nxt in lines[k + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= depth:
                    break
                body.append(nxt)
            assert body and not any("_bcast_stride(" in b or "_slice_len(" in b for b in body), \
                "\n".join(body)
            break
    else:
        raise AssertionError(rev)


def test_empty_region_and_length_one():
    """Empty slices and length-1 arrays broadcast as NumPy broadcasts them."""
    g = coarsen.differentiate(runtime_broadcast, target="cpu")
    check = coarsen.differentiate(runtime_broadcast, target="cpu", scalarize=False)
    for shapes in (((1, 1), (1, 1), (1, 1)), ((0, 3), (1, 3), (1, 1)), ((2, 3), (2, 3), (2, 3))):
        args = tuple(_r(k).normal(size=s) for k, s in enumerate(shapes))
        v1, g1 = g.value_and_grad(*args)
        v0, g0 = check.value_and_grad(*args)
        assert math.isclose(v1, v0, rel_tol=1e-13, abs_tol=1e-13)
        for a, b in zip(g1, g0):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


# ----------------------------------------------------------------------------- metamorphic
def jacobi_renamed(_t1, x_bar, u_y, _i1, _acc1):
    _i2 = _t1.copy()
    B_bar = _t1.copy()
    for _t2 in range(_acc1):
        B_bar[1:-1, 1:-1] = x_bar * (_i2[1:-1, 1:-1] + _i2[1:-1, :-2] + _i2[1:-1, 2:]
                                     + _i2[2:, 1:-1] + _i2[:-2, 1:-1])
        _i2[1:-1, 1:-1] = x_bar * (B_bar[1:-1, 1:-1] + B_bar[1:-1, :-2] + B_bar[1:-1, 2:]
                                   + B_bar[2:, 1:-1] + B_bar[:-2, 1:-1])
    _e1 = _i2 - _i1
    return np.sum(u_y * _e1 * _e1)


def _half_step(dst, src, c):
    dst[1:-1, 1:-1] = c * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1]
                           + src[:-2, 1:-1])


def jacobi_helpers(A0, c, W, target, tsteps):
    A = A0.copy()
    B = A0.copy()
    for t in range(tsteps):
        _half_step(B, A, c)
        _half_step(A, B, c)
    e = A - target
    return np.sum(W * e * e)


def broadcasts_reordered(X, mu, w, s):
    P = np.outer(w, mu) + X * w[:, np.newaxis]
    Z = (X - mu) / s
    return np.sum(np.tanh(Z) * P) + np.sum(np.exp(-Z * Z))


def _bits(g, args):
    v, gr = g.value_and_grad(*_copies(args))
    return v, [np.asarray(x) for x in gr]


def _same_bits(a, b):
    assert a[0] == b[0]
    for x, y in zip(a[1], b[1]):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("other", [jacobi_renamed, jacobi_helpers], ids=lambda f: f.__name__)
def test_metamorphic_jacobi(other, grads):
    """Renamed to compiler-looking names, or split into a helper: the same bits."""
    args = CASES[jacobi]()
    ref = _bits(grads(jacobi), args)
    g = coarsen.differentiate(other, wrt=(0, 1), target="cpu")
    got = _bits(g, args)
    _same_bits((ref[0], ref[1][:2]), got)


def test_metamorphic_reordered(grads):
    """Independent statements swapped: scalarized the same way, the same gradient to rounding
    (the reverse sweep adds the two statements' contributions to ``mu_bar`` in the other
    order, so the last bits may differ)."""
    args = CASES[broadcasts]()
    assert _loops(broadcasts_reordered, args)[0] == _loops(broadcasts, args)[0]
    v0, g0 = _bits(grads(broadcasts), args)
    v1, g1 = _bits(coarsen.differentiate(broadcasts_reordered, target="cpu"), args)
    assert math.isclose(v0, v1, rel_tol=1e-13)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_float32_and_other_shapes(grads):
    """float32 arrays (computed in float64, gradients cast back) and another grid size."""
    A0, c, W, target, T = CASES[jacobi]()
    g = grads(jacobi)
    args = (A0.astype(np.float32), c, W.astype(np.float32), target.astype(np.float32), T)
    v, (gA, gc, gW, gt) = g.value_and_grad(*args)
    assert gA.dtype == np.float32 and gW.dtype == np.float32
    v64, (gA64, gc64, gW64, gt64) = g.value_and_grad(*(a.astype(np.float64) if isinstance(
        a, np.ndarray) else a for a in args))
    np.testing.assert_array_equal(gA, gA64.astype(np.float32))
    assert gc == gc64
    check_against_oracle(jacobi, (_r(20).normal(size=(3, 8)), 0.3, _r(21).random((3, 8)),
                                  _r(22).normal(size=(3, 8)), 2), "cpu")
