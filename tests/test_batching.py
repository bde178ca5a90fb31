"""Batched gradients (coarsen.batching): CPU (numba prange) and plain-Python drivers against a
loop over the gradient, in_axes handling, and the CUDA path under Numba's simulator.

The simulator is enabled by NUMBA_ENABLE_CUDASIM, which Numba reads once at import: the CUDA
checks run in a subprocess (scripts/gpu_check.py in quick mode, the same script that checks a
real GPU), which compares the CUDA batch with the CPU batch and with a loop over ``g``.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import coarsen
from coarsen import examples as ex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a module-level array read by a function: it enters the batch as a shared trailing argument
_WEIGHTS = np.array([0.5, -1.0, 2.0, 0.25])


def weighted_tanh(x, c):
    s = 0.0
    for i in range(_WEIGHTS.shape[0]):
        s += _WEIGHTS[i] * np.tanh(c * x[i])
    return s


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    old = os.environ.get("COARSEN_CACHE_DIR")
    path = tmp_path_factory.mktemp("coarsen_cache_batching")
    os.environ["COARSEN_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("COARSEN_CACHE_DIR", None)
    else:
        os.environ["COARSEN_CACHE_DIR"] = old


def loop(g, args, batched):
    size = next(len(a) for a, b in zip(args, batched) if b)
    res = [g.value_and_grad(*[a[i] if b else a for a, b in zip(args, batched)]) for i in range(size)]
    return np.array([v for v, _ in res]), [gr for _, gr in res]


@pytest.fixture(scope="module")
def g_logistic():
    return coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))


def test_cpu_scalar_batch_matches_loop_bit_for_bit(g_logistic):
    rng = np.random.default_rng(0)
    r = rng.uniform(2.5, 3.9, 40)
    n = rng.integers(3, 30, 40)
    bg = g_logistic.batch((0, None, 0))
    values, (gr, gx0) = bg(r, 0.3, n)
    ref_v, ref_g = loop(g_logistic, (r, 0.3, [int(k) for k in n]), (True, False, True))
    assert values.shape == (40,) and gr.shape == (40,) and isinstance(gx0, float)
    assert np.array_equal(values, ref_v)
    assert np.array_equal(gr, [a for a, _ in ref_g])
    # 40 <= 128 sets: one set per block, so the shared sum is the sequential sum, bit for bit
    total = 0.0
    for _, b in ref_g:
        total += b
    assert gx0 == total and gx0 != 0.0


def test_cpu_array_batch_shared_array_and_float32(g_logistic):
    g = coarsen.differentiate(ex.ridge_loss, wrt=("w", "lam"))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 6, 3))
    y = rng.normal(size=(25, 6))
    w = rng.normal(size=3).astype(np.float32)
    bg = g.batch((None, 0, 0, None))
    values, (gw, glam) = bg(w, X, y, 0.1)
    assert gw.dtype == np.float32 and gw.shape == (3,) and isinstance(glam, float)
    ref_v, ref_g = loop(g, (w, X, y, 0.1), (False, True, True, False))
    assert np.array_equal(values, ref_v)
    # g casts each set's float32 gradient; the batch sums in float64 then casts once
    w64 = w.astype(np.float64)
    exact = [coarsen.differentiate(ex.ridge_loss, wrt=("w", "lam"))(w64, X[i], y[i], 0.1) for i in range(25)]
    tot = np.zeros(3)
    for a, _ in exact:
        tot += a
    assert np.array_equal(gw, tot.astype(np.float32))
    assert glam == pytest.approx(sum(b for _, b in ref_g), rel=1e-14)


def test_per_set_array_gradients_and_single_wrt():
    g = coarsen.differentiate(ex.softplus_energy, wrt="x")
    X = np.random.default_rng(2).normal(size=(12, 7))
    bg = g.batch((0, None))
    values, gx = bg(X, 1.5)
    assert gx.shape == X.shape
    for i in range(12):
        v, gi = g.value_and_grad(X[i], 1.5)
        assert values[i] == v and np.array_equal(gx[i], gi)


def test_module_level_arrays_are_shared_arguments():
    g = coarsen.differentiate(weighted_tanh)
    X = np.random.default_rng(3).normal(size=(9, 4))
    values, (gx, gc) = g.batch((0, None))(X, 0.7)
    ref_v, ref_g = loop(g, (X, 0.7), (True, False))
    assert np.array_equal(values, ref_v)
    assert np.array_equal(gx, np.array([a for a, _ in ref_g]))
    assert gc == pytest.approx(sum(b for _, b in ref_g), rel=1e-14)


def test_python_target_and_in_axes_int(g_logistic):
    g = coarsen.differentiate(ex.black_scholes_call)
    rng = np.random.default_rng(4)
    args = tuple(rng.uniform(lo, hi, 10) for lo, hi in ((80, 120), (80, 120), (0.2, 2), (0.1, 0.5), (0, 0.05)))
    v_cpu, g_cpu = g.batch(0)(*args)
    v_py, g_py = g.batch((0,) * 5, target="python")(*args)
    ref_v, ref_g = loop(g, args, (True,) * 5)
    np.testing.assert_allclose(v_py, ref_v, rtol=1e-14)
    assert np.array_equal(v_cpu, ref_v)
    for j in range(5):
        assert np.array_equal(g_cpu[j], [gr[j] for gr in ref_g])
        np.testing.assert_allclose(g_py[j], g_cpu[j], rtol=1e-12)


def test_in_axes_and_argument_errors(g_logistic):
    with pytest.raises(coarsen.CoarsenError, match="in_axes has 2 entries"):
        g_logistic.batch((0, None))
    with pytest.raises(coarsen.CoarsenError, match="leading axis only"):
        g_logistic.batch((1, None, None))
    with pytest.raises(coarsen.CoarsenError, match="batches no parameter"):
        g_logistic.batch((None, None, None))
    with pytest.raises(coarsen.CoarsenError, match="unknown batch target"):
        g_logistic.batch((0, None, None), target="tpu")
    bg = g_logistic.batch((0, 0, None))
    with pytest.raises(coarsen.CoarsenError, match="different batch sizes"):
        bg(np.ones(3), np.ones(4), 5)
    with pytest.raises(coarsen.CoarsenError, match="not an array"):
        bg(3.0, np.ones(4), 5)
    with pytest.raises(coarsen.CoarsenError, match="empty"):
        bg(np.ones(0), np.ones(0), 5)


def test_cuda_target_refuses_array_functions_with_a_clear_error():
    g = coarsen.differentiate(ex.softplus_energy, wrt="x")
    bg = g.batch((0, None), target="cuda")
    with pytest.raises(coarsen.CoarsenError, match="scalar-only"):
        bg(np.ones((4, 3)), 1.0)
    g2 = coarsen.differentiate(weighted_tanh)
    with pytest.raises(coarsen.CoarsenError, match="module-level arrays"):
        g2.batch((0, None), target="cuda")(np.ones((4, 4)), 1.0)


def test_cuda_source_shape():
    """The generated CUDA module (text only: nothing runs) has the documented structure."""
    from coarsen.lowering import LoweringError, cuda_batch_source

    dev = "import math\n\n\ndef f(a, b, _ftape, _itape, _status):\n    return (a * b, (b, a), (0, 0))\n"
    src = cuda_batch_source("f", [("a", "float64"), ("b", "float64")], [True, False], wrt=["a", "b"],
                            device_source=dev, threads_per_block=64)
    assert "@cuda.jit(device=True)\ndef f(" in src
    assert "cuda.shared.array((1, 64), numba.float64)" in src
    assert src.count("cuda.atomic.add(") == 1
    assert "ftape[i:n_f * n_sets:n_sets]" in src  # interleaved (coalesced) tapes by default
    compile(src, "<cuda>", "exec")
    with pytest.raises(LoweringError, match="power of two"):
        cuda_batch_source("f", [("a", "float64")], [True], wrt=["a"], device_source=dev, threads_per_block=48)
    with pytest.raises(LoweringError, match="scalar parameters only"):
        cuda_batch_source("f", [("a", "float64[:]")], [True], wrt=["a"], device_source=dev)


def test_cuda_simulator_against_cpu_batch_and_loop(tmp_path, _cache_dir):
    """scripts/gpu_check.py in quick mode under NUMBA_ENABLE_CUDASIM=1: its checks compare the
    CUDA batch with the CPU batch and with a loop over g (values, per-set and shared gradients),
    force tape overflows (CPU reruns), several launches and both tape layouts."""
    out = tmp_path / "gpu_check.json"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", COARSEN_CACHE_DIR=str(_cache_dir))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu_check.py"), "--quick",
                           "--check-sets", "40", "--sizes", "32", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(out.read_text())
    assert res["simulator"] is True
    checks = res["checks"]
    assert len(checks) == 7 and all(c["pass"] for c in checks)
    for c in checks:
        if "err_vs_loop" in c:
            assert c["err_vs_loop"] <= 1e-12 and c["err_vs_cpu_batch"] <= 1e-12
            assert c["cpu_batch_equals_loop"]
    overflow = next(c for c in checks if "overflow" in c["check"])
    assert overflow["overflow_reruns"] >= 2 and overflow["launches"] >= 2
    assert {b["function"] for b in res["bench"]} == {"logistic map, 100 steps", "Black-Scholes call"}
    assert all(b["kernel_sets_per_s"] > 0 and b["overflow_reruns"] == 0 for b in res["bench"])
    assert "PASS: 7/7 checks" in proc.stdout
