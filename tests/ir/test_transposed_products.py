"""``A.T @ v`` as ``v @ A`` on the cpu target (coarsen.ir.transposed_products): the matrix's
adjoint is added in place (``_outer_add``), never built as a new matrix and added transposed.

Oracle: extended-precision finite differences on both targets at small sizes (the products'
loops), extended-precision directional derivatives above the BLAS crossovers.  Metamorphic:
renamed variables and a helper give the same bits; other dtypes (float32, integer matrices)
and strided views give the oracle's values.  Structure: where the rewrite applies, the cpu
source has no transposed matrix adjoint; where it must not (a transposed variable read twice,
a 2-D right-hand side, a permutation by ``axes``), it keeps the transpose.
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle, fd_directional

R = np.random.default_rng(4545)


def atax(A, x):
    y = A.T @ (A @ x)
    return 0.5 * np.sum(y * y)


def atax_renamed(M, v):
    w = M.T @ (M @ v)
    return 0.5 * np.sum(w * w)


def _back(M, v):
    return M.T @ v


def atax_split(A, x):
    y = _back(A, A @ x)
    return 0.5 * np.sum(y * y)


def mvt(A, x1, x2, y1, y2):
    x1 = x1 + A @ y1
    x2 = x2 + np.dot(A.T, y2)
    return 0.5 * (x1 @ x1 + x2 @ x2)


def in_a_loop(A, x):
    """The product in a loop, A changed in place between trips (the view reads the new A)."""
    s = 0.0
    for k in range(3):
        y = np.sin(A.T @ x)
        s += np.sum(y * y) * x[0]
        A[0, :] = A[0, :] * 0.5 + y[0]
    return s


def read_twice(A, x):
    """The transposed matrix is a variable read twice: it stays a transpose."""
    T = A.T
    y = T @ x
    return np.sum(np.sin(y)) + np.sum(T * T)


def matrix_rhs(A, B):
    return np.sum(np.cos(A.T @ B))


def permuted(A, x):
    return np.sum(np.sin(np.transpose(A, (1, 0)) @ x))


SMALL = {
    "atax": (atax, (R.standard_normal((5, 4)), R.standard_normal(4))),
    "mvt": (mvt, (R.standard_normal((4, 4)),) + tuple(R.standard_normal(4) for _ in range(4))),
    "in_a_loop": (in_a_loop, (R.standard_normal((4, 5)), R.standard_normal(4))),
}


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("target", ["python", "cpu"])
def test_oracle_small(name, target):
    fn, args = SMALL[name]
    check_against_oracle(fn, args, target=target)


def test_the_cpu_source_has_no_transposed_adjoint():
    for name in ("atax", "mvt"):
        fn, args = SMALL[name]
        g = coarsen.differentiate(fn)
        g(*args)
        src = g.source_for(*args)
        assert "_bar.T" not in src and "_outer(" not in src.split("def value_and_grad")[-1], name
        assert "A_bar = _outer_first2(A.shape" in src, name      # one pass, in place


@pytest.mark.parametrize("fn, args", [
    (read_twice, (R.standard_normal((4, 3)), R.standard_normal(4))),
    (matrix_rhs, (R.standard_normal((4, 3)), R.standard_normal((4, 2)))),
    (permuted, (R.standard_normal((4, 3)), R.standard_normal(4))),
])
def test_kept_where_the_rewrite_does_not_apply(fn, args):
    g, _, _ = check_against_oracle(fn, args, target="cpu")
    assert ".T" in g.source_for(*args) or "np.transpose" in g.source_for(*args)


def test_renamed_and_split_give_the_same_bits():
    args = (R.standard_normal((6, 5)), R.standard_normal(5))
    ref = coarsen.differentiate(atax).value_and_grad(*args)
    for f in (atax_renamed, atax_split):
        got = coarsen.differentiate(f).value_and_grad(*args)
        assert got[0] == ref[0]
        for a, b in zip(got[1], ref[1]):
            assert np.array_equal(a, b), f.__name__


def test_at_blas_sizes_against_the_directional_oracle_and_python():
    args = (R.standard_normal((300, 40)) / 20.0, R.standard_normal(40))
    dirs = [tuple(R.standard_normal(a.shape) for a in args) for _ in range(2)]
    cpu = coarsen.differentiate(atax)
    v, grads = cpu.value_and_grad(*args)
    for d in dirs:
        got = sum(float(np.sum(g * di)) for g, di in zip(grads, d))
        want = fd_directional(atax, args, (0, 1), [d])[0]
        assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (got, want)
    vp, gp = coarsen.differentiate(atax, target="python").value_and_grad(*args)
    assert abs(v - vp) <= 1e-12 * abs(v)
    for a, b in zip(grads, gp):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_other_dtypes_and_strided_views():
    A = R.standard_normal((8, 6))
    x = R.standard_normal(6)
    # float32 arguments: converted at the API, gradients cast back
    g32 = coarsen.differentiate(atax).value_and_grad(A.astype(np.float32), x.astype(np.float32))
    g64 = coarsen.differentiate(atax).value_and_grad(A.astype(np.float32).astype(np.float64),
                                                     x.astype(np.float32).astype(np.float64))
    for a, b in zip(g32[1], g64[1]):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b.astype(np.float32), rtol=1e-6)
    # a strided view of a larger matrix as the argument
    big = R.standard_normal((16, 12))
    check_against_oracle(atax, (big[::2, ::2], x), target="cpu")
