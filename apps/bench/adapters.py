"""Tool adapters: one zero-argument callable per (tool, app, inputs), and its untimed first call.

Requires an app module with the interface of :mod:`apps` (``objective``, ``WRT``,
``primal_numba``, ``handwritten_grad``, ``jax_objective``, ``xp_objective``).  Guarantees:

* ``primal`` is ``numba.njit(objective)``; ``handwritten`` the hand-derived gradient; ``coarsen`` /
  ``coarsen_fine`` are ``coarsen.differentiate(objective, wrt=WRT, coarsen=True/False)``,
  transformed once per (app, mode) with the transformation time recorded once; ``jax`` is
  ``jit(grad)`` of the app's JAX version in float64; ``autograd`` and ``torch`` (eager, through
  :class:`apps._xp.TorchNS`) differentiate ``xp_objective``; ``tangent`` differentiates the loop
  ``objective``, like coarsen.
* A peer whose import fails raises :class:`~apps.bench.tools.Missing`; tangent-ad's refusal of
  an app raises :class:`~apps.bench.tools.Unsupported`.
* :func:`prepare` makes the first and second calls (recorded in ``info`` as preparation, apart
  from the timed samples) and keeps the gradient for the correctness check; coarsen's gradients
  make their first call in a crash probe first (:func:`apps.bench.probe.probe_crash`), raising
  :class:`~apps.bench.probe.Crashed` when it died of a signal.
* For coarsen's tools ``info`` also holds the transform and compile times of the first result,
  measured in the probe's fresh process (``compile_measured_in: "probe"``; in this process,
  ``"parent"``, when the probe wrote none): ``coarsen_transform_s`` (the artifact's
  ``transform_seconds``: symbolic work and code generation), ``first_result_s`` (from
  ``differentiate`` to the first gradient), ``compile_s`` (first call less second: Numba's
  compilation), and ``transform_cached`` / ``compile_cached`` (whether coarsen's source / Numba's
  machine code came from the on-disk caches; None when unknown).
"""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from apps.bench.probe import Crashed, GradientProbe, probe_crash
from apps.bench.tools import (CRASH_GUARDED, STRATEGY_TOOLS, Missing, TooSlow, Unsupported,
                              first_line)


def wrt_positions(fn, wrt):
    names = list(inspect.signature(fn).parameters)
    return [names.index(w) for w in wrt]


@dataclass
class _Transformed:
    grad: object
    transform_s: float


#: (app module name, fine) -> the coarsen gradient and its transformation time
_coarsen_cache: dict[tuple[str, bool], _Transformed] = {}


def _coarsen_prepare(mod, args, fine, plan="auto"):
    """coarsen.differentiate once per (app, mode, plan); the transformation time is recorded once."""
    try:
        import coarsen
        differentiate = coarsen.differentiate
    except (ImportError, AttributeError) as e:
        raise Missing(f"coarsen.differentiate unavailable ({e})") from None
    key = (mod.__name__, fine, plan)
    info = {}
    if key not in _coarsen_cache:
        t0 = time.perf_counter()
        g = differentiate(mod.objective, wrt=tuple(mod.WRT), coarsen=not fine,
                          **({} if plan == "auto" else {"plan": plan}))
        t_fence = time.perf_counter() - t0
        # g.source_for specializes (SSA, analyses, AD, printing) without calling Numba, so the
        # first call below measures Numba's compilation (plus one run) on its own
        t0 = time.perf_counter()
        if hasattr(g, "source_for"):
            g.source_for(*args)
        _coarsen_cache[key] = _Transformed(g, t_fence + time.perf_counter() - t0)
        info["transform_s"] = _coarsen_cache[key].transform_s
    else:
        info["transform_s_cached"] = _coarsen_cache[key].transform_s
    g = _coarsen_cache[key].grad
    # the artifact of this signature: coarsen's own transformation time and whether its source
    # came from the disk cache (the gradient keeps it, so this is free after source_for)
    art = g.specialize(args) if hasattr(g, "specialize") else None
    tr = getattr(art, "transform_seconds", None)
    if tr is not None:
        info["coarsen_transform_s"] = float(tr)
        info["transform_cached"] = getattr(art, "cached", None)
    return (lambda: g(*args)), info, g


