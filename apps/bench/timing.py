"""Timing and memory primitives of the harness.

Requires zero-argument callables.  Guarantees:

* :func:`calibrate` doubles the repeat count until one batch takes at least ``min_time`` seconds
  (capped at 2**24 repeats) and returns ``(reps, seconds per call)``.  A batch that reached
  ``min_time`` is timed again, and where the second run takes less than half of it (the first
  held one-time work: coarsen compiles a kind's faster entries at its 64th call), doubling
  goes on; so the samples are never batches of a few cold calls.
* :func:`interleaved` takes samples round-robin across the callables, the starting one rotating
  every round, so machine noise hits all of them alike; it stops after ``samples`` rounds, or
  after at least three rounds once ``budget_s`` has passed.
* :func:`peak_memory` is the tracemalloc peak (bytes above the level before the call) of one
  call: everything allocated through Python's allocators, including NumPy arrays and Numba's
  runtime (NRT allocates through the CPython allocator); JAX and PyTorch allocate outside it.
"""
from __future__ import annotations

import gc
import time
import tracemalloc


def _batch(fn, reps):
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return time.perf_counter() - t0


def calibrate(fn, min_time):
    reps = 1
    while True:
        dt = _batch(fn, reps)
        if dt >= min_time and reps < 1 << 24:
            again = _batch(fn, reps)        # one-time work (a compilation) inflated the first?
            if again < dt / 2:
                dt = again
        if dt >= min_time or reps >= 1 << 24:
            return reps, dt / reps
        reps *= 2


def peak_memory(fn):
    """Peak bytes traced by tracemalloc during one call."""
    gc.collect()
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    if not was:
        tracemalloc.stop()
    return max(0, peak - base)


def interleaved(fns: dict, reps: dict, samples: int, budget_s: float):
    """Round-robin samples; returns {name: [seconds per call, ...]}."""
    names = list(fns)
    times = {n: [] for n in names}
    t_start = time.perf_counter()
    for k in range(samples):
        order = names[k % len(names):] + names[:k % len(names)]
        for n in order:
            fn, r = fns[n], reps[n]
            t0 = time.perf_counter()
            for _ in range(r):
                fn()
            times[n].append((time.perf_counter() - t0) / r)
        if k >= 2 and time.perf_counter() - t_start > budget_s:
            break
    return times
