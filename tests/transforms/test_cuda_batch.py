"""The CUDA batch end to end (coarsen.transforms.batching.cuda + lowering.cuda_host): device arrays in and out,
the buffers kept across calls, ``last_timings``, the checks on device inputs, and loops in
stretches taped in thread-local memory (``bg.local_tape``: the CPU batch's bits per set,
checkpoints in the workspace, overflow reruns, ``bg.report()``).

Numba reads NUMBA_ENABLE_CUDASIM once, at import. Where this process has neither the simulator
nor a GPU, one test reruns this file in a subprocess with NUMBA_ENABLE_CUDASIM=1 (and the
others are skipped here); with the simulator (or a GPU) the tests run in this process. Every
test is skipped when numba.cuda cannot be imported. CuPy and PyTorch tests need a real GPU and
the package; they skip otherwise.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import coarsen
from coarsen import examples as ex
from coarsen.lowering.cuda_host import is_device_array

try:
    from numba import config as _config

    from coarsen.transforms.batching.cuda import import_numba_cuda
    cuda = import_numba_cuda()
except Exception as exc:  # numba-cuda missing or broken for this NumPy
    pytest.skip(f"numba.cuda cannot be imported: {exc}", allow_module_level=True)

SIM = bool(_config.ENABLE_CUDASIM)
IN_PROCESS = SIM or cuda.is_available()
in_process = pytest.mark.skipif(not IN_PROCESS, reason="runs in the simulator subprocess "
                                                       "(test_in_the_simulator)")

TIMING_KEYS = {"h2d", "kernel", "reduction", "d2h", "host", "tape_sample", "total", "launches",
               "allocations"}


@pytest.mark.skipif(IN_PROCESS, reason="the tests run in this process")
def test_in_the_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1",
               COARSEN_CACHE_DIR=os.environ.get("COARSEN_CACHE_DIR", str(tmp_path / "cache")))
    proc = subprocess.run([sys.executable, "-m", "pytest", os.path.abspath(__file__), "-o", "addopts=",
                           "-q", "-p", "no:cacheprovider"], capture_output=True, text=True, env=env,
                          timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "9 passed" in proc.stdout and "failed" not in proc.stdout, proc.stdout[-4000:]


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    old = os.environ.get("COARSEN_CACHE_DIR")
    if old is None:
        os.environ["COARSEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("coarsen_cache_cuda"))
    yield
    if old is None:
        os.environ.pop("COARSEN_CACHE_DIR", None)


@pytest.fixture(scope="module")
def g_log():
    return coarsen.differentiate(ex.logistic_map)                 # wrt r, x0; n an int


@pytest.fixture(scope="module")
def g_bs():
    return coarsen.differentiate(ex.black_scholes_call)          # 5 float parameters


def is_dev(x):
    return is_device_array(cuda, x)


def _host(x):
    return x.copy_to_host() if is_dev(x) else np.asarray(x)


def _log_args(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(2.5, 3.3, n), rng.uniform(0.1, 0.9, n)


def _bs_args(n, seed=1):
    rng = np.random.default_rng(seed)
    return rng.uniform(80, 120, n), 100.0, 0.75, rng.uniform(0.1, 0.5, n), 0.03


def _same_per_set(a, b):
    """Per-set results of the CUDA batch against the CPU batch's: the same bits in the
    simulator (it runs the kernel's Python); on a GPU to rounding, since NVVM contracts
    ``a * b + c`` into fused multiply-adds (an H200 gave up to 2.2e-12 relative after 100 steps
    of the logistic map, whose rounding errors grow at each step)."""
    a, b = np.asarray(a), np.asarray(b)
    if SIM:
        assert np.array_equal(a, b)
    else:
        assert a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=1e-300), np.max(np.abs(a - b))


def _same_shared(a, b):
    # shared sums are added with one atomic per block: equal to rounding, not bit for bit
    assert isinstance(a, float) and isinstance(b, float)
    assert abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


@in_process
def test_numba_device_arrays_in_give_device_arrays_out(g_log, g_bs):
    r, x0 = _log_args(40)
    bg = g_log.batch((0, 0, None), target="cuda")
    v, (dr, dx) = bg(r, x0, 20)
    assert isinstance(v, np.ndarray) and isinstance(dr, np.ndarray)
    vd, (drd, dxd) = bg(cuda.to_device(r), cuda.to_device(x0), 20)
    for out in (vd, drd, dxd):
        assert is_dev(out) and out.shape == (40,) and out.dtype == np.float64
        if not SIM:
            assert hasattr(out, "__cuda_array_interface__")
    # per-set outputs: the same kernel on the same numbers, bit for bit
    assert np.array_equal(_host(vd), v) and np.array_equal(_host(drd), dr)
    assert np.array_equal(_host(dxd), dx)
    # mixed: one host and one device input give device outputs
    vm, (drm, _) = bg(r, cuda.to_device(x0), 20)
    assert is_dev(vm) and np.array_equal(_host(vm), v)
    assert np.array_equal(_host(drm), dr)

    S, K, T, sigma, rate = _bs_args(40)
    bs = g_bs.batch((0, None, None, 0, None), target="cuda")
    v, grads = bs(S, K, T, sigma, rate)
    vd, gd = bs(cuda.to_device(S), cuda.to_device(np.array(K)), T, cuda.to_device(sigma), rate)
    assert np.array_equal(_host(vd), v)
    for j in (0, 3):                           # batched: device arrays
        assert is_dev(gd[j]) and np.array_equal(_host(gd[j]), grads[j])
    for j in (1, 2, 4):                        # shared: floats, as from host inputs
        _same_shared(gd[j], grads[j])
    ref_v, ref_g = g_bs.batch((0, None, None, 0, None), target="python")(S, K, T, sigma, rate)
    assert np.allclose(v, ref_v, rtol=1e-13, atol=0) and all(
        np.allclose(a, b, rtol=1e-12, atol=1e-300) for a, b in zip(grads, ref_g))


@in_process
def test_results_are_new_arrays_that_later_calls_leave_alone(g_log):
    r, x0 = _log_args(40)
    r2, x02 = _log_args(40, seed=5)
    bg = g_log.batch((0, 0, None), target="cuda")
    v, (dr, _) = bg(r, x0, 20)
    keep_v, keep_dr = v.copy(), dr.copy()
    vd, (drd, _) = bg(cuda.to_device(r), cuda.to_device(x0), 20)
    keep_vd = vd.copy_to_host()
    bg(r2, x02, 20)
    bg(cuda.to_device(r2), cuda.to_device(x02), 20)
    assert np.array_equal(v, keep_v) and np.array_equal(dr, keep_dr)
    assert np.array_equal(vd.copy_to_host(), keep_vd)
    bufs = bg.cuda_buffers()
    kept = list(bufs.device_arrays.values()) + list(bufs.pinned_arrays.values())
    for out in (v, dr):
        assert not any(np.shares_memory(out, k) for k in kept if isinstance(k, np.ndarray))
    assert all(vd is not k for k in kept)


@in_process
def test_buffers_are_kept_and_grow_only_when_needed(g_log):
    bg = g_log.batch((0, 0, None), target="cuda")
    assert bg.cuda_buffers() is None
    bg.tape_size = (25, 1)                     # the same workspace per set whatever the sample
    r, x0 = _log_args(64)
    bg(r, x0, 20)
    bufs = bg.cuda_buffers()
    assert bg.last_timings["allocations"] > 0 and bufs.allocations == bg.last_timings["allocations"]
    dev = dict(bufs.device_arrays)
    pin = dict(bufs.pinned_arrays)
    assert {name for name, _ in dev} >= {"ftape", "itape", "status", "acc", "values", "in0", "in1"}
    assert {name for name, _ in pin} >= {"in0", "in1", "res0", "acc"}
    for n in (64, 40, 64):                     # same or smaller: nothing new
        bg(r[:n], x0[:n], 20)
        assert bg.last_timings["allocations"] == 0
        assert bg.cuda_buffers() is bufs
        assert all(bufs.device_arrays[k] is a for k, a in dev.items())
        assert all(bufs.pinned_arrays[k] is a for k, a in pin.items())
    r, x0 = _log_args(100, seed=3)             # larger: the per-set buffers grow
    v, (dr, dx) = bg(r, x0, 20)
    assert bg.last_timings["allocations"] > 0
    for key in (("values", "<f8"), ("ftape", "<f8"), ("in0", "<f8")):
        assert bufs.device_arrays[key] is not dev[key] and bufs.device_arrays[key].shape[0] >= 100
    assert bufs.device_arrays[("acc", "<f8")] is dev[("acc", "<f8")]   # same size: kept
    ref = g_log.batch((0, 0, None), target="python")(r, x0, 20)
    assert np.array_equal(v, ref[0]) and np.allclose(dr, ref[1][0], rtol=1e-12, atol=1e-300)
    # device inputs use no input buffer and allocate nothing new once the rest is big enough
    bg(cuda.to_device(r), cuda.to_device(x0), 20)
    assert bg.last_timings["allocations"] == 0
    bg.release()
    assert bg.cuda_buffers() is None and not bufs.device_arrays and not bufs.pinned_arrays
    v2, _ = bg(r, x0, 20)
    assert bg.last_timings["allocations"] > 0 and np.array_equal(v2, v)


@in_process
def test_last_timings_keys_chunks_and_unpinned_staging(g_bs):
    S, K, T, sigma, rate = _bs_args(70)
    bg = g_bs.batch((0, None, None, 0, None), target="cuda")
    v, grads = bg(S, K, T, sigma, rate)
    t = bg.last_timings
    assert set(t) == TIMING_KEYS
    assert t["launches"] == 1
    assert all(t[k] >= 0 for k in TIMING_KEYS)
    assert t["total"] >= t["h2d"] + t["kernel"] + t["reduction"] + t["d2h"]
    bg.max_workspace_bytes = 8 * 2 * 32            # 32 sets per launch: 3 launches
    bg.tape_size = (1, 1)                          # Black-Scholes has no tape
    bg.pinned_staging = False
    v2, g2 = bg(S, K, T, sigma, rate)
    assert bg.last_timings["launches"] == 3 and set(bg.last_timings) == TIMING_KEYS
    assert np.array_equal(v2, v) and all(np.array_equal(g2[j], grads[j]) for j in (0, 3))
    for j in (1, 2, 4):
        _same_shared(g2[j], grads[j])
    bg.pinned_staging = True
    vd, gd = bg(cuda.to_device(S), K, T, cuda.to_device(sigma), rate)
    assert bg.last_timings["launches"] == 3 and bg.last_timings["d2h"] == 0.0
    assert np.array_equal(_host(vd), v)


@in_process
def test_overflow_reruns_write_into_device_outputs(g_log):
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    bg = g.batch((0, None, 0), target="cuda")
    rng = np.random.default_rng(2)
    r = rng.uniform(2.5, 3.3, 40)
    trips = rng.integers(5, 15, 40)
    trips[[3, 30]] = 40                        # too long for the workspace: rerun on the CPU
    bg.tape_size = (20, 1)
    bg.local_tape = None                       # the whole tape in the workspace (not stretches)
    v, (dr, dx0) = bg(r, 0.4, trips)
    assert sorted(bg.last_overflow.tolist()) == [3, 30]
    vd, (drd, dx0d) = bg(cuda.to_device(r), 0.4, cuda.to_device(trips))
    assert sorted(bg.last_overflow.tolist()) == [3, 30]
    assert is_dev(vd) and np.array_equal(_host(vd), v)
    assert np.array_equal(_host(drd), dr)
    _same_shared(dx0d, dx0)
    ref_v, (ref_dr, ref_dx0) = g.batch((0, None, 0), target="python")(r, 0.4, trips)
    assert np.array_equal(v, ref_v) and np.allclose(dr, ref_dr, rtol=1e-12, atol=1e-300)
    assert abs(dx0 - ref_dx0) <= 1e-12 * np.sum(np.abs(ref_dr)) + 1e-12


def _log_trips(seed=4):
    rng = np.random.default_rng(seed)
    trips = rng.integers(0, 40, 40)
    trips[:6] = (0, 1, 15, 16, 17, 33)         # around the stride of 16
    return rng.uniform(2.5, 3.3, 40), trips


@in_process
def test_local_stretch_tapes_match_the_cpu():
    # the default: stretches of 16 trips taped in cuda.local.array, checkpoints in the workspace
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    bg = g.batch((0, None, 0), target="cuda")
    r, trips = _log_trips()
    v, (dr, dx0) = bg(r, 0.4, trips)
    cv, (cdr, cdx0) = g.batch((0, None, 0), target="cpu")(r, 0.4, trips)
    _same_per_set(v, cv)                                           # the same trips' code
    _same_per_set(dr, cdr)
    _same_shared(dx0, cdx0)
    assert bg.last_tape_size == (2 * 3, 1) and bg.last_overflow.size == 0   # 3 checkpoints at 39 trips
    rep = bg.report(file=open(os.devnull, "w"))
    assert rep.local_tape == (16, 4) and "cuda.local.array" in rep.text
    ((line, how),) = rep.loops
    assert line == 15 and how.startswith("in local stretches: k = 16 trips a stretch")
    # off: the whole tape in the workspace, the same numbers
    bg.local_tape = None
    v2, (dr2, dx02) = bg(r, 0.4, trips)
    _same_per_set(v2, v)                     # another kernel: on a GPU, other contractions
    _same_per_set(dr2, dr)
    assert bg.last_tape_size[0] > 60
    assert "local stretch tapes: off" in bg.report(file=open(os.devnull, "w")).text
    # a workspace too small for the long sets' checkpoints: those rerun on the CPU
    bg.local_tape, bg.tape_size = "auto", (2, 1)
    v3, (dr3, dx03) = bg(r, 0.4, trips)
    assert sorted(bg.last_overflow.tolist()) == sorted(np.flatnonzero(trips > 32).tolist())
    _same_per_set(v3, v)                     # the long sets computed on the CPU
    _same_per_set(dr3, dr)
    _same_shared(dx03, dx0)
    bg.local_tape = (0, 4)
    with pytest.raises(coarsen.CoarsenError, match="local_tape"):
        bg(r, 0.4, trips)


@in_process
def test_local_stretch_tapes_pendulum_and_no_loop():
    g = coarsen.differentiate(ex.damped_pendulum)           # two floats of state, 2 shared
    bg = g.batch((0, 0, None, None, None), target="cuda")
    rng = np.random.default_rng(6)
    args = (rng.uniform(-1, 1, 33), rng.uniform(-1, 1, 33), 0.3, 0.05, 21)
    v, grads = bg(*args)
    cv, cgrads = g.batch((0, 0, None, None, None), target="cpu")(*args)
    _same_per_set(v, cv)
    for j in (0, 1):
        _same_per_set(grads[j], cgrads[j])
    for j in (2, 3):
        _same_shared(grads[j], cgrads[j])
    assert bg.report(file=open(os.devnull, "w")).local_tape == (16, 4)
    # Black-Scholes has no loop: the plain variant, and the report says so
    bs = coarsen.differentiate(ex.black_scholes_call).batch((0, None, None, 0, None), target="cuda")
    bs(*_bs_args(8))
    rep = bs.report(file=open(os.devnull, "w"))
    assert rep.local_tape is None and rep.loops == () and "not used" in rep.text


@in_process
def test_bad_device_inputs_raise_coarsen_errors(g_log):
    r, x0 = _log_args(40)
    bg = g_log.batch((0, 0, None), target="cuda")
    with pytest.raises(coarsen.CoarsenError, match="float32 device array") as info:
        bg(cuda.to_device(r.astype(np.float32)), x0, 20)
    assert "astype" in info.value.hint
    with pytest.raises(coarsen.CoarsenError, match="non-contiguous"):
        bg(cuda.to_device(np.repeat(r, 2))[::2], x0, 20)
    with pytest.raises(coarsen.CoarsenError, match="1-D"):
        bg(cuda.to_device(np.stack([r, r], axis=1)), x0, 20)
    with pytest.raises(coarsen.CoarsenError, match="different batch sizes"):
        bg(cuda.to_device(r[:30]), x0, 20)
    with pytest.raises(coarsen.CoarsenError, match="shared"):
        bg(r, x0, cuda.to_device(np.array([20, 20])))
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    bgi = g.batch((0, None, 0), target="cuda")
    with pytest.raises(coarsen.CoarsenError, match="int32 device array") as info:
        bgi(r, 0.4, cuda.to_device(np.full(40, 10, dtype=np.int32)))
    assert "int64" in info.value.hint
    # a 0-d shared device argument is read back and works like a host scalar
    v, _ = bg(r, x0, cuda.to_device(np.array(20)))
    assert np.array_equal(_host(v), bg(r, x0, 20)[0])


@in_process
@pytest.mark.skipif(SIM, reason="CuPy arrays need a real GPU")
def test_cupy_arrays_in(g_log):
    cp = pytest.importorskip("cupy")
    r, x0 = _log_args(4096)
    bg = g_log.batch((0, 0, None), target="cuda")
    v, (dr, dx) = bg(r, x0, 20)
    vd, (drd, dxd) = bg(cp.asarray(r), cp.asarray(x0), 20)
    assert is_dev(vd)
    assert np.array_equal(cp.asnumpy(cp.asarray(vd)), v) and np.array_equal(_host(drd), dr)
    with pytest.raises(coarsen.CoarsenError, match="float32"):
        bg(cp.asarray(r, dtype=cp.float32), x0, 20)


@in_process
@pytest.mark.skipif(SIM, reason="PyTorch CUDA tensors need a real GPU")
def test_torch_cuda_tensors_in(g_log):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    r, x0 = _log_args(4096)
    bg = g_log.batch((0, 0, None), target="cuda")
    v, (dr, _) = bg(r, x0, 20)
    vd, (drd, _) = bg(torch.from_numpy(r).cuda(), torch.from_numpy(x0).cuda(), 20)
    assert np.array_equal(_host(vd), v) and np.array_equal(_host(drd), dr)
    assert np.array_equal(torch.as_tensor(vd, device="cuda").cpu().numpy(), v)
    with pytest.raises(coarsen.CoarsenError, match="detach"):
        bg(torch.from_numpy(r).cuda().requires_grad_(), x0, 20)


@in_process
def test_gather_to_host_reads_the_sampled_sets():
    # the tape sample of device arrays: one gather, indices kept on the device between calls
    from coarsen.lowering.cuda_host import DeviceBuffers, gather_to_host
    a = np.arange(50, dtype=np.float64) * 1.5
    flags = np.arange(50) % 3 == 0
    d, dflags = cuda.to_device(a), cuda.to_device(flags)
    buf = DeviceBuffers(cuda)
    for idx in ([0, 1, 2, 49], [0, 1, 2, 49], [7, 7, 3], []):
        got = gather_to_host(cuda, d, idx, buf)
        assert got.dtype == a.dtype and np.array_equal(got, a[idx])
        assert np.array_equal(gather_to_host(cuda, dflags, idx, buf), flags[idx])
        assert np.array_equal(gather_to_host(cuda, d, idx), a[idx])
