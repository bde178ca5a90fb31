"""Issue 44c: arrays above 2-D, ``np.einsum`` in full, advanced (fancy) indexing.

Every form on 1-D, 2-D and 3-D operands where it takes them: reductions with ``axis``,
``keepdims`` and negative axes; subscripts with ``...``, slices, new axes; ``@`` with broadcast
batch axes (and 1-D operands), ``np.dot`` of N-D arrays; ``np.diff``/``np.cumsum`` along any
axis; ``np.einsum`` with ``...``, an implicit output, one operand (trace, transpose, sums), three
operands, diagonals, NumPy's broadcasting of length-1 axes, the sublist form; indexing by
integer arrays and lists mixed with integers and slices (adjacent and apart: NumPy's
placement of the indexed axis).  Checked: the value against the function itself, the
gradient against the extended-precision oracle (``tests.oracle``), both modes (reverse:
coarse and fine; forward: ``coarsen.jvp`` against the oracle's gradient along a direction),
both targets (the python target for breadth; one compile of each combined program on cpu).
Metamorphic: renamed variables and the work split into a helper give the same bits; float32
inputs give the gradient of their float64 values (coarsen computes in float64), returned as
float32 as for every other function.
Refused with a location and a hint: boolean masks, index arrays above 1-D, stores through
index arrays, an einsum whose output drops ``...``; NumPy's run-time errors (lengths that do
not broadcast, an index out of range) are raised as NumPy raises them.
"""
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.oracle import assert_grad_close, check_against_oracle, fd_grad, resolve_wrt

R = np.random.default_rng(44)
A3 = R.uniform(0.5, 1.5, (2, 3, 4))
B3 = R.uniform(-1.0, 1.0, (2, 4, 3))
C3 = R.uniform(-1.0, 1.0, (1, 3, 4))
M = R.uniform(-1.0, 1.0, (4, 3))
S = R.uniform(-1.0, 1.0, (3, 3))
V = R.uniform(0.5, 1.5, 4)
IDX = np.array([2, 0, 2, -1])


# ------------------------------------------------------------------ the programs
def rank3(a, b, m, v, idx):
    """Reductions, subscripts, cumulative ops and fancy indexing of 3-D arrays."""
    r = np.sum(np.sum(a, axis=1) ** 2) + np.sum(np.mean(a, axis=-1, keepdims=True) * a)
    r += np.sum(np.max(a, axis=0)) + np.sum(np.prod(a, axis=2)) + np.sum(np.std(a, axis=-2))
    r += np.sum(np.min(a * b.transpose(0, 2, 1), axis=(0, 2)) ** 2) + np.var(a)
    r += a[1, 2, 3] * np.sum(a[0]) + np.sum(a[:, 1, :] ** 2) + np.sum(a[..., 1] * a[1, ...].T[1:3])
    r += np.sum(a[1:, ::2, -1] ** 3) + np.sum(a[:, None, 1, :] * v)
    r += np.sum(np.diff(a, axis=1) ** 2) + np.sum(np.diff(a) ** 2) + np.sum(np.diff(b, 2, 0) ** 2)
    r += np.sum(np.cumsum(a, axis=-2) ** 2) + np.sum(np.cumsum(b, axis=0) * b)
    r += np.sum(a[:, :, idx] ** 2) + np.sum(a[1, :, idx] * m[idx])
    r += np.sum(a[idx[1:3] - 1, :, idx[1:3]] * 1.5) + np.sum(a[[1, 0], [2, 2]] ** 2)
    r += np.sum(a[0, [0, 2]] ** 2) + np.sum(a[[1, 0], :, [3, 2]] ** 3) + v[[-1]][0] * v[idx[0]]
    return r