def jax_grad_fn(mod, args):
    """``jax.jit(jax.grad(jax_objective))`` w.r.t. ``WRT``; the non-differentiated Python
    scalars are static arguments.  Returns a zero-argument callable that blocks on the result."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Missing(f"jax not installed ({e})") from None
    jax.config.update("jax_enable_x64", True)
    wpos = wrt_positions(mod.objective, mod.WRT)
    static = tuple(i for i, a in enumerate(args)
                   if i not in wpos and np.ndim(a) == 0 and not isinstance(a, np.ndarray))
    jargs = tuple(a if i in static else jnp.asarray(a, dtype=jnp.float64 if i in wpos else None)
                  for i, a in enumerate(args))
    gf = jax.jit(jax.grad(mod.jax_objective, argnums=tuple(wpos)), static_argnums=static)
    return lambda: jax.block_until_ready(gf(*jargs))


def autograd_fn(mod, args):
    try:
        import autograd
        import autograd.numpy as anp
    except ImportError as e:
        raise Missing(f"autograd not installed ({e})") from None
    wpos = wrt_positions(mod.objective, mod.WRT)

    def packed(wvals):
        full = list(args)
        for p, v in zip(wpos, wvals):
            full[p] = v
        return mod.xp_objective(anp, *full)

    gf = autograd.grad(packed)
    wvals = tuple(args[p] for p in wpos)
    return lambda: gf(wvals)


def torch_fn(mod, args):
    try:
        import torch
    except ImportError as e:
        raise Missing(f"torch not installed ({e})") from None
    from apps._xp import TorchNS

    xp = TorchNS()
    wpos = wrt_positions(mod.objective, mod.WRT)
    base = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            base.append(torch.as_tensor(a, dtype=torch.float64))
        elif isinstance(a, np.ndarray):
            base.append(torch.as_tensor(a))
        elif i in wpos:
            base.append(torch.tensor(float(a), dtype=torch.float64))
        else:
            base.append(a)

    def run():
        full = list(base)
        leaves = []
        for p in wpos:
            t = base[p].detach().clone().requires_grad_(True)
            full[p] = t
            leaves.append(t)
        loss = mod.xp_objective(xp, *full)
        return torch.autograd.grad(loss, leaves)

    return run


#: app module name -> tangent's gradient function, or the exception it raised
_tangent_cache: dict[str, object] = {}


def tangent_fn(mod, args):
    try:
        import tangent
    except ImportError as e:
        raise Missing(f"tangent-ad not installed ({e})") from None
    for k in list(vars(tangent.utils)):  # silence its per-call integer-gradient prints
        if k.endswith("_warnings_left"):
            setattr(tangent.utils, k, 0)
    if mod.__name__ not in _tangent_cache:
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(
                    io.StringIO()):
                df = tangent.grad(mod.objective, wrt=tuple(wrt_positions(mod.objective, mod.WRT)),
                                  verbose=0)
        except Exception as e:  # tangent raises many kinds of errors on unsupported code
            _tangent_cache[mod.__name__] = e
        else:
            _tangent_cache[mod.__name__] = df
    df = _tangent_cache[mod.__name__]
    if isinstance(df, Exception):
        raise Unsupported(f"{type(df).__name__}: {first_line(df)}")

    def run():
        r = df(*args)
        return r if isinstance(r, tuple) else (r,)

    return run


@dataclass
class Prepared:
    fn: Callable
    info: dict = field(default_factory=dict)
    grad: object = None
    obj: object = None  # the gradient object (coarsen), for tape_bytes


def _read_timings(path):
    """The probe child's timings (:func:`apps.bench.probe.first_result_timings`), or None when
    it wrote none (it failed, timed out, or the probe was replaced)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _compile_times(info, child):
    """coarsen's transform and compile times for the report: the probe child's (a fresh
    process: ``differentiate`` to the first gradient) when it wrote them, else this process's
    (its transformation, ``info["transform_s"]``, plus its first call)."""
    if child is not None:
        keys = ("coarsen_transform_s", "first_result_s", "compile_s", "transform_cached",
                "compile_cached")
        out = {k: child.get(k) for k in keys}
        out["compile_measured_in"] = "probe"
        return out
    first, second = info.get("first_call_s", 0.0), info.get("second_call_s", 0.0)
    transform = info.get("transform_s")
    return {"first_result_s": None if transform is None else transform + first,
            "compile_s": max(0.0, first - second), "compile_cached": None,
            "compile_measured_in": "parent"}


