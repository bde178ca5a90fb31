"""Prepared GPU check for coarsen's CUDA batches: correctness, then throughput.

    python scripts/gpu_check.py                 # on a machine with a CUDA GPU (< 5 minutes)
    NUMBA_ENABLE_CUDASIM=1 python scripts/gpu_check.py --quick   # Numba's simulator, tiny sizes

1. Checks (the same comparisons as tests/test_batching.py): for scalar example functions
   (``coarsen.examples``: a logistic map, Black-Scholes, Newton's square root with a ``while``
   loop, a damped pendulum), ``g.batch(..., target="cuda")`` against the CPU batch (numba
   prange) and against a Python loop calling ``g`` once per set: values, per-set gradients and
   batch-summed gradients of shared parameters; plus forced tape overflows (recomputed on the
   CPU), a workspace split into several launches, both tape layouts, and ``on_overflow="raise"``.
2. Benchmark: sets per second and achieved memory bandwidth of the CUDA kernel (and end to end,
   with the copies) for the logistic map (100 steps, tape of 100 floats per set) and
   Black-Scholes (no tape) over 10^5 and 10^6 sets, next to the CPU batch on this machine's
   cores. Bytes counted per set: batched inputs read, value/gradients/status written, and the
   tape written once and read once (8 bytes a word). Times are medians of ``--repeat`` runs after
   a warm-up call (which compiles).

Prints two small tables; ``--json PATH`` also writes the results. Exit status 0 when every check
passes, 1 otherwise, 2 when there is no GPU (and no simulator).
"""
from __future__ import annotations

import argparse
import json
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
    gpu.tape_layout = "contiguous"
    rows.append(_compare("  same, contiguous tape layout", g, gpu, cpu, args, rtol))

    # per-set trip counts, x0 shared; a workspace too small for the long sets: CPU reruns;
    # a workspace cap that forces several launches
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"))
    gpu, cpu = pair(g, (0, None, 0))
    trips = rng.integers(5, 20, n)
    trips[n // 3] = 60
    trips[-1] = 45
    args = (rng.uniform(2.5, 3.3, n), 0.4, trips)
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

    if quick:  # the simulator is slow and each CPU batch compiles: the pendulum only on a GPU
        return rows
    # damped pendulum: two coupled recurrences, damping and dt shared
    g = coarsen.differentiate(ex.damped_pendulum)
    gpu, cpu = pair(g, (0, 0, None, None, None))
    args = (rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), 0.3, 0.05, 25)
    rows.append(_compare("damped pendulum (2 shared gradients)", g, gpu, cpu, args, rtol))
    return rows


def _median_time(fn, repeat):
    times, kernel = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        kernel.append(out)
    return statistics.median(times), kernel


def run_bench(sizes, repeat, with_cpu=True):
    import coarsen
    from coarsen import examples as ex
    from numba import config

    rng = np.random.default_rng(11)
    cases = []
    g = coarsen.differentiate(ex.logistic_map)
    steps = 100
    cases.append(("logistic map, 100 steps", g, (0, 0, None),
                  lambda B: (rng.uniform(2.5, 3.3, B), rng.uniform(0.1, 0.9, B), steps)))
    g = coarsen.differentiate(ex.black_scholes_call)
    # an option chain: spot and volatility per set; strike, maturity and rate shared
    cases.append(("Black-Scholes call", g, (0, None, None, 0, None),
                  lambda B: (rng.uniform(80, 120, B), 100.0, 0.75, rng.uniform(0.1, 0.5, B), 0.03)))
    rows = []
    for name, g, in_axes, make in cases:
        gpu = g.batch(in_axes, target="cuda")
        cpu = g.batch(in_axes, target="cpu")
        if not config.ENABLE_CUDASIM:
            gpu.max_workspace_bytes = 16 << 30
        warm = make(64)
        gpu(*warm)
        cpu(*warm)
        one = [a[0].item() if b else a for a, b in zip(warm, gpu.batched)]
        tape_floats = int(g.specialize(one).entry(*one)[2][0])
        n_in = sum(gpu.batched)
        n_out = 1 + sum(1 for w in g.specialize(one).wrt if gpu.batched[g.params.index(w)])
        for B in sizes:
            args = make(B)

            def go():
                gpu(*args)
                return dict(gpu.last_timings)
            total, tims = _median_time(go, repeat)
            kern = statistics.median(t["kernel"] for t in tims)
            bytes_per_set = 8 * n_in + 8 * n_out + 8 + 2 * 8 * tape_floats
            row = {"function": name, "sets": B, "tape_floats_per_set": tape_floats,
                   "kernel_s": kern, "total_s": total,
                   "kernel_sets_per_s": B / kern, "total_sets_per_s": B / total,
                   "kernel_GB_per_s": B * bytes_per_set / kern / 1e9,
                   "overflow_reruns": int(gpu.last_overflow.size)}
            if with_cpu:
                cpu_t, _ = _median_time(lambda: cpu(*args), repeat)
                row["cpu_batch_s"] = cpu_t
                row["cpu_sets_per_s"] = B / cpu_t
            rows.append(row)
    return rows


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
    ap.add_argument("--check-sets", type=int, default=None)
    ap.add_argument("--sizes", default=None, help="benchmark sizes, comma-separated (e.g. 100000,1000000)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)

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
                          ("pass", "pass")]))
    bench = []
    if not args.no_bench:
        bench = run_bench(sizes, repeat)
        print()
        print("throughput (kernel: kernel time only; end to end: with copies and host work; medians):")
        print(_table(bench, [("function", "function"), ("sets", "sets"), ("tape/set", "tape_floats_per_set"),
                             ("kernel sets/s", "kernel_sets_per_s"), ("kernel GB/s", "kernel_GB_per_s"),
                             ("end-to-end sets/s", "total_sets_per_s"), ("CPU batch sets/s", "cpu_sets_per_s")]))
    ok = all(r["pass"] for r in checks)
    print()
    print(f"{'PASS' if ok else 'FAIL'}: {sum(r['pass'] for r in checks)}/{len(checks)} checks; "
          f"{time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": device, "simulator": sim, "checks": checks, "bench": bench}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
