"""Prepared GPU check for coarsen's CUDA batches: correctness, then throughput.

    python scripts/gpu_check.py                 # on a machine with a CUDA GPU (< 5 minutes)
    python scripts/gpu_check.py --sim           # Numba's simulator (NUMBA_ENABLE_CUDASIM=1), tiny sizes
    NUMBA_ENABLE_CUDASIM=1 python scripts/gpu_check.py --quick   # the same

1. Checks (the same comparisons as tests/transforms/test_batching.py): for scalar example functions
   (``coarsen.examples``: a logistic map, Black-Scholes, Newton's square root with a ``while``
   loop, a damped pendulum), ``g.batch(..., target="cuda")`` against the CPU batch (numba
   prange) and against a Python loop calling ``g`` once per set: values, per-set gradients and
   batch-summed gradients of shared parameters; the logistic map's loop in stretches taped in
   thread-local memory (the default, ``bg.local_tape = "auto"``; its report line in the
   "local stretches" column) and with the whole tape in the workspace (``local_tape=None``);
   plus forced tape overflows (recomputed on the CPU), a workspace split into several launches,
   both tape layouts, and ``on_overflow="raise"``;
   on a GPU (not in quick mode) also the pendulum and device arrays in and out (Numba device
   arrays: the same numbers as NumPy in and out, including CPU reruns).
2. Benchmark, for the logistic map (100 steps: local stretch tapes of 16 trips and 7 checkpoint
   floats per set in global memory, and, as "whole tape global", a tape of 100 floats per set)
   and Black-Scholes (no tape) over 10^5 and 10^6 sets: sets per second of the gradient kernel alone, end to end from
   NumPy arrays (copies and host work included), end to end on the device (Numba device arrays
   in and out), and of a hand-written CUDA primal kernel (the function alone, same inputs on the
   device); grad/primal ratios (kernel, and end to end on the device, over the primal kernel);
   the primal kernel's values against the batch's (part of the pass criterion); the CPU batch on
   this machine's cores; and where the end-to-end time goes (``bg.last_timings``). Bytes counted
   per set for GB/s: batched inputs read, value/gradients/status written, and the global tape
   written once and read once (8 bytes a word; the local tapes are not counted). Times are medians of ``--repeat`` runs after a warm-up
   call (which compiles).

Prints small tables; ``--json PATH`` also writes the results. Exit status 0 when every check
passes (and the primal agrees), 1 otherwise, 2 when there is no GPU (and no simulator).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _close(a, b, rtol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(b))
    err = np.abs(a - b) / np.maximum(scale, 1e-300)
    err = np.where(scale == 0, 0.0, err)
    return float(np.max(err)) if err.size else 0.0


def _loop_reference(g, args, batched):
    """Value and gradients per set from B calls of g; shared gradients summed in set order."""
    size = next(np.shape(a)[0] for a, b in zip(args, batched) if b)
    values, per = [], []
    for i in range(size):
        one = [a[i].item() if b else a for a, b in zip(args, batched)]
        v, gr = g.value_and_grad(*one)
        values.append(v)
        per.append(gr if isinstance(gr, tuple) else (gr,))
    return np.array(values), per


def _compare(name, g, bg_gpu, bg_cpu, args, rtol, extra=None):
    batched = bg_gpu.batched
    t0 = time.perf_counter()
    v_gpu, g_gpu = bg_gpu(*args)
    t_gpu = time.perf_counter() - t0
    v_cpu, g_cpu = bg_cpu(*args)
    v_ref, per = _loop_reference(g, args, batched)
    g_gpu = g_gpu if isinstance(g_gpu, tuple) else (g_gpu,)
    g_cpu = g_cpu if isinstance(g_cpu, tuple) else (g_cpu,)
    wrt = g.specialize([a[0].item() if b else a for a, b in zip(args, batched)]).wrt
    err_cpu = _close(v_gpu, v_cpu, rtol)
    err_ref = _close(v_gpu, v_ref, rtol)
    exact_cpu_loop = bool(np.array_equal(v_cpu, v_ref))
    for j, w in enumerate(wrt):
        k = g.params.index(w)
        ref_j = [p[j] for p in per]
        if batched[k]:
            ref = np.array(ref_j)
            exact_cpu_loop &= bool(np.array_equal(g_cpu[j], ref))
        else:
            ref = float(sum(ref_j))
            # a sum may cancel: measure its error against the sum of magnitudes
            scale = float(sum(abs(x) for x in ref_j)) or 1.0
            err_cpu = max(err_cpu, abs(g_gpu[j] - g_cpu[j]) / scale)
            err_ref = max(err_ref, abs(g_gpu[j] - ref) / scale)
            continue
        err_cpu = max(err_cpu, _close(g_gpu[j], g_cpu[j], rtol))
        err_ref = max(err_ref, _close(g_gpu[j], ref, rtol))
    row = {
        "check": name, "sets": int(np.shape(v_gpu)[0]), "err_vs_cpu_batch": err_cpu,
        "err_vs_loop": err_ref, "cpu_batch_equals_loop": exact_cpu_loop,
        "overflow_reruns": int(bg_gpu.last_overflow.size), "launches": int(bg_gpu.last_timings.get("launches", 0)),
        "tape_size": list(bg_gpu.last_tape_size or ()), "seconds": t_gpu,
    }
    row.update(extra or {})
    row["pass"] = bool(err_cpu <= rtol and err_ref <= rtol and exact_cpu_loop
                       and row.get("expect_overflow", 0) <= row["overflow_reruns"])
    return row


def run_checks(n, rtol, quick=False):
    import coarsen
    from coarsen import examples as ex

    rng = np.random.default_rng(7)
    rows = []

    def pair(g, in_axes):
        return g.batch(in_axes, target="cuda"), g.batch(in_axes, target="cpu")

    # logistic map, r and x0 per set, n shared; non-chaotic r so that rounding does not explode
    g = coarsen.differentiate(ex.logistic_map)
    gpu, cpu = pair(g, (0, 0, None))
    args = (rng.uniform(2.5, 3.3, n), rng.uniform(0.1, 0.9, n), 30)
    rows.append(_compare("logistic map (r, x0 per set)", g, gpu, cpu, args, rtol))
    rep = gpu.report(file=open(os.devnull, "w"))
    rows[-1]["pass"] &= rep.local_tape is not None      # stretches taped in local memory
    rows[-1]["local"] = rep.loops[0][1].split(",")[0] if rep.loops else "-"
    gpu.tape_layout = "contiguous"
    rows.append(_compare("  same, contiguous tape layout", g, gpu, cpu, args, rtol))
    gpu.tape_layout, gpu.local_tape = "interleaved", None
    rows.append(_compare("  same, whole tape in the workspace (local_tape=None)", g, gpu, cpu, args, rtol))

    # per-set trip counts, x0 shared; a workspace too small for the long sets: CPU reruns;
    # a workspace cap that forces several launches
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    gpu, cpu = pair(g, (0, None, 0))
    trips = rng.integers(5, 20, n)
    trips[n // 3] = 60
    trips[-1] = 45
    args = (rng.uniform(2.5, 3.3, n), 0.4, trips)
    rows.append(_compare("logistic map, per-set trips, local stretch tapes", g, gpu, cpu, args, rtol))
    gpu.local_tape = None                  # the whole tape in the workspace: overflows
    gpu.tape_size = (25, 1)
    gpu.max_workspace_bytes = 8 * 26 * max(1, n // 3)
    rows.append(_compare("logistic map, per-set trips, overflow + chunks", g, gpu, cpu, args, rtol,
                         {"expect_overflow": 2}))
    rows[-1]["pass"] &= rows[-1]["launches"] >= 2
    gpu.on_overflow = "raise"
    try:
        gpu(*args)
        raised = False
    except coarsen.CoarsenError:
        raised = True
    rows.append({"check": "  on_overflow='raise' raises CoarsenError", "sets": n, "pass": raised})

    # Black-Scholes: spot and volatility per set; strike, maturity and rate shared (reductions)
    g = coarsen.differentiate(ex.black_scholes_call)
    gpu, cpu = pair(g, (0, None, None, 0, None))
    args = (rng.uniform(80, 120, n), 100.0, 0.75, rng.uniform(0.1, 0.5, n), 0.03)
    rows.append(_compare("Black-Scholes (3 shared gradients)", g, gpu, cpu, args, rtol))

    # Newton's square root: a while loop, tape length depends on the argument
    g = coarsen.differentiate(ex.newton_sqrt, wrt="a")
    gpu, cpu = pair(g, (0, None))
    args = (rng.uniform(0.5, 1e4, n), 1e-9)
    rows.append(_compare("Newton sqrt (while loop, single wrt)", g, gpu, cpu, args, rtol))

    if quick:  # the simulator is slow and each CPU batch compiles: the rest only on a GPU
        return rows
    rows.append(_device_check(n, rtol))
    # damped pendulum: two coupled recurrences, damping and dt shared
    g = coarsen.differentiate(ex.damped_pendulum)
    gpu, cpu = pair(g, (0, 0, None, None, None))
    args = (rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), 0.3, 0.05, 25)
    rows.append(_compare("damped pendulum (2 shared gradients)", g, gpu, cpu, args, rtol))
    return rows


def _device_check(n, rtol):
    """Device arrays in and out (Numba's) against NumPy in and out: per-set values and gradients
    bit for bit, shared sums to rounding; with forced tape overflows (CPU reruns written into
    the device outputs)."""
    import coarsen
    from coarsen import examples as ex
    from coarsen.lowering.cuda_host import is_device_array
    from numba import config, cuda

    rng = np.random.default_rng(3)
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    bg = g.batch((0, None, 0), target="cuda")
    trips = rng.integers(5, 20, n)
    trips[n // 2] = 60
    r = rng.uniform(2.5, 3.3, n)
    bg.tape_size = (25, 1)
    bg.local_tape = None                   # the whole tape in the workspace: overflows
    v, (dr, dx0) = bg(r, 0.4, trips)
    reruns = int(bg.last_overflow.size)
    vd, (drd, dx0d) = bg(cuda.to_device(r), 0.4, cuda.to_device(trips))
    # the simulator's device arrays have no __cuda_array_interface__
    cai = bool(config.ENABLE_CUDASIM) or hasattr(vd, "__cuda_array_interface__")
    same = (is_device_array(cuda, vd) and cai
            and np.array_equal(vd.copy_to_host(), v) and np.array_equal(drd.copy_to_host(), dr))
    err = abs(dx0d - dx0) / max(1.0, float(np.sum(np.abs(dr))))
    bg.release()
    return {"check": "logistic map, device arrays in and out (+ reruns)", "sets": n,
            "err_vs_cpu_batch": err, "overflow_reruns": reruns,
            "pass": bool(same and err <= rtol and reruns >= 1 and int(bg.last_overflow.size) == reruns)}


def _median_time(fn, repeat):
    times, kernel = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        kernel.append(out)
    return statistics.median(times), kernel


#: numba.cuda, set by _primal_kernels (a module global, which the simulator swaps for its own)
cuda = None


def _logistic_primal(n_sets, r, x0, n, out):
    i = cuda.grid(1)
    if i < n_sets:
        x = x0[i]
        ri = r[i]
        for _ in range(n):
            x = ri * x * (1.0 - x)
        out[i] = x


def _black_scholes_primal(n_sets, s, k, t, sigma, rate, out):
    i = cuda.grid(1)
    if i < n_sets:
        si = s[i]
        vi = sigma[i]
        sq = math.sqrt(t)
        d1 = (math.log(si / k) + (rate + 0.5 * vi * vi) * t) / (vi * sq)
        d2 = d1 - vi * sq
        nd1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
        nd2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
        out[i] = si * nd1 - k * math.exp(-rate * t) * nd2


def _primal_kernels(cuda_module):
    """Hand-written CUDA primals (no gradient), one thread per set: the baseline of grad/primal.
    The same arithmetic as coarsen.examples, in the same order."""
    global cuda
    cuda = cuda_module
    return cuda.jit(_logistic_primal), cuda.jit(_black_scholes_primal)


def _stats(timings, key):
    return statistics.median(t[key] for t in timings)


def _jax_functions():
    """JAX's ``jit(vmap(value_and_grad))`` of the same two functions, in float64, shared
    parameters' gradients summed over the sets as the batch does; None when JAX (with a GPU) is
    missing. Run on JAX's default device (the GPU when jaxlib has CUDA)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax
        import jax.numpy as jnp
        from jax.scipy.special import erf
    except Exception as exc:                                   # noqa: BLE001 - reported, not fatal
        print(f"gpu_check: no JAX comparison ({type(exc).__name__}: {exc})")
        return None
    jax.config.update("jax_enable_x64", True)

    def logistic(r, x0, n):
        return jax.lax.fori_loop(0, n, lambda k, x: r * x * (1.0 - x), x0)

    def black_scholes(s, k, t, sigma, rate):
        sq = jnp.sqrt(t)
        d1 = (jnp.log(s / k) + (rate + 0.5 * sigma * sigma) * t) / (sigma * sq)
        d2 = d1 - sigma * sq
        nd1 = 0.5 * (1.0 + erf(d1 / jnp.sqrt(2.0)))
        nd2 = 0.5 * (1.0 + erf(d2 / jnp.sqrt(2.0)))
        return s * nd1 - k * jnp.exp(-rate * t) * nd2

    def logistic_batch(r, x0, n):
        return jax.vmap(jax.value_and_grad(logistic, argnums=(0, 1)), (0, 0, None))(r, x0, n)

    def bs_batch(s, k, t, sigma, rate):
        v, (gs, gk, gt, gv, gr) = jax.vmap(jax.value_and_grad(black_scholes, argnums=(0, 1, 2, 3, 4)),
                                           (0, None, None, 0, None))(s, k, t, sigma, rate)
        return v, (gs, gk.sum(), gt.sum(), gv, gr.sum())

    device = jax.devices()[0]
    return {"logistic": jax.jit(logistic_batch, static_argnums=2), "bs": jax.jit(bs_batch),
            "put": lambda a: jax.device_put(a, device), "platform": device.platform,
            "ready": jax.block_until_ready}


def _time_jax(jx, key, args, batched, repeat):
    """JAX's median seconds per call on inputs already on its device, and its values."""
    put = [jx["put"](a) if b else a for a, b in zip(args, batched)]
    fn = jx[key]
    out = jx["ready"](fn(*put))                                # warm: compiles
    t, _ = _median_time(lambda: jx["ready"](fn(*put)), repeat)
    return t, np.asarray(out[0])


def run_bench(sizes, repeat, with_cpu=True, with_jax=False):
    """Per function and size: the gradient batch's kernel time, its end-to-end time from NumPy
    arrays (copies included) and from device arrays (results left on the device), a
    hand-written CUDA primal kernel's time on the same device inputs, and the CPU batch."""
    import coarsen
    from coarsen import examples as ex
    from numba import config, cuda

    rng = np.random.default_rng(11)
    jx = _jax_functions() if with_jax else None
    logistic_primal, bs_primal = _primal_kernels(cuda)
    tpb = 32 if config.ENABLE_CUDASIM else 128
    cases = []
    g = coarsen.differentiate(ex.logistic_map)
    steps = 100
    for local, label in (("auto", ""), (None, ", whole tape global")):
        cases.append((f"logistic map, 100 steps{label}", g, (0, 0, None),
                      lambda B: (rng.uniform(2.5, 3.3, B), rng.uniform(0.1, 0.9, B), steps),
                      lambda B, d, out: logistic_primal[(B + tpb - 1) // tpb, tpb](B, d[0], d[1], steps, out),
                      local))
    g = coarsen.differentiate(ex.black_scholes_call)
    # an option chain: spot and volatility per set; strike, maturity and rate shared
    cases.append(("Black-Scholes call", g, (0, None, None, 0, None),
                  lambda B: (rng.uniform(80, 120, B), 100.0, 0.75, rng.uniform(0.1, 0.5, B), 0.03),
                  lambda B, d, out: bs_primal[(B + tpb - 1) // tpb, tpb](B, d[0], 100.0, 0.75, d[3], 0.03,
                                                                          out), "auto"))
    rows = []
    for name, g, in_axes, make, primal, local in cases:
        gpu = g.batch(in_axes, target="cuda")
        gpu.local_tape = local
        cpu = g.batch(in_axes, target="cpu")
        if not config.ENABLE_CUDASIM:
            gpu.max_workspace_bytes = 16 << 30
        warm = make(64)
        gpu(*warm)
        cpu(*warm)
        one = [a[0].item() if b else a for a, b in zip(warm, gpu.batched)]
        # the global tape words a set writes (and reads), as the batch's own sample measured
        tape_floats = int(gpu.last_tape_sample[0])
        rep = gpu.report(file=open(os.devnull, "w"))
        local_note = rep.loops[0][1].split(",")[0] if rep.local_tape else "-"
        n_in = sum(gpu.batched)
        n_out = 1 + sum(1 for w in g.specialize(one).wrt if gpu.batched[g.params.index(w)])
        for B in sizes:
            args = make(B)
            dev = [cuda.to_device(a) if b else a for a, b in zip(args, gpu.batched)]

            def go():
                gpu(*args)
                return dict(gpu.last_timings)
            total, tims = _median_time(go, repeat)
            kern = _stats(tims, "kernel")

            def go_dev():
                gpu(*dev)
                return dict(gpu.last_timings)
            gpu(*dev)                                         # warm: device outputs
            total_dev, tims_dev = _median_time(go_dev, repeat)
            values_dev = gpu(*dev)[0].copy_to_host()

            out = cuda.device_array(B, dtype=np.float64)
            primal(B, dev, out)                               # warm: compiles
            cuda.synchronize()

            def go_primal():
                primal(B, dev, out)
                cuda.synchronize()
            primal_s, _ = _median_time(go_primal, repeat)
            primal_err = _close(out.copy_to_host(), values_dev, 1e-9)
            bytes_per_set = 8 * n_in + 8 * n_out + 8 + 2 * 8 * tape_floats
            row = {"function": name, "sets": B, "tape_floats_per_set": tape_floats,
                   "local": local_note,
                   "kernel_s": kern, "total_s": total, "total_device_s": total_dev,
                   "primal_kernel_s": primal_s,
                   "kernel_sets_per_s": B / kern, "total_sets_per_s": B / total,
                   "total_device_sets_per_s": B / total_dev, "primal_sets_per_s": B / primal_s,
                   "grad_over_primal_kernel": kern / primal_s,
                   "grad_over_primal_device": total_dev / primal_s,
                   "primal_err": primal_err,
                   "kernel_GB_per_s": B * bytes_per_set / kern / 1e9,
                   "overflow_reruns": int(gpu.last_overflow.size),
                   "host_timings": {k: _stats(tims, k) for k in ("h2d", "kernel", "reduction", "d2h",
                                                                 "host", "total")},
                   "device_timings": {k: _stats(tims_dev, k) for k in ("h2d", "kernel", "reduction",
                                                                       "d2h", "host", "total")}}
            key = "logistic" if name.startswith("logistic") else "bs"
            if jx is not None:
                jax_s, jax_values = _time_jax(jx, key, args, gpu.batched, repeat)
                row["jax_s"] = jax_s
                row["jax_sets_per_s"] = B / jax_s
                row["jax_over_coarsen_device"] = jax_s / total_dev
                row["jax_vs_values"] = _close(jax_values, values_dev, 1e-9)
                row["jax_platform"] = jx["platform"]
            if with_cpu:
                cpu_t, _ = _median_time(lambda: cpu(*args), repeat)
                row["cpu_batch_s"] = cpu_t
                row["cpu_sets_per_s"] = B / cpu_t
            rows.append(row)
        gpu.release()
    return rows


def _profile_calls(n_sets, repeat):
    """The host-side functions of on-device Black-Scholes calls, by own time (cProfile)."""
    import cProfile
    import io
    import pstats

    import coarsen
    from coarsen import examples as ex
    from numba import cuda

    rng = np.random.default_rng(5)
    bg = coarsen.differentiate(ex.black_scholes_call).batch((0, None, None, 0, None), target="cuda")
    args = [cuda.to_device(rng.uniform(80, 120, n_sets)), 100.0, 0.75,
            cuda.to_device(rng.uniform(0.1, 0.5, n_sets)), 0.03]
    bg(*args)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(max(repeat, 5)):
        bg(*args)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    print()
    print(f"profile of {max(repeat, 5)} on-device Black-Scholes calls, {n_sets} sets "
          f"(last call: {bg.last_timings}):")
    print(out.getvalue())
    bg.release()


def _fmt(v):
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def _table(rows, cols):
    head = [c for c, _ in cols]
    body = [[_fmt(r.get(k, "")) for _, k in cols] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the simulator's default)")
    ap.add_argument("--sim", action="store_true",
                    help="run in Numba's CUDA simulator (sets NUMBA_ENABLE_CUDASIM=1; implies --quick)")
    ap.add_argument("--check-sets", type=int, default=None)
    ap.add_argument("--sizes", default=None, help="benchmark sizes, comma-separated (e.g. 100000,1000000)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--profile", action="store_true",
                    help="profile (cProfile) on-device calls of the Black-Scholes batch: where the host time goes")
    ap.add_argument("--jax", action="store_true",
                    help="also time JAX's jit(vmap(value_and_grad)) of the same functions on its device")
    args = ap.parse_args(argv)
    if args.sim:
        if "numba" in sys.modules and not sys.modules["numba"].config.ENABLE_CUDASIM:
            print("gpu_check: --sim must be given before numba is imported")
            return 2
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

    import numba
    from numba import config, cuda

    sim = bool(config.ENABLE_CUDASIM)
    if not sim and not cuda.is_available():
        print("gpu_check: no CUDA GPU available (set NUMBA_ENABLE_CUDASIM=1 for the simulator)")
        return 2
    quick = args.quick or sim
    n_check = args.check_sets or (48 if quick else 4096)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else ([64] if quick else [100_000, 1_000_000])
    repeat = args.repeat or (1 if quick else 5)
    device = "CUDA simulator" if sim else cuda.get_current_device().name
    if isinstance(device, bytes):
        device = device.decode()
    print(f"coarsen gpu_check: device {device}; numba {numba.__version__}; "
          f"{'quick' if quick else 'full'} sizes")
    t0 = time.perf_counter()
    rtol = 1e-9
    checks = run_checks(n_check, rtol, quick)
    print()
    print(f"checks (CUDA batch vs CPU batch and vs a loop over g; tolerance {rtol:g}):")
    print(_table(checks, [("check", "check"), ("sets", "sets"), ("vs CPU batch", "err_vs_cpu_batch"),
                          ("vs loop", "err_vs_loop"), ("CPU batch == loop", "cpu_batch_equals_loop"),
                          ("CPU reruns", "overflow_reruns"), ("launches", "launches"),
                          ("local stretches", "local"), ("pass", "pass")]))
    bench = []
    if not args.no_bench:
        bench = run_bench(sizes, repeat, with_jax=args.jax)
        print()
        print("throughput (sets/s, medians; kernel: the gradient kernel alone; from host: NumPy in and out, "
              "copies included; on device: device arrays in and out; primal: a hand-written CUDA kernel "
              "of the function alone):")
        print(_table(bench, [("function", "function"), ("sets", "sets"), ("global tape/set", "tape_floats_per_set"),
                             ("kernel", "kernel_sets_per_s"), ("kernel GB/s", "kernel_GB_per_s"),
                             ("from host", "total_sets_per_s"), ("on device", "total_device_sets_per_s"),
                             ("primal", "primal_sets_per_s"), ("grad/primal kernel", "grad_over_primal_kernel"),
                             ("grad/primal on device", "grad_over_primal_device"),
                             ("primal vs values", "primal_err"), ("CPU batch", "cpu_sets_per_s"),
                             ("local stretches", "local")]))
        if args.jax and any("jax_s" in b for b in bench):
            print()
            print("JAX jit(vmap(value_and_grad)) on its device, inputs already there (sets/s, medians); "
                  "JAX time / coarsen on-device time (above 1: coarsen is faster):")
            print(_table(bench, [("function", "function"), ("sets", "sets"), ("JAX device", "jax_platform"),
                                 ("JAX", "jax_sets_per_s"), ("coarsen on device", "total_device_sets_per_s"),
                                 ("coarsen kernel", "kernel_sets_per_s"),
                                 ("JAX / coarsen", "jax_over_coarsen_device"),
                                 ("JAX vs values", "jax_vs_values")]))
        print()
        print("end to end from host, where the time goes (ms, medians of bg.last_timings):")
        ms = [{"function": b["function"], "sets": b["sets"],
               **{k: 1e3 * v for k, v in b["host_timings"].items()}} for b in bench]
        print(_table(ms, [("function", "function"), ("sets", "sets"), ("h2d", "h2d"), ("kernel", "kernel"),
                          ("reduction", "reduction"), ("d2h", "d2h"), ("host", "host"), ("total", "total")]))
    if args.profile:
        _profile_calls(sizes[-1], repeat)
    ok_checks = all(r["pass"] for r in checks)
    ok_primal = all(b["primal_err"] <= rtol for b in bench)
    ok = ok_checks and ok_primal
    print()
    print(f"{'PASS' if ok else 'FAIL'}: {sum(r['pass'] for r in checks)}/{len(checks)} checks"
          f"{'' if ok_primal else '; the hand-written primal disagrees with the batch values'}; "
          f"{time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": device, "simulator": sim, "checks": checks, "bench": bench}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