def make_fn(tool, mod, args):
    """``(callable, info, gradient object or None)`` for ``tool`` on ``mod`` at ``args``."""
    if tool == "primal":
        return (lambda: mod.primal_numba(*args)), {}, None
    if tool == "handwritten":
        return (lambda: mod.handwritten_grad(*args)), {}, None
    if tool in ("coarsen", "coarsen_fine"):
        return _coarsen_prepare(mod, args, fine=(tool == "coarsen_fine"))
    if tool in STRATEGY_TOOLS:
        return _coarsen_prepare(mod, args, fine=False, plan=STRATEGY_TOOLS[tool])
    peers = {"jax": jax_grad_fn, "autograd": autograd_fn, "torch": torch_fn,
             "tangent": tangent_fn}
    if tool not in peers:
        raise ValueError(f"unknown tool {tool!r}")
    return peers[tool](mod, args), {}, None


#: a first call (which may include a peer's tracing or transformation) may take this many
#: times ``limit_s`` before it is stopped
FIRST_CALL_FACTOR = 10.0


@contextlib.contextmanager
def _deadline(seconds, what):
    """Raise ``TooSlow`` in the calling code once ``seconds`` have passed (``SIGALRM``; the main
    thread of a POSIX process only, elsewhere no limit).  Python-level peers run Python code
    between NumPy calls, where the signal is taken."""
    import signal
    import threading

    usable = (seconds is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def stop(signum, frame):
        raise TooSlow(f"{what} took more than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, stop)
    # and again every 50 ms: an exception raised where Python ignores it (a garbage
    # collector's callback, such as JAX's) would otherwise leave the call running
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def prepare(tool, mod, args, limit_s=None) -> Prepared:
    """Build ``tool``'s callable for ``mod`` at ``args`` and make its first call (untimed).

    ``limit_s`` (a Python-level peer at a size with a smaller one to fall back to): the
    second call must take at most ``limit_s`` and the first at most ``FIRST_CALL_FACTOR``
    times that, else ``TooSlow`` is raised at once (a call past the limit is stopped), so a
    peer that needs minutes per call at this size costs seconds before it is measured at the
    smaller size."""
    child = None
    if tool in CRASH_GUARDED:
        # generated code could crash the process (a wrong tape size is a segfault), which would
        # end the whole run: probe the first call in a child process first; being a fresh
        # process that runs before this one transforms anything, it also times differentiate ->
        # first gradient (coarsen + Numba) without the caches this process would fill
        with tempfile.TemporaryDirectory(prefix="coarsen-bench-probe-") as tmp:
            path = os.path.join(tmp, "timings.json")
            crash = probe_crash(GradientProbe(mod.objective, tuple(mod.WRT),
                                              coarse=(tool != "coarsen_fine"), args=tuple(args),
                                              plan=STRATEGY_TOOLS.get(tool, "auto"),
                                              timings_path=path))
            if crash:
                raise Crashed(crash)
            child = _read_timings(path)
    fn, info, obj = make_fn(tool, mod, args)
    t0 = time.perf_counter()
    with _deadline(None if limit_s is None else FIRST_CALL_FACTOR * limit_s, "the first call"):
        out = fn()
    info["first_call_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with _deadline(None if limit_s is None else 2.0 * limit_s, "the second call"):
        out = fn()
    info["second_call_s"] = time.perf_counter() - t0
    if limit_s is not None and info["second_call_s"] > limit_s:
        raise TooSlow(f"a call took {info['second_call_s']:.3g} s (limit {limit_s:g} s)")
    if tool in CRASH_GUARDED:
        info.update(_compile_times(info, child))
    tb = getattr(obj, "tape_bytes", None) if obj is not None else None
    if callable(tb):
        try:
            tb = tb(*args)
        except Exception:
            tb = None
    if tb is not None:
        info["tape_bytes"] = int(tb)
    return Prepared(fn=fn, info=info, grad=None if tool == "primal" else out, obj=obj)