def products3(a, b, c, m, s, v):
    """@, np.dot and np.einsum above 2-D, and einsum's other forms."""
    r = np.sum((a @ b) ** 2) + np.sum(np.sin(c @ b)) + np.sum((a @ m) ** 2) + np.sum(v @ b)
    r += np.sum((a @ v) ** 2) + np.sum(m.T @ a.transpose(0, 2, 1)[:, :, :3] * 0.5)
    r += np.sum(np.dot(a, m) ** 2) + np.sum(np.dot(a, v) ** 3) + np.sum(np.dot(m.T, b) * 0.3)
    r += np.sum(np.einsum('...ij,...jk->...ik', a, b) ** 2) + np.sum(np.einsum('ij,jk', s, m.T))
    r += np.einsum('ijk->', a) + np.sum(np.einsum('ijk->kji', a) * a.T) + np.einsum('ii', s)
    r += np.sum(np.einsum('ii->i', s) ** 2) + np.sum(np.einsum('aij,ajk,kl->ail', a, b, s) ** 2)
    r += np.sum(np.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3]) ** 2)
    r += np.sum(np.einsum(a, [Ellipsis, 2], v, [2]) ** 2) + np.sum(np.einsum('i,i->i', v[:1], v))
    r += np.sum(np.einsum('bij,bjk->bik', c, b[:1]) ** 2) + np.sum(np.einsum('...i,...i', a, a))
    return r


def low_rank(A, x, idx):
    """The same forms on 1-D and 2-D operands."""
    r = np.sum(np.einsum('ij,j', A, x) ** 2) + np.einsum('i,i', x, x) + np.einsum('ij->', A)
    r += np.sum(np.einsum('...j,j->...', A, x) ** 2) + np.einsum('i->', x)
    r += np.sum(np.einsum('ji', A) * A.T) + np.sum(np.einsum(x, [0], x, [1]) ** 2)
    r += np.sum(x[idx] ** 2) + np.sum(A[idx, 1:] ** 2) + np.sum(A[:, [0, 0, 2]] * x[:3])
    r += np.sum(A[..., 0] ** 3) + np.sum(x[...] * x) + np.sum(np.diff(A, axis=-2) ** 2)
    r += np.sum(A @ x) + np.dot(x, x) + np.sum(np.dot(A.T, A))
    return r


def _args_rank3():
    return [A3.copy(), B3.copy(), M.copy(), V.copy(), IDX.copy()]


def _args_products():
    return [A3.copy(), B3.copy(), C3.copy(), M.copy(), S.copy(), V.copy()]


def _args_low():
    return [R.uniform(0.5, 1.5, (4, 4)), V.copy(), IDX.copy()]


RANK3_WRT = ("a", "b", "m", "v")
PRODUCTS_WRT = ("a", "b", "c", "m", "s", "v")


def check_jvp(fn, args, wrt, target, coarse=True):
    """``coarsen.jvp``'s value and tangent against the function and the oracle's gradient."""
    pos, _ = resolve_wrt(fn, args, wrt)
    exp = fd_grad(fn, [a.copy() if isinstance(a, np.ndarray) else a for a in args], pos)
    rng = np.random.default_rng(7)
    tans = tuple(rng.standard_normal(np.shape(args[k])) for k in pos)
    value, tangent = coarsen.jvp(fn, wrt, target=target, coarsen=coarse)(*args, tangents=tans)
    assert np.isclose(value, fn(*args), rtol=1e-12, atol=0.0)
    want = sum(float(np.sum(e * d)) for e, d in zip(exp, tans))
    scale = sum(float(np.sum(np.abs(e * d))) for e, d in zip(exp, tans))
    assert abs(tangent - want) <= 1e-9 * scale, (fn.__name__, tangent, want)


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,args,wrt", [
    (rank3, _args_rank3, RANK3_WRT), (products3, _args_products, PRODUCTS_WRT),
    (low_rank, _args_low, ("A", "x"))], ids=["rank3", "products3", "low_rank"])
