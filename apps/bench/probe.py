"""The crash probe: run a gradient's first call in a fresh child process, so that a crash in
generated machine code (a segfault, an abort) is reported instead of ending the run.

Requires: a picklable job (a module-level function, a ``functools.partial`` of one, or a
:class:`GradientProbe`, which rebuilds a coarsen gradient in the child from the function, its
``wrt`` and options, and the arguments).  Guarantees:

* The child is started with the ``spawn`` multiprocessing context (:data:`START_METHOD`): a fresh
  interpreter, never ``fork()`` of the parent, so threads the parent has started (JAX's, XLA's)
  cannot deadlock it.  It inherits the environment, hence the same coarsen and Numba on-disk
  caches: the parent's first call after a probe loads what the child compiled.
* :func:`probe_crash` returns a message when the child died of a signal, and ``None`` when it
  finished, raised a Python exception (the parent's own call raises it again, with its message),
  or did not finish within ``timeout_s`` (inconclusive; the child is killed).  A child that
  could not start the job (``spawn`` re-imports the ``__main__`` module, which must be importable
  without side effects) is inconclusive too, with a ``RuntimeWarning``.
* A :class:`GradientProbe` with ``timings_path`` writes there, as JSON, how long its fresh
  process took from ``differentiate`` to the first gradient, split into coarsen's
  transformation and Numba's compilation (:func:`first_result_timings`), with whether each came
  from its on-disk cache: the harness's "transform and compile" numbers (Numba's one-time
  start-up in a process, its first compilation, is paid before the clock starts).
* Compatibility: a job that cannot be pickled (a lambda over a gradient object) still runs in a
  child created with ``os.fork`` where the platform has it, with a ``DeprecationWarning``; pass a
  :class:`GradientProbe` instead.  Without ``os.fork`` such a probe is inconclusive (``None``).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

PROBE_TIMEOUT_S = 600.0
#: how the probe's child process is started
START_METHOD = "spawn"


class Crashed(Exception):
    """The tool's first call killed the probe's child (e.g. a segfault): reported, not run."""


@dataclass(frozen=True)
class GradientProbe:
    """A picklable first call of ``coarsen.differentiate(fn, wrt, coarsen=coarse,
    boundscheck=boundscheck)`` at ``args``; ``fn`` must be importable (module level)."""

    fn: Callable
    wrt: tuple
    coarse: bool
    args: tuple
    boundscheck: bool = True
    plan: str = "auto"
    #: where to write the child's timings (JSON, see :func:`first_result_timings`); None: none
    timings_path: str | None = None

    def __call__(self):
        import time

        import coarsen

        if self.timings_path is not None:
            # Numba's one-time start-up (LLVM, its type registries) happens at the first
            # compilation in a process: paid here, so the times below are this gradient's
            import numba

            numba.njit(_numba_warmup)(1.0)
        t0 = time.perf_counter()
        g = coarsen.differentiate(self.fn, wrt=self.wrt, coarsen=self.coarse,
                                  boundscheck=self.boundscheck,
                                  **({} if self.plan == "auto" else {"plan": self.plan}))
        t1 = time.perf_counter()
        art = g.specialize(self.args) if hasattr(g, "specialize") else None
        t2 = time.perf_counter()
        out = g(*self.args)
        t3 = time.perf_counter()
        if self.timings_path is not None:
            g(*self.args)
            t4 = time.perf_counter()
            timings = first_result_timings(art, t1 - t0, t2 - t1, t3 - t2, t4 - t3)
            with open(self.timings_path, "w", encoding="utf-8") as f:
                json.dump(timings, f)
        return out


def _numba_warmup(x):
    return x + 1.0


def first_result_timings(art, differentiate_s, specialize_s, first_call_s, second_call_s):
    """The transformation and compilation times of a coarsen gradient's first result, as one
    JSON-able dict: ``differentiate_s`` (the fence), ``specialize_s`` (``g.specialize``: the
    pipeline up to the built module), ``first_call_s`` (Numba's compilation, or its cache load,
    plus one run) and ``second_call_s`` (one run); ``coarsen_transform_s`` is the artifact's
    ``transform_seconds`` (coarsen's own symbolic work and code generation, or its cache hit),
    ``first_result_s`` the time from ``differentiate`` to the first gradient, ``compile_s``
    the first call less the second (Numba's share); ``transform_cached`` whether coarsen's
    source came from its disk cache, ``compile_cached`` whether Numba loaded machine code from
    its cache (None when unknown)."""
    tr = getattr(art, "transform_seconds", None)
    return {
        "differentiate_s": differentiate_s, "specialize_s": specialize_s,
        "first_call_s": first_call_s, "second_call_s": second_call_s,
        "coarsen_transform_s": None if tr is None else float(tr),
        "first_result_s": differentiate_s + specialize_s + first_call_s,
        "compile_s": max(0.0, first_call_s - second_call_s),
        "transform_cached": getattr(art, "cached", None),
        # the entry the first calls ran: the taped one where the code tapes (api.PLAIN_AFTER)
        "compile_cached": numba_cache_hit(getattr(art, "taped_entry", None)
                                          or getattr(art, "entry", None)),
    }


def numba_cache_hit(entry):
    """True when Numba loaded ``entry`` (a dispatcher) from its on-disk cache, False when it
    compiled it, None when unknown (not a Numba dispatcher, or not called yet)."""
    stats = getattr(entry, "stats", None)
    if stats is None:
        return None
    hits = sum(getattr(stats, "cache_hits", {}).values())
    misses = sum(getattr(stats, "cache_misses", {}).values())
    if hits:
        return True
    return False if misses else None


def probe_context():
    """The multiprocessing context the probe starts its children with."""
    return multiprocessing.get_context(START_METHOD)


def picklable(job) -> bool:
    try:
        pickle.dumps(job)
    except Exception:
        return False
    return True


def probe_crash(job, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Run ``job()`` once in a child process; a message when the child died of a signal, else
    None (see the module docstring)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if picklable(job):
        return _probe_spawned(job, timeout_s)
    warnings.warn("probe_crash: the job cannot be pickled, so it runs in a forked child; pass a "
                  "picklable job such as apps.bench.GradientProbe", DeprecationWarning,
                  stacklevel=2)
    return _probe_forked(job, timeout_s)


def _child(job):
    """The child's body: no traceback dump (the parent reports), exit code 3 on an exception."""
    try:
        import faulthandler
        faulthandler.disable()
    except Exception:
        pass
    try:
        job()
    except BaseException:
        sys.exit(3)


def _probe_spawned(job, timeout_s):
    p = probe_context().Process(target=_child, args=(job,), name="coarsen-crash-probe",
                                daemon=True)
    p.start()
    p.join(timeout_s)
    if p.is_alive():
        p.kill()
        p.join()
        return None
    code = p.exitcode
    if code is not None and code < 0:
        return _signal_message(-code)
    if code not in (0, 3):  # 1: the child failed before the job ran (e.g. re-importing __main__)
        warnings.warn(f"crash probe inconclusive: its child exited with code {code} before "
                      f"running the job", RuntimeWarning, stacklevel=3)
    return None


def _probe_forked(job, timeout_s):
    """The compatibility path for unpicklable jobs (see the module docstring)."""
    if not hasattr(os, "fork"):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            _child(job)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 3
        except BaseException:
            code = 3
        os._exit(code)
    t_end = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > t_end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)
    return _signal_message(os.WTERMSIG(status)) if os.WIFSIGNALED(status) else None


def _signal_message(sig: int) -> str:
    try:
        name = signal.Signals(sig).name
    except (ValueError, AttributeError):
        name = str(sig)
    return f"crashed with {name} in the compiled gradient (probed in a child process)"
