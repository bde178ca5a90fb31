"""Where BLAS starts to beat coarsen's product loops: ``python -m apps.bench.blas_crossover``.

coarsen's float64 products (``coarsen.codegen.helpers._bmm22``/``_bmm21``/``_bmm12``/``_bmm11``)
run the loops of ``_mm*`` below a size and Numba's ``np.dot`` (BLAS through SciPy) at and above
it; the sizes written there were measured with this script.  For square sizes ``n`` it times,
compiled by Numba and called from Python as the generated code's helpers are, the loops and
``np.dot`` of a matrix product (also with a transposed operand), a matrix-vector product and a
dot product, as medians of interleaved batches, and prints the table and, per kind, the
smallest ``n`` from which BLAS is faster at every measured size.
"""
from __future__ import annotations

import sys
import time

import numba
import numpy as np


def _batch_time(fn, args, min_time=0.01):
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn(*args)
        dt = time.perf_counter() - t
        if dt >= min_time:
            return dt / n
        n *= 2


def _median_pair(loop, blas, args, samples=5):
    loop(*args), blas(*args)
    a, b = [], []
    for _ in range(samples):            # interleaved: the machine's noise hits both alike
        a.append(_batch_time(loop, args))
        b.append(_batch_time(blas, args))
    return float(np.median(a)), float(np.median(b))


def measure(sizes=(4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)):
    from coarsen.codegen import helpers as H

    dot = numba.njit(lambda a, b: np.dot(a, b))
    kinds = {
        "matrix @ matrix": (numba.njit(H._mm22), lambda n, r: (r.random((n, n)), r.random((n, n)))),
        "matrix @ matrix.T": (numba.njit(H._mm22), lambda n, r: (r.random((n, n)), r.random((n, n)).T)),
        "matrix @ vector": (numba.njit(H._mm21), lambda n, r: (r.random((n, n)), r.random(n))),
        "vector @ vector": (numba.njit(H._mm11), lambda n, r: (r.random(n), r.random(n))),
    }
    rows = []
    r = np.random.default_rng(0)
    for kind, (loop, make) in kinds.items():
        for n in sizes:
            t_loop, t_blas = _median_pair(loop, dot, make(n, r))
            rows.append((kind, n, t_loop, t_blas))
    return rows


def crossovers(rows):
    """kind -> the smallest n from which BLAS was faster at every larger measured n."""
    out = {}
    for kind in dict.fromkeys(k for k, *_ in rows):
        ns = [(n, tl, tb) for k, n, tl, tb in rows if k == kind]
        best = None
        for n, tl, tb in reversed(ns):
            if tb < tl:
                best = n
            else:
                break
        out[kind] = best
    return out


def main():
    rows = measure()
    print("| product | n | loops (us) | BLAS (us) |")
    print("| --- | --- | --- | --- |")
    for kind, n, tl, tb in rows:
        print(f"| {kind} | {n} | {tl * 1e6:.2f} | {tb * 1e6:.2f} |")
    for kind, n in crossovers(rows).items():
        print(f"{kind}: BLAS from n = {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