def test_python_reverse_and_forward(fn, args, wrt, coarse):
    check_against_oracle(fn, args(), "python", wrt, coarse=coarse)
    check_jvp(fn, args(), wrt, "python", coarse)


def cpu_mix(a, b, s, v, idx):
    """One of each new loop nest, for the cpu target (Numba compiles each helper once)."""
    r = np.sum((a @ b) ** 2) + np.sum(np.einsum('...ij,jk->...ik', a, s[:1, :] * b[0]) ** 2)
    r += np.einsum('ii', s) + np.sum(a[..., 1] ** 2) + np.sum(np.diff(a, axis=1) ** 2)
    r += np.sum(np.cumsum(a, axis=-2) * a) + np.sum(a[1, :, idx] ** 3) + np.sum(v[[0, 2, 2, 1]] * v)
    return r + np.sum(np.max(a, axis=1, keepdims=True) * a)


def test_cpu_reverse_and_forward():
    args = [A3.copy(), B3.copy(), S.copy(), V.copy(), IDX.copy()]
    check_against_oracle(cpu_mix, args, "cpu", ("a", "b", "s", "v"), coarse=True)
    check_jvp(cpu_mix, args, ("a", "b", "s", "v"), "cpu")


# ------------------------------------------------------------------ metamorphic variants
def products_renamed(p, q, w, z, u, y):
    out = np.sum(np.einsum('...ij,...jk->...ik', p, q) ** 2) + np.sum((p @ z) ** 2)
    return out + np.sum(np.einsum(p, [0, 1, 2], q, [0, 2, 3], [0, 1, 3]) * np.sum(w)) \
        + np.sum(p[:, :, [3, 0]] * y[[1, 1]]) + np.einsum('ii', u)


def _part(a, b, m):
    return np.sum(np.einsum('...ij,...jk->...ik', a, b) ** 2) + np.sum((a @ m) ** 2)


def products_split(a, b, c, m, s, v):
    t = _part(a, b, m)
    return t + np.sum(np.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3]) * np.sum(c)) \
        + np.sum(a[:, :, [3, 0]] * v[[1, 1]]) + np.einsum('ii', s)


def products_plain(a, b, c, m, s, v):
    return np.sum(np.einsum('...ij,...jk->...ik', a, b) ** 2) + np.sum((a @ m) ** 2) \
        + np.sum(np.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3]) * np.sum(c)) \
        + np.sum(a[:, :, [3, 0]] * v[[1, 1]]) + np.einsum('ii', s)


def test_renamed_and_split_give_the_same_bits():
    args = _args_products()
    ref = coarsen.differentiate(products_plain, PRODUCTS_WRT, target="python")
    v0, g0 = ref.value_and_grad(*args)
    renamed = coarsen.differentiate(products_renamed, ("p", "q", "w", "z", "u", "y"),
                                    target="python")
    split = coarsen.differentiate(products_split, PRODUCTS_WRT, target="python")
    for g in (renamed, split):
        v1, g1 = g.value_and_grad(*args)
        assert v1 == v0
        for x, y in zip(g0, g1):
            assert np.array_equal(x, y)
    exp = fd_grad(products_plain, _args_products(), list(range(6)))
    assert_grad_close(g0, exp)


def test_float32_inputs_are_their_float64_values():
    args = _args_products()
    g = coarsen.differentiate(products_plain, PRODUCTS_WRT, target="python")
    v64, g64 = g.value_and_grad(*[a.astype(np.float32).astype(np.float64) for a in args])
    v32, g32 = g.value_and_grad(*[a.astype(np.float32) for a in args])
    assert v32 == v64
    for x, y in zip(g32, g64):      # each gradient in its argument's dtype, as before 44c
        assert x.dtype == np.float32 and np.array_equal(x, y.astype(np.float32))


# ------------------------------------------------------------------ NumPy's semantics
def bcast_einsum(x, y):
    return np.einsum('ij,ij->ij', x, y)


def bcast_matmul(x, y):
    return x @ y


