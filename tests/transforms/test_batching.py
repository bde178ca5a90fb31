"""Batched gradients (coarsen.transforms.batching.cpu): CPU (numba prange) and plain-Python drivers against a
loop over the gradient, in_axes handling, and the CUDA path under Numba's simulator.

The simulator is enabled by NUMBA_ENABLE_CUDASIM, which Numba reads once at import: the CUDA
checks run in a subprocess (scripts/gpu_check.py in quick mode, the same script that checks a
real GPU), which compares the CUDA batch with the CPU batch and with a loop over ``g``.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import coarsen
from coarsen import examples as ex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def sq_dist(w, x, lam):
    s = 0.0
    for j in range(x.shape[0]):
        d = x[j] - w[j]
        s += d * d * math.exp(-lam * j)
    return s + lam * w[0] * w[0]


def test_cpu_array_batch_shared_array_and_float32():
    g = coarsen.differentiate(sq_dist, wrt=("w", "lam"))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 6))
    w = rng.normal(size=6).astype(np.float32)
    bg = g.batch((None, 0, None))
    values, (gw, glam) = bg(w, X, 0.1)
    assert gw.dtype == np.float32 and gw.shape == (6,) and isinstance(glam, float)
    ref_v, ref_g = loop(g, (w, X, 0.1), (False, True, False))
    assert np.array_equal(values, ref_v)
    # g casts each set's float32 gradient; the batch sums in float64 (one set per block, in
    # order) and casts once
    w64 = w.astype(np.float64)
    tot = np.zeros(6)
    for i in range(25):
        tot += g(w64, X[i], 0.1)[0]
    assert np.array_equal(gw, tot.astype(np.float32))
    total = 0.0
    for _, b in ref_g:
        total += b
    assert glam == total


def test_per_set_array_gradients_and_single_wrt():
    g = coarsen.differentiate(ex.softplus_energy, wrt="x")
    X = np.random.default_rng(2).normal(size=(12, 7))
    bg = g.batch((0, None), target="python")  # the prange driver's text in plain Python
    values, gx = bg(X, 1.5)
    assert gx.shape == X.shape
    for i in range(12):
        v, gi = g.value_and_grad(X[i], 1.5)
        assert values[i] == v and np.array_equal(gx[i], gi)


def test_module_level_arrays_are_shared_arguments():
    g = coarsen.differentiate(weighted_tanh)
    X = np.random.default_rng(3).normal(size=(9, 4))
    values, (gx, gc) = g.batch((0, None), target="python")(X, 0.7)
    ref_v, ref_g = loop(g, (X, 0.7), (True, False))
    assert np.array_equal(values, ref_v)
    assert np.array_equal(gx, np.array([a for a, _ in ref_g]))
    assert gc == pytest.approx(sum(b for _, b in ref_g), rel=1e-14)


def test_shared_scalar_reductions_cpu_and_python_targets():
    g = coarsen.differentiate(ex.black_scholes_call)
    rng = np.random.default_rng(4)
    s, sigma = rng.uniform(80, 120, 30), rng.uniform(0.1, 0.5, 30)
    args = (s, 100.0, 0.75, sigma, 0.03)
    in_axes = (0, None, None, 0, None)
    v_cpu, g_cpu = g.batch(in_axes)(*args)
    v_py, g_py = g.batch(in_axes, target="python")(*args)
    ref_v, ref_g = loop(g, args, [a == 0 for a in in_axes])
    assert np.array_equal(v_cpu, ref_v) and np.array_equal(v_py, ref_v)
    for j, ax in enumerate(in_axes):
        col = [gr[j] for gr in ref_g]
        if ax == 0:
            assert np.array_equal(g_cpu[j], col) and np.array_equal(g_py[j], col)
        else:
            total = 0.0
            for c in col:
                total += c
            assert g_cpu[j] == total and g_py[j] == total  # <= 128 sets: sequential order
    # a bare 0 batches every parameter
    all_axes = g.batch(0, target="python")
    assert all_axes.in_axes == (0,) * 5


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


def test_workspace_entry_is_nopython_typable_with_strided_tapes():
    """The device function is the workspace entry; Numba's CUDA and CPU targets share the typing
    front end, so compiling it with numba.njit and strided (interleaved-layout) tape views is a
    CPU-side proxy for the real-GPU compile that the simulator does not do."""
    import numba

    g = coarsen.differentiate(ex.newton_sqrt, wrt="a")
    types, sig = g.signature_of((2.0, 1e-9))
    ws = g.specialization(types, sig, workspace=True)
    dev = numba.njit(ws.entry)
    ftape = np.zeros(3 * 64)
    itape = np.zeros(3 * 64, dtype=np.int64)
    for a in (2.0, 50.0, 1e4):
        status = np.zeros(1, dtype=np.int64)
        v, gr, tape = dev(a, 1e-9, ftape[1::3], itape[1::3], status)
        rv, rg, rtape = g.specialization(types, sig).entry(a, 1e-9)
        assert status[0] == 0 and v == rv and gr == rg and tape == rtape
    status = np.zeros(1, dtype=np.int64)
    assert dev(1e4, 1e-9, ftape[:2], itape[:2], status)[0] == 0.0 and status[0] == 1


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
    assert len(checks) == 8 and all(c["pass"] for c in checks)
    for c in checks:
        if "err_vs_loop" in c:
            assert c["err_vs_loop"] <= 1e-12 and c["err_vs_cpu_batch"] <= 1e-12
            assert c["cpu_batch_equals_loop"]
    overflow = next(c for c in checks if "overflow" in c["check"])
    assert overflow["overflow_reruns"] >= 2 and overflow["launches"] >= 2
    assert {b["function"] for b in res["bench"]} == {"logistic map, 100 steps", "Black-Scholes call",
                                                     "logistic map, 100 steps, whole tape global"}
    # the default tapes the loop's stretches in local memory: 7 checkpoints a set, not 100 floats
    tape = {b["function"]: b["tape_floats_per_set"] for b in res["bench"]}
    assert tape["logistic map, 100 steps"] == 7 and tape["logistic map, 100 steps, whole tape global"] == 100
    assert checks[0]["local"].startswith("in local stretches: k = 16")
    assert all(b["kernel_sets_per_s"] > 0 and b["overflow_reruns"] == 0 for b in res["bench"])
    assert "PASS: 8/8 checks" in proc.stdout
