"""Stores of whole arrays into regions as loop helpers (``coarsen.ad.reverse.region_stores``,
``coarsen.codegen.region_loops``).

On the cpu target ``a[s] = x``, ``a[s] += x`` and ``a[s] -= x`` of arrays (the user's stores
and the reverse sweep's adjoint updates) become ``_region_<op><r>_<v>(a[s], x)``: NumPy's
broadcasting, its overlap rule (``y[1:] = y[:-1]`` reads ``y`` before writing it) and its
``ValueError`` where shapes do not broadcast.  Checked against the extended-precision oracle on
both targets (the python target keeps NumPy's statements: the reference for the same code),
the helpers themselves against NumPy on many regions, layouts and overlaps, the structure, and
a renamed variant giving the same bits.
"""
import re

import numpy as np
import pytest

import coarsen
from coarsen.codegen.region_loops import has_region_helper, region_name, region_source
from tests.oracle import check_against_oracle


def overlap(x):
    y = x * 2.0
    y[1:] = y[:-1]
    y[:-1] += y[1:]
    y[::-1] -= y
    return np.sum(np.sin(y) * x)


def overlap_renamed(y_bar):
    _t1 = y_bar * 2.0
    _t1[1:] = _t1[:-1]
    _t1[:-1] += _t1[1:]
    _t1[::-1] -= _t1
    return np.sum(np.sin(_t1) * y_bar)


def bcast(A, v):
    B = A * 1.0
    B[1:3, :] = v
    B[0, :] -= v * v
    B[:, ::2] += A[:, ::-2] * 0.5
    return np.sum(B * B * A)


def slabs(T, U):
    S = np.cos(T)
    S[1:, :, ::-1] += U
    S[0] = U[0] * 3.0
    for k in range(2):
        S[:, k, :] -= S[:, k + 1, :] * 0.5
    return np.sum(S * T)


def durbin_like(r):
    n = r.shape[0]
    y = np.zeros(n)
    y[0] = -r[0]
    alpha = -r[0]
    for k in range(1, n):
        alpha = -(r[k] + r[:k][::-1] @ y[:k]) * 0.5
        y[:k] = y[:k] + alpha * y[:k][::-1]
        y[k] = alpha
    return np.sum(y * r)


def _args(name):
    rng = np.random.default_rng(11)
    return {"overlap": (rng.standard_normal(6),),
            "bcast": (rng.standard_normal((4, 5)), rng.standard_normal(5)),
            "slabs": (rng.standard_normal((3, 3, 4)), rng.standard_normal((2, 3, 4))),
            "durbin_like": (0.3 * rng.standard_normal(6),)}[name]


PROGRAMS = {"overlap": overlap, "bcast": bcast, "slabs": slabs, "durbin_like": durbin_like}


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_oracle(name, target):
    check_against_oracle(PROGRAMS[name], _args(name), target=target, wrt=0)


def test_stores_are_helper_calls_on_cpu_only():
    args = _args("bcast")
    cpu = coarsen.differentiate(bcast, wrt=0, target="cpu").source_for(*args)
    py = coarsen.differentiate(bcast, wrt=0, target="python").source_for(*args)
    assert re.search(r"_region_set2_1\(B\[1:3, :\], v\)", cpu), cpu
    assert not re.search(r"_region_(set|add|sub)\d", py), py
    # the user's store and the reverse sweep's adjoint updates: no array is assigned into a
    # slice on cpu any more
    args = _args("durbin_like")
    cpu = coarsen.differentiate(durbin_like, wrt=0, target="cpu").source_for(*args)
    assert re.search(r"_region_set1_1\(y\[:k\], \w+\)", cpu), cpu
    # (y[:k] + alpha * y[:k][::-1] is a nest into a new array, which the store copies:
    # coarsen.ir.scalarize's refused stores; its adjoint is added element by element)
    assert not re.search(r"^\s+\w+\[[^\]]*:[^\]]*\] [+-]?= [A-Za-z_]\w*$", cpu, re.M), cpu


def test_renamed_variant_gives_the_same_bits():
    args = _args("overlap")
    want = coarsen.differentiate(overlap, target="cpu").value_and_grad(*args)
    got = coarsen.differentiate(overlap_renamed, target="cpu").value_and_grad(*args)
    assert got[0] == want[0] and np.array_equal(got[1], want[1])


def test_a_region_that_does_not_broadcast_raises_as_numpy_does():
    def bad(x, m):
        y = x * 1.0
        y[:3] = x[:m]
        return np.sum(y)

    with pytest.raises(ValueError):
        bad(np.ones(5), 2)
    g = coarsen.differentiate(bad, wrt=0, target="cpu")
    with pytest.raises(ValueError):
        g.value_and_grad(np.ones(5), 2)
    v, gx = g.value_and_grad(np.ones(5), 3)
    assert v == 5.0 and np.array_equal(gx, np.ones(5))


# ----------------------------------------------------------------------------- the helpers
def _helpers():
    ns = {"np": np}
    out = {}
    for op in ("set", "add", "sub"):
        for r in (1, 2, 3):
            for v in (1, 2, 3):
                if has_region_helper(op, r, v):
                    exec(region_source(op, r, v), ns)
                    out[op, r, v] = ns[region_name(op, r, v)]
    return out


