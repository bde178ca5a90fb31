"""Rebinding sinks and composed reads in scalarization (``coarsen.ir.scalarize``), and the
reverse sweep's re-reads of the arrays they rebind (``coarsen.analysis.recording``).

``path = np.minimum(path, path[:, k][:, None] + path[k, :][None, :])`` in a loop (Floyd-
Warshall's relaxation) rebinds a variable to a new array built from the old one: it becomes a
nest into a new temporary moved into ``path`` after it, and the two chained reads compose into
``path[:, None, k]`` and ``path[None, k, :]``.  The reverse sweep then re-reads ``path``'s
elements (restored at each rebinding) instead of taping each element it read, and evaluates
the extents again from ``path.shape``.

Checked against the extended-precision oracle on the cpu target (scalarized) and the python
target (NumPy's array code), both modes; near misses where the rewrite must not apply (the
variable written element by element, a parameter, a read used after a rebinding, a shape
that changes every trip); the structure (what became a nest, what is taped) where it is the
point; metamorphic variants (renamed, split into a helper) give the same bits.
"""
import re

import numpy as np
import pytest

import coarsen
from tests.helpers_passes import scalarized_ir
from tests.oracle import check_against_oracle, fd_directional, float_positions


# ----------------------------------------------------------------------------- programs
def floyd(dist, C):
    path = dist.copy()
    for k in range(path.shape[0]):
        path = np.minimum(path, path[:, k][:, None] + path[k, :][None, :])
    return np.sum(C * path)


def floyd_renamed(_t3, path_bar):
    _i1 = _t3.copy()
    for _a1 in range(_i1.shape[0]):
        _i1 = np.minimum(_i1, _i1[:, _a1][:, None] + _i1[_a1, :][None, :])
    return np.sum(path_bar * _i1)


def _relax(p, k):
    return np.minimum(p, p[:, k][:, None] + p[k, :][None, :])


def floyd_helper(dist, C):
    path = dist.copy()
    for k in range(path.shape[0]):
        path = _relax(path, k)
    return np.sum(C * path)


def shrinking(x, w):
    """A rebinding whose shape changes every trip: the extents the reverse sweep evaluates
    again must be each trip's."""
    y = x * 1.0
    for k in range(3):
        y = np.sin(y[1:]) * w[k] + y[:-1] * y[:-1]
    return np.sum(y * y)


def read_then_rebound(A, v):
    """``t`` read from ``B`` before ``B`` is rebound and used after: the reverse sweep must not
    read it again from ``B`` (which holds the new array there)."""
    B = A * 2.0
    s = 0.0
    for k in range(3):
        t = B[0, k]
        B = np.tanh(B + v[k])
        s = s + t * B[1, k]
    return s + np.sum(B * B)


def dims_after_rebinding(x, w):
    """``n``, a dimension of ``y``, used after ``y`` is rebound to a shorter array: the reverse
    sweep must not evaluate it again from ``y.shape`` there."""
    y = x * 1.0
    s = 0.0
    for k in range(3):
        n = y.shape[0]
        y = np.sin(y[1:]) * w[k]
        s = s + y[n - 2] * w[k]
    return s + np.sum(y * y)


def written_after(A, v):
    """``B`` is written element by element after the loop: no rebinding nest (the move would
    let the write reach the nest's temporary unseen)."""
    B = A * 1.0
    for k in range(2):
        B = np.cos(B * v[k]) + B
    B[0, 0] = 3.0 * B[1, 1]
    return np.sum(B * B)


def rebound_param(x, w):
    """A parameter rebound: no rebinding nest (left as array code), still right."""
    for k in range(3):
        x = np.exp(-x * w[k]) + x
    return np.sum(x)


def chained_reads(A, T, u, k):
    """Reads of reads, composed into one read each: a column and a row with a new axis, a row
    of a 3-D array with two, a reversed row, a 3-D slab's column, a negative index."""
    P = A[:, k][:, None] * A[k, :][None, :]
    q = A[k][::-1] * u + A[-1][1:][::-1].sum()
    R = T[1][:, :, None] * T[:, 0, :][None, :, :].sum()
    S = T[:, 1][:, None, :] + T[-1, :, 2][None, :, None]
    return np.sum(P * P) + np.sum(q * u) + np.sum(np.sin(R)) + np.sum(S * S)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _floyd_args(n=5, seed=0):
    r = _rng(seed)
    dist = 1.0 + 9.0 * r.random((n, n))
    np.fill_diagonal(dist, 0.1 + 0.4 * r.random(n))
    return dist, r.random((n, n))


CASES = {
    floyd: _floyd_args,
    shrinking: lambda: (_rng(1).standard_normal(7), np.array([0.7, -1.1, 0.4])),
    read_then_rebound: lambda: (_rng(2).standard_normal((3, 4)) * 0.5, np.array([0.3, -0.2, 0.6])),
    dims_after_rebinding: lambda: (_rng(8).standard_normal(6), np.array([0.9, -1.3, 0.5])),
    written_after: lambda: (_rng(3).standard_normal((3, 3)), np.array([0.8, -0.5])),
    rebound_param: lambda: (_rng(4).standard_normal(4) * 0.3, np.array([0.5, 1.5, -0.4])),
    chained_reads: lambda: (_rng(5).standard_normal((4, 3)), _rng(6).standard_normal((3, 4, 3)),
                            _rng(7).standard_normal(3), 2),
}


def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_oracle(fn, target):
    check_against_oracle(fn, CASES[fn](), target)


@pytest.mark.parametrize("fn", [floyd, shrinking, read_then_rebound, dims_after_rebinding],
                         ids=lambda f: f.__name__)
