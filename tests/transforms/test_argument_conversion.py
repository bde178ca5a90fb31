"""Arguments and module-level arrays of other dtypes are computed as float64, on every call and
by every transform (found by a probe):

* calls 2 to 64 of a kind of arguments that needs converting (float32, big-endian arrays) ran
  the taped entry on the raw arrays when the gradient tapes: float32 arithmetic (a wrong value
  and gradient) or a Numba TypingError for ``>f8``;
* ``jacobian``, ``hessian``, ``hvp`` and the batches passed module-level arrays as they are
  (float32 arithmetic, or a TypingError), and ``export`` embedded a float32 module array as
  float32 (not the numbers ``g`` computes).
"""
from __future__ import annotations

import enum
import importlib.util

import numpy as np
import pytest

import coarsen
from tests import module_f32 as mod


def taped(x, p):
    u = x.copy()
    for t in range(100):
        u[0] = u[0] + p * np.cos(u[1])
    return u[0] * u[0]


X32 = np.array([1e8, 0.0], dtype=np.float32)
W = np.array([0.3, -0.2, 0.1])
BIG = np.array([1.0, 2.0, 3.0])
SINGLE = np.array([1.1, 2.3, 3.7], dtype=np.float32).astype(np.float64)


def same(a, b):
    return a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1], b[1]))


def test_every_call_converts_its_arguments():
    g = coarsen.differentiate(taped, wrt=("x", "p"))
    ref = g.value_and_grad(X32.astype(np.float64), 1.0)
    for x in (X32, X32.astype(">f8")):
        for _ in range(4):
            value, (dx, dp) = g.value_and_grad(x, 1.0)
            assert value == ref[0] and dp == ref[1][1]
            assert np.array_equal(dx, ref[1][0].astype(x.dtype))


def test_transforms_convert_module_arrays():
    d1 = 2 * BIG * W + 3 * SINGLE * SINGLE * W * W
    d2 = 2 * BIG + 6 * SINGLE * SINGLE * W
    assert np.allclose(coarsen.differentiate(mod.weighted)(W)[0], d1, rtol=1e-15, atol=0)
    for mode in ("forward", "reverse"):
        assert np.allclose(coarsen.jacobian(mod.weighted, wrt="w", mode=mode)(W), d1, rtol=1e-15, atol=0)
    assert np.allclose(coarsen.hessian(mod.weighted, wrt="w")(W), np.diag(d2), rtol=1e-15, atol=0)
    assert np.allclose(coarsen.hvp(mod.weighted, wrt="w")(W, np.ones(3)), d2, rtol=1e-15, atol=0)
    Ws = np.stack([W, 2 * W])
    values, (grads,) = coarsen.differentiate(mod.weighted).batch((0,))(Ws)
    for k in range(2):
        v, (gk,) = coarsen.differentiate(mod.weighted).value_and_grad(Ws[k])
        assert values[k] == v and np.array_equal(grads[k], gk)


def test_export_embeds_the_arrays_the_gradient_computes_with(tmp_path):
    g = coarsen.differentiate(mod.weighted)
    want = g.value_and_grad(W)
    path = tmp_path / "weighted_grad.py"
    g.export(str(path))
    spec = importlib.util.spec_from_file_location("weighted_grad", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    got = m.value_and_grad_weighted(W)
    assert same(got, want)


def writes_both(x, w):
    for i in range(w.shape[0]):
        w[i] = w[i] * x[i] + 1.0
    x[0] = x[0] * 2.0
    return np.sum(w * w) + x[0] * w[1]


def test_batch_refuses_overlapping_written_arrays_as_g_does():
    # g.batch((0, None))(Z, Z[0]) gave set 0 a value of 32.5625 where the function gives 40.25
    # (x and w the same memory in that set); g refuses those arguments, and now so does the batch
    import pytest
    g = coarsen.differentiate(writes_both, wrt=("x", "w"))
    Z = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    with pytest.raises(coarsen.CoarsenError, match="overlap in memory"):
        g.batch((0, None))(Z, Z[0])
    values, _ = g.batch((0, None))(Z, Z[0].copy())
    assert values[1] == g.value_and_grad(Z[1].copy(), Z[0].copy())[0]


def _matrix_square(A):
    return np.sum(A * A)


@pytest.mark.parametrize("make", [np.asmatrix, lambda a: np.ma.masked_array(a, mask=a < 0)],
                         ids=["matrix", "masked"])
def test_ndarray_subclasses_are_refused(make):
    """np.matrix's ``*`` is a matrix product and a masked array's masked entries take no part:
    the gradient would compute on plain arrays, so they are refused (np.memmap is a plain
    array in a file, and is accepted)."""
    for target in ("python", "cpu"):
        g = coarsen.differentiate(_matrix_square, target=target)
        with pytest.raises(coarsen.CoarsenError, match="subclass of np.ndarray") as err:
            g(make(np.array([[1.0, -2.0], [3.0, 4.0]])))
        assert "np.asarray(A)" in str(err.value)


class Trips(enum.IntEnum):
    FEW = 3


def trips_loop(x, n):
    s = 0.0
    for i in range(n):
        s += x * i * x
    return s


def test_int_subclasses_are_ints():
    """An IntEnum member (which Numba types apart from int64) passed for an int parameter:
    converted as NumPy ints are (the cpu target raised Numba's TypingError)."""
    g = coarsen.differentiate(trips_loop, target="cpu")
    assert same(g.value_and_grad(0.7, Trips.FEW), g.value_and_grad(0.7, 3))
    assert g.value_and_grad(0.7, Trips.FEW)[0] == trips_loop(0.7, 3)