CASES = [((8,), np.s_[2:6], (4,)), ((8,), np.s_[2:6], (1,)), ((8,), np.s_[::-1], (8,)),
         ((5, 6), np.s_[1:4, ::2], (3, 3)), ((5, 6), np.s_[1:4, ::2], (3,)),
         ((5, 6), np.s_[1:4, ::2], (1, 3)), ((5, 6), np.s_[:, 2:5], (5, 1)),
         ((5, 6), np.s_[0, :], (6,)), ((5, 6), np.s_[0, :], (1, 6)),
         ((4, 5, 6), np.s_[1:3, :, ::-2], (2, 5, 3)), ((4, 5, 6), np.s_[1:3, :, ::-2], (3,)),
         ((5, 6), np.s_[2:2, :], (6,))]


def _numpy(op, a, s, x):
    a = a.copy()
    if op == "set":
        a[s] = x
    elif op == "add":
        a[s] += x
    else:
        a[s] -= x
    return a


def test_helpers_do_what_numpy_does():
    """Every region of ``CASES`` with every operation NumPy accepts there (a new array as the
    value), then values that overlap the region (the array itself reversed, shifted), run as
    Python and compiled."""
    import numba
    helpers = _helpers()
    jitted = {k: numba.njit(f) for k, f in helpers.items()}
    rng = np.random.default_rng(2)
    checked = 0
    for shape, s, xs in CASES:
        for op in ("set", "add", "sub"):
            a = rng.standard_normal(shape)
            r = a[s].ndim
            x = rng.standard_normal(xs)
            if not has_region_helper(op, r, x.ndim):
                continue
            want = _numpy(op, a, s, x)
            for table in (helpers, jitted):
                b = a.copy()
                table[op, r, x.ndim](b[s], x)
                assert np.array_equal(b, want), (shape, s, xs, op)
                checked += 1
    # overlaps: the value is the array itself, reversed or shifted
    for op in ("set", "add", "sub"):
        for table in (helpers, jitted):
            a = np.arange(10.0)
            b = a.copy()
            table[op, 1, 1](b[::-1], b)
            assert np.array_equal(b, _numpy(op, a, np.s_[::-1], a.copy()))
            b = a.copy()
            table[op, 1, 1](b[1:], b[:-1])
            assert np.array_equal(b, _numpy(op, a, np.s_[1:], a[:-1].copy()))
            checked += 2
    assert checked >= 60
    for table in (helpers, jitted):
        with pytest.raises(ValueError):
            table["set", 1, 1](np.zeros(4), np.zeros(3))
        with pytest.raises(ValueError):
            table["add", 2, 2](np.zeros((2, 4)), np.zeros((3, 4)))
    assert not has_region_helper("add", 1, 2) and has_region_helper("set", 1, 2)


def rows(x):
    A = np.zeros((3, x.shape[0]))
    A[0, :] = np.cumsum(x)
    for k in range(1, 3):
        A[k, :] = np.cumsum(A[k - 1, :] * x)
    return np.sum(A * A)


def test_regions_of_integer_indices_and_the_source_comments():
    """``A[0, :]`` (a constant) and ``A[k, :]`` (an integer name) select rows: the stores are
    helper calls of region rank 1, the program agrees with the oracle on both targets, and the
    loops around the rewritten statements keep their source-line comments."""
    x = np.random.default_rng(5).standard_normal(4)
    check_against_oracle(rows, (x,), target="cpu")
    check_against_oracle(rows, (x,), target="python")
    src = coarsen.differentiate(rows, target="cpu").source_for(x)
    assert "_region_set1_1(A[0, :], " in src and "_region_set1_1(A[k, :], " in src, src
    assert src.count("# for k in range(1, 3):") == 2, src
    assert src.count("# A[k, :] = np.cumsum(A[k - 1, :] * x)") == 2, src


def int_and_bool_regions(x, idx):
    a = idx * 1
    m = x > 0.5
    a[1:] = m[:-1]
    m[1:] = idx[:-1]
    y = x * 1.0
    y[:] += m
    return np.sum(x * a * y)


def test_integer_and_boolean_regions_stay_numpy_statements():
    """The pass rewrites stores of float64 arrays only: ``a[1:] = m[:-1]`` (a bool array into
    an i64 one) and ``m[1:] = idx[:-1]`` (i64 into bool) stay NumPy's statements on cpu (no
    helper compiled for their signatures) and agree with the oracle on both targets.  (Storing
    a float array into an integer one is refused before this pass: ``CoarsenError``.)"""
    x = np.array([0.3, 1.7, -2.4, 0.9, 1.2])
    idx = np.array([3, 1, 0, 1, 5])
    check_against_oracle(int_and_bool_regions, (x, idx), target="cpu", wrt=0)
    check_against_oracle(int_and_bool_regions, (x, idx), target="python", wrt=0)
    src = coarsen.differentiate(int_and_bool_regions, wrt=0, target="cpu").source_for(x, idx)
    assert not re.search(r"_region_(set|add|sub)\d", src), src
    assert "a[1:] = " in src and "m[1:] = " in src, src


def row_copies(x):
    B = np.zeros((3, x.shape[0]))
    v = np.sin(x)
    for k in range(3):
        B[k, :] = v
    return np.sum(B * B * x)


def test_a_loop_of_region_stores_alone_is_rewritten():
    """Every statement of the loop's body becomes a helper call: the rebuilt body is kept
    even though no statement of it stays as it was."""
    x = np.linspace(0.1, 1.0, 5)
    check_against_oracle(row_copies, (x,), target="cpu")
    src = coarsen.differentiate(row_copies, target="cpu").source_for(x)
    assert "_region_set1_1(B[k, :], v)" in src, src
    assert not re.search(r"^\s+B\[k, :\] = v$", src, re.M), src