def test_tangents_against_finite_differences(fn):
    """Forward mode runs the same scalarized IR: its directional derivative on cpu."""
    args = CASES[fn]()
    pos = float_positions(args)[:1]
    d = _rng(9).standard_normal(np.shape(args[pos[0]]))
    j = coarsen.jvp(fn, wrt=pos[0], target="cpu")
    value, tangent = j(*_copies(args), tangents=d)
    (expected,) = fd_directional(fn, _copies(args), pos, [(d,)])
    assert value == pytest.approx(fn(*_copies(args)), rel=1e-13)
    assert tangent == pytest.approx(float(expected), rel=1e-8, abs=1e-12)


def test_floyd_relaxation_is_one_nest_with_composed_reads():
    text = scalarized_ir(floyd, _floyd_args())
    assert re.search(r"_t\d+: f64 = minimum\(", text), text          # element by element
    assert "getitem(path[_i1, k])" in text and "getitem(path[k, _i2])" in text, text
    assert "path[:, k]" not in text and "path[k, :]" not in text, text
    assert re.search(r"path: f64\[:,:\] = copy\(_t\d+\)", text), text


@pytest.mark.parametrize("fn", [written_after, rebound_param], ids=lambda f: f.__name__)
def test_no_rebinding_nest(fn):
    text = scalarized_ir(fn, CASES[fn]())
    name = "B" if fn is written_after else "x"
    assert not re.search(name + r": f64\[:*,?:*\] = copy\(_t", text), text
    assert not re.search(r"_t\d+: f64 = (exp|cos)\(", text), text


def test_reverse_rereads_the_rebound_array_instead_of_taping():
    """Floyd-Warshall's reverse sweep reads the restored ``path``: no element of the
    relaxation is taped (the tape holds the rebound arrays, n*n floats per trip each, and
    nothing per element)."""
    args = _floyd_args(6)
    g = coarsen.differentiate(floyd, target="cpu")
    g.value_and_grad(*_copies(args))
    n = 6
    # per trip: the array path rebinds and the nest's temporary, with their two dimensions
    # (before: two floats and four integers per element besides)
    assert g.tape_bytes <= 8 * (n + 1) * (2 * n * n + 4), g.tape_bytes


def test_metamorphic_variants_give_the_same_bits():
    args = _floyd_args(6, seed=4)
    want = coarsen.differentiate(floyd, target="cpu").value_and_grad(*_copies(args))
    for fn in (floyd_renamed, floyd_helper):
        got = coarsen.differentiate(fn, target="cpu").value_and_grad(*_copies(args))
        assert got[0] == want[0]
        for a, b in zip(got[1], want[1]):
            assert np.array_equal(a, b), fn.__name__


# ----------------------------------------------------------------------------- guards (issue 48)
def dims_through_a_chain(x, w):
    """``m = n - 2`` from ``n = y.shape[0]``, both before ``y`` is rebound, ``m`` used after:
    the reverse sweep must not evaluate ``m`` again (through ``n`` it would read the new
    ``y``'s shape: ``find_int_recomputable`` hands the rebound arrays on along the chain)."""
    y = x * 1.0
    s = 0.0
    for k in range(3):
        n = y.shape[0]
        m = n - 2
        y = np.sin(y[1:]) * w[k]
        s = s + y[m] * w[k]
    return s + np.sum(y * y)


def rebound_param_twice(x, w):
    """A parameter assigned twice in its own web (so it reaches ``rebindable``): no
    rebinding nest.  (``x = x * 2.0`` before the loop would start a new web, ``x_2``.)"""
    for k in range(3):
        if w[k] > 0.0:
            x = np.exp(-x * w[k]) + x
        else:
            x = np.cos(x) * w[k] + x
    return np.sum(x)


def rebound_view(A, v):
    """A view's name rebound in a loop (``B = A[1:]`` first): no rebinding nest."""
    B = A[1:]
    for k in range(3):
        B = np.tanh(B * v[k]) + B
    return np.sum(B * B)


GUARD_CASES = {
    dims_through_a_chain: lambda: (_rng(8).standard_normal(6), np.array([0.9, -1.3, 0.5])),
    rebound_param_twice: lambda: (_rng(4).standard_normal(4) * 0.3, np.array([0.5, 1.5, -0.4])),
    rebound_view: lambda: (_rng(5).standard_normal((4, 3)) * 0.5, np.array([0.7, -1.1, 0.4])),
}


def test_a_dimension_read_through_another_scalar():
    check_against_oracle(dims_through_a_chain, GUARD_CASES[dims_through_a_chain](), "python")


def test_no_rebinding_nest_for_a_parameter_or_a_view():
    for fn, name in ((rebound_param_twice, "x"), (rebound_view, "B")):
        text = scalarized_ir(fn, GUARD_CASES[fn]())
        assert not re.search(name + r": f64\[:*,?:*\] = copy\(_t", text), text
        assert not re.search(r"_t\d+: f64 = (exp|cos|tanh)\(", text), text


def test_the_relaxation_tapes_no_integer_per_trip():
    """Per trip, ``path``'s binding (n*n floats, its two dimensions) and the nest's temporary's
    two dimensions alone (the reverse sweep reads its shape only, for its adjoint's reset:
    ``recording.shape_recorded``), plus the first binding's dimensions: the nest's extents are
    evaluated again from ``path.shape`` (no rebinding between them and their reads:
    ``find_int_recomputable``), its elements re-read, nothing else taped."""
    args = _floyd_args(6)
    g = coarsen.differentiate(floyd, target="cpu")
    g.value_and_grad(*_copies(args))
    n = 6
    assert g.tape_bytes <= 8 * (n * (n * n + 4) + 2), g.tape_bytes
    src = g.source_for(*_copies(args))
    assert re.search(r"_t\d+, _ipos = _pop_shape2\(_itape, _ipos\)", src), src
