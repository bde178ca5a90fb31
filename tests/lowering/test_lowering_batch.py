"""Batched drivers against a Python loop over the per-set function."""

import numpy as np
import pytest

from coarsen.lowering import LoweringError, batch_source
from coarsen.lowering.batch import MAX_BLOCKS

M = 5  # entries per set


def data(n_sets, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n_sets, M)), rng.normal(size=M), rng.normal(size=n_sets)


def loop_reference(mod, X, w, S, n):
    """Per-set results and shared gradient summed sequentially in set order from zero."""
    results = [mod.f(X[i], w, S[i], n) for i in range(X.shape[0])]
    values = np.array([r[0] for r in results])
    gx = np.array([r[1][0] for r in results]).reshape(X.shape)
    gs = np.array([r[1][2] for r in results])
    gw = np.zeros(M)
    for r in results:
        gw += r[1][1]
    return values, gx, gw, gs, results


def test_cpu_driver_matches_loop_exactly(batch_module):
    X, w, S = data(97)
    values, (gx, gw, gs) = batch_module.f_batch(X, w, S, M)
    rv, rgx, rgw, rgs, _ = loop_reference(batch_module, X, w, S, M)
    assert values.shape == (97,) and gx.shape == X.shape and gw.shape == (M,) and gs.shape == (97,)
    assert np.array_equal(values, rv)
    assert np.array_equal(gx, rgx)
    assert np.array_equal(gs, rgs)
    # n_sets <= MAX_BLOCKS: one set per block, so the reduction is the sequential sum, bit for bit.
    assert np.array_equal(gw, rgw)
    assert np.all(gw != 0.0)


def test_cpu_driver_many_sets_blocked_reduction(batch_module):
    n_sets = 1000
    X, w, S = data(n_sets, seed=1)
    values, (gx, gw, gs) = batch_module.f_batch(X, w, S, M)
    rv, rgx, rgw, rgs, results = loop_reference(batch_module, X, w, S, M)
    assert np.array_equal(values, rv) and np.array_equal(gx, rgx) and np.array_equal(gs, rgs)
    # Exactly the documented order: contiguous blocks, then partials in block order.
    nb = min(n_sets, MAX_BLOCKS)
    total = np.zeros(M)
    for b in range(nb):
        part = np.zeros(M)
        for i in range(b * n_sets // nb, (b + 1) * n_sets // nb):
            part += results[i][1][1]
        total += part
    assert np.array_equal(gw, total)
    np.testing.assert_allclose(gw, rgw, rtol=1e-13, atol=1e-13)
    # Deterministic from call to call.
    assert np.array_equal(batch_module.f_batch(X, w, S, M)[1][1], gw)


def test_python_driver_matches_cpu_driver(batch_module):
    X, w, S = data(200, seed=2)
    cpu = batch_module.f_batch(X, w, S, M)
    py = batch_module.f_batch_py(X, w, S, M)
    assert np.array_equal(cpu[0], py[0])
    for a, b in zip(cpu[1], py[1]):
        assert np.array_equal(a, b)


def test_two_dim_batched_and_scalar_shared(batch_module):
    rng = np.random.default_rng(4)
    A = rng.normal(size=(33, 3, 4))
    b = 0.75
    values, (gA, gb) = batch_module.f2_batch(A, b)
    ref = [batch_module.f2(A[i], b) for i in range(33)]
    assert np.array_equal(values, [r[0] for r in ref])
    assert np.array_equal(gA, np.array([r[1][0] for r in ref]))
    acc = 0.0
    for r in ref:
        acc += r[1][1]
    assert gb == acc and np.ndim(gb) == 0 and gb != 0.0


def test_empty_and_single_batches(batch_module):
    X, w, S = data(0)
    values, (gx, gw, gs) = batch_module.f_batch(X, w, S, M)
    assert values.shape == (0,) and gx.shape == (0, M) and gs.shape == (0,)
    assert np.array_equal(gw, np.zeros(M))
    X, w, S = data(1, seed=5)
    values, (gx, gw, gs) = batch_module.f_batch(X, w, S, M)
    v, (rx, rw, rs) = batch_module.f(X[0], w, S[0], M)
    assert values[0] == v and np.array_equal(gx[0], rx) and np.array_equal(gw, rw) and gs[0] == rs


def test_mismatched_batch_sizes_raise(batch_module):
    X, w, S = data(4)
    with pytest.raises(ValueError, match="different batch sizes"):
        batch_module.f_batch(X, w, S[:3], M)


def test_generated_names_avoid_parameter_names():
    """Parameters named like the driver's locals still work (python target, exec'd)."""
    src = (
        "import numpy as np\n\n\n"
        "def g(values, i, n_sets):\n"
        "    return values * i[0] + n_sets, (i[0] * 1.0 * values, values * np.ones(2))\n\n\n"
    ) + batch_source(
        "g", [("values", "float64"), ("i", "float64[:]"), ("n_sets", "int64")],
        [True, False, False], wrt=["values", "i"], target="python",
    )
    ns = {}
    exec(compile(src, "<g>", "exec"), ns)
    vals = np.array([1.0, 2.0, 3.0])
    out, (g_values, g_i) = ns["g_batch"](vals, np.array([2.0, 5.0]), 7)
    assert np.array_equal(out, [9.0, 11.0, 13.0])
    assert np.array_equal(g_values, [2.0, 4.0, 6.0])
    assert np.array_equal(g_i, [6.0, 6.0])


def test_generation_errors():
    p = [("x", "float64[:]"), ("n", "int64")]
    with pytest.raises(LoweringError, match="no parameter is batched"):
        batch_source("f", p, [False, False], wrt=["x"], target="cpu")
    with pytest.raises(LoweringError, match="has no gradient"):
        batch_source("f", p, [True, False], wrt=["n"], target="cpu")
    with pytest.raises(LoweringError, match="cannot read the type"):
        batch_source("f", [("x", "complex(1)")], [True], wrt=[], target="cpu")
    with pytest.raises(LoweringError, match="not a parameter"):
        batch_source("f", p, [True, False], wrt=["y"], target="cpu")
    with pytest.raises(LoweringError, match="entries in batched"):
        batch_source("f", p, [True], wrt=["x"], target="cpu")
    with pytest.raises(LoweringError, match="unknown target"):
        batch_source("f", p, [True, False], wrt=["x"], target="cuda")
    text = batch_source("f", p, [True, False], wrt=["x"], target="cpu")
    assert text.startswith("@numba.njit(parallel=True, cache=True)\ndef f_batch(x, n):\n")
    assert "numba.prange" in text
    assert batch_source("f", p, [True, False], wrt=["x"], target="cpu") == text  # deterministic