def gather_mixed(x, i):
    return x[1, :, i]


@pytest.mark.parametrize("fn,args", [
    (bcast_einsum, (R.uniform(size=(1, 3)), R.uniform(size=(2, 3)))),
    (bcast_matmul, (R.uniform(size=(1, 2, 3)), R.uniform(size=(4, 3, 2)))),
    (bcast_matmul, (R.uniform(size=(3,)), R.uniform(size=(2, 1, 3, 2)))),
    (gather_mixed, (A3, IDX)),
], ids=["einsum-broadcast", "matmul-batch", "matmul-1d", "gather-front"])
def test_values_and_shapes_are_numpys(fn, args):
    j = coarsen.jvp(fn, "x", target="python")
    value, _ = j(*args, tangents=np.zeros_like(args[0]))
    want = fn(*args)
    assert value.shape == want.shape and np.allclose(value, want, rtol=1e-14, atol=0)


def err_matmul(x, y):
    return np.sum(x @ y)


def err_dot(x, y):
    return np.sum(np.dot(x, y))


def err_gather(x, i):
    return np.sum(x[i])


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("fn,args,exc", [
    (err_matmul, (A3, R.uniform(size=(2, 3, 4))), ValueError),
    (err_dot, (A3, R.uniform(size=(3, 2))), ValueError),
    (err_gather, (V, np.array([0, 4])), IndexError),
], ids=["matmul-core", "dot-lengths", "index-range"])
def test_numpy_errors_at_run_time(fn, args, exc, target):
    with pytest.raises(exc):
        fn(*args)
    with pytest.raises(exc):
        coarsen.differentiate(fn, "x", target=target)(*args)


def r_mask(x):
    return np.sum(x[x > 1.0])


def r_2d_index(x, i):
    return np.sum(x[i.reshape(2, 2)])


def r_store(x, i):
    y = x.copy()
    y[i] = 0.0
    return np.sum(y)


def r_drop_ellipsis(x):
    return np.sum(np.einsum('...j->j', x))


def r_two_ellipses(x):
    return np.sum(x[..., 0, ...])


@pytest.mark.parametrize("fn,args,words", [
    (r_mask, (V,), "boolean mask"),
    (r_2d_index, (V, IDX), "2-D index array"),
    (r_store, (V, IDX), "assigning through an index array"),
    (r_drop_ellipsis, (A3,), "drops the '...'"),
    (r_two_ellipses, (A3,), "single ellipsis"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_refused(fn, args, words):
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(fn, "x", target="python")(*args)
    assert words in str(e.value)
    assert e.value.filename.endswith("test_numpy_rank.py") and e.value.lineno is not None


# ------------------------------------------------------------------ second derivatives
def hessian_mix(v, idx):
    return np.sum(np.sin(v[idx]) * v[[0, 1, 1, 2]]) + np.einsum('i,i,i->', v, v, v) \
        + np.sum(np.diff(np.outer(v, v)[None] * v, axis=1) ** 2) + np.sum((v[None, None] @ v) ** 2)


def test_hessian_reads_back_the_new_forms():
    """``coarsen.hessian`` (forward over reverse: the JVP in NumPy's own spelling, fancy
    subscripts and ``np.einsum`` included) against central differences of the gradient."""
    v, idx = np.array([0.3, 0.7, 1.1]), np.array([2, 0, 1, 1])
    H = np.asarray(coarsen.hessian(hessian_mix, "v", target="python")(v, idx))
    g = coarsen.differentiate(hessian_mix, "v", target="python")
    pos = resolve_wrt(hessian_mix, [v, idx], "v")[0]
    assert pos == [0]
    eps = 1e-6
    cols = [(g(v + eps * e, idx) - g(v - eps * e, idx)) / (2 * eps) for e in np.eye(3)]
    assert np.allclose(H, np.array(cols).T, rtol=1e-7, atol=1e-7)
