"""The benchmark harness: coarsen against its peers on the applications in :mod:`apps`.

Run ``python -m apps.bench [--quick] [--apps a,b] [--sizes s,m,l] [--tools ...] [--out DIR]``.

Tools
    ``primal`` (``numba.njit(objective)``, the baseline of the "x primal" ratios), ``coarsen``
    (coarse), ``coarsen_fine`` (``coarsen=False``: fine-grained AD through the same machinery),
    ``handwritten`` (hand-derived, ``numba.njit``), ``jax`` (``jit(grad)`` of the app's idiomatic
    JAX version, float64), ``autograd`` (its vectorized ``xp_objective`` on ``autograd.numpy``),
    ``tangent`` (tangent-ad on the loop ``objective``, like coarsen) and ``torch`` (PyTorch eager
    on ``xp_objective`` through :class:`apps._xp.TorchNS`).  The peers are optional (the
    ``bench`` extra): a missing one is reported as "missing", never an error.

Protocol (in the spirit of ADBench)
    1. Preparation is untimed but recorded: coarsen's transformation time
       (``coarsen.differentiate``) separately from its first call (Numba compilation plus one
       run); the first call of every other tool (JIT compilation, tracing).
    2. Every tool's gradient is checked against the hand-written one (itself checked against
       central differences in ``tests/apps``; against coarsen's when the hand-written one is
       not run or failed) with ADBench's measure ``|x - y| / max(1, |x| + |y|) <= 1e-8``.  A
       tool that disagrees is reported as a mismatch and is not timed; a tool that raises is
       reported with the first line of its exception.  The harness never stops because a tool
       failed: coarsen's generated gradients make their first call at each size in a forked
       child first (:func:`probe_crash`), so a crash in generated code is reported as
       ``crashed`` instead of ending the run.
    3. Calibration: repeats double until one batch takes at least ``--min-time`` (0.5 s; 0.05 s
       with ``--quick``).
    4. Samples are interleaved round-robin across the tools (the starting tool rotates every
       round), so machine noise hits all tools alike; per tool the median, minimum and maximum
       time per call are reported.  Ratios are medians over the hand-written gradient's median
       and over the Numba primal's median, measured in the same run.
    5. A tool whose predicted time per call at the requested size exceeds ``--slow-limit`` (the
       Python-level peers on large sizes) is measured at the next smaller size instead, together
       with the primal and the hand-written gradient at that size, and its cell is marked
       ``@<size>``.  The prediction scales the peer's time at the previous size by the growth of
       the hand-written gradient's time, measured before the peers run.

Memory
    Peak memory is measured in one extra, untimed call per tool with :mod:`tracemalloc`
    (``reset_peak`` then ``get_traced_memory()[1]``): it sees every allocation made through
    Python's allocators, which includes NumPy arrays and Numba's runtime (``NRT`` allocates
    through the CPython allocator), so numba, coarsen, autograd and tangent are all covered.
    JAX (XLA's allocator) and PyTorch (c10's allocator) allocate outside it; their peaks are
    reported as ``n/a``.  When the gradient object exposes ``tape_bytes`` it is reported too.

Output (``--out``, default ``bench_out/``): ``results.md`` (tables; first the summary of coarse
against fine-grained AD with ``g.tape_bytes`` and peaks, which is also printed last on stdout),
``results.json``
(everything measured) and ``ratio_vs_handwritten_<size>.png`` / ``ratio_vs_primal_<size>.png``
(log-scale bars; skipped without matplotlib).  Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import json
import math
import os
import platform
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import apps
from apps._common import adbench_err, flat

ALL_TOOLS = ("primal", "coarsen", "coarsen_fine", "handwritten", "jax", "autograd", "tangent",
             "torch")
#: tools that compute a gradient (everything but the primal)
GRAD_TOOLS = tuple(t for t in ALL_TOOLS if t != "primal")
#: tools whose allocations tracemalloc cannot see
UNTRACKED_MEMORY = ("jax", "torch")
TOL = 1e-8


class Missing(Exception):
    """A peer that is not installed (ImportError): reported, not a failure."""


class Unsupported(Exception):
    """A peer that cannot express an app (e.g. tangent-ad on a construct it lacks)."""


# ----------------------------------------------------------------------------- tool wiring

def wrt_positions(fn, wrt):
    names = list(inspect.signature(fn).parameters)
    return [names.index(w) for w in wrt]


_coarsen_cache: dict = {}


def _coarsen_prepare(mod, args, fine):
    """coarsen.differentiate once per (app, mode); the transformation time is recorded once."""
    try:
        import coarsen
        differentiate = coarsen.differentiate
    except (ImportError, AttributeError) as e:
        raise Missing(f"coarsen.differentiate unavailable ({e})") from None
    key = (mod.__name__, fine)
    info = {}
    if key not in _coarsen_cache:
        t0 = time.perf_counter()
        g = differentiate(mod.objective, wrt=tuple(mod.WRT), coarsen=not fine)
        t_fence = time.perf_counter() - t0
        # g.source_for specializes (SSA, analyses, AD, printing) without calling Numba, so the
        # first call below measures Numba's compilation (plus one run) on its own
        t0 = time.perf_counter()
        if hasattr(g, "source_for"):
            g.source_for(*args)
        _coarsen_cache[key] = (g, t_fence + time.perf_counter() - t0)
        info["transform_s"] = _coarsen_cache[key][1]
    else:
        info["transform_s_cached"] = _coarsen_cache[key][1]
    g = _coarsen_cache[key][0]
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


def _autograd_fn(mod, args):
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


def _torch_fn(mod, args):
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


_tangent_cache: dict = {}


def _tangent_fn(mod, args):
    try:
        import tangent
    except ImportError as e:
        raise Missing(f"tangent-ad not installed ({e})") from None
    for k in list(vars(tangent.utils)):  # silence its per-call integer-gradient prints
        if k.endswith("_warnings_left"):
            setattr(tangent.utils, k, 0)
    if mod.__name__ not in _tangent_cache:
        import contextlib
        import io

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
        raise Unsupported(f"{type(df).__name__}: {_first_line(df)}")

    def run():
        r = df(*args)
        return r if isinstance(r, tuple) else (r,)

    return run


#: tools whose generated, unchecked machine code could crash the process: probed in a child
CRASH_GUARDED = ("coarsen", "coarsen_fine")
PROBE_TIMEOUT_S = 600.0


class Crashed(Exception):
    """The tool's first call killed a forked child (e.g. a segfault): reported, not run."""


def probe_crash(fn, timeout_s=PROBE_TIMEOUT_S):
    """Run ``fn()`` once in a forked child; return a message when the child died of a signal
    (segfault, abort), else None.  Python exceptions are not reported here: the parent's own
    call raises them again with their message.  Numba's on-disk cache (``cache=True``) makes
    the parent's compilation after the child's a cache load.  Without ``os.fork`` (Windows),
    or when the child does not finish within ``timeout_s``, the probe is inconclusive (None)."""
    if not hasattr(os, "fork"):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    import warnings
    with warnings.catch_warnings():
        # JAX warns about fork() with its threads; the child runs only the Numba gradient
        warnings.simplefilter("ignore", RuntimeWarning)
        pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:  # the parent reports the crash; no traceback dump from the child
            import faulthandler
            faulthandler.disable()
        except Exception:
            pass
        try:
            fn()
        except BaseException:
            code = 3
        os._exit(code)
    t_end = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > t_end:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import signal
            name = signal.Signals(sig).name
        except (ValueError, AttributeError):
            name = str(sig)
        return f"crashed with {name} in the compiled gradient (probed in a child process)"
    return None


@dataclass
class Prepared:
    fn: Callable
    info: dict = field(default_factory=dict)
    grad: object = None
    obj: object = None  # the gradient object (coarsen), for tape_bytes


def prepare(tool, mod, args) -> Prepared:
    """Build ``tool``'s callable for ``mod`` at ``args`` and make its first call (untimed)."""
    info: dict = {}
    obj = None
    if tool == "primal":
        fn = lambda: mod.primal_numba(*args)  # noqa: E731
    elif tool == "handwritten":
        fn = lambda: mod.handwritten_grad(*args)  # noqa: E731
    elif tool in ("coarsen", "coarsen_fine"):
        fn, info, obj = _coarsen_prepare(mod, args, fine=(tool == "coarsen_fine"))
    elif tool == "jax":
        fn = jax_grad_fn(mod, args)
    elif tool == "autograd":
        fn = _autograd_fn(mod, args)
    elif tool == "torch":
        fn = _torch_fn(mod, args)
    elif tool == "tangent":
        fn = _tangent_fn(mod, args)
    else:
        raise ValueError(f"unknown tool {tool!r}")
    if tool in CRASH_GUARDED:
        # generated code runs without bounds checks: a wrong tape size is a segfault, which
        # would end the whole run; probe the first call in a forked child first
        crash = probe_crash(fn)
        if crash:
            raise Crashed(crash)
    t0 = time.perf_counter()
    out = fn()
    info["first_call_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = fn()
    info["second_call_s"] = time.perf_counter() - t0
    tb = getattr(obj, "tape_bytes", None) if obj is not None else None
    if callable(tb):
        try:
            tb = tb(*args)
        except Exception:
            tb = None
    if tb is not None:
        info["tape_bytes"] = int(tb)
    return Prepared(fn=fn, info=info, grad=None if tool == "primal" else out, obj=obj)


# ----------------------------------------------------------------------------- measuring

def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    line = next((x for x in s if x.strip()), "")
    # CoarsenError puts the location first; its problem line is the one after "CoarsenError:"
    for x in s:
        if x.startswith("CoarsenError:"):
            line = x[len("CoarsenError:"):].strip()
            break
    return line[:160]


def calibrate(fn, min_time):
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time or reps >= 1 << 24:
            return reps, dt / reps
        reps *= 2


def peak_memory(fn):
    """Peak bytes traced by tracemalloc during one call (see the module doc)."""
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
    """Round-robin samples; returns {tool: [seconds per call, ...]}."""
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


class Progress:
    def __init__(self, total, enabled=True):
        self.total, self.done, self.enabled = total, 0, enabled and total > 0
        self.t0 = time.perf_counter()

    def show(self, msg):
        if not self.enabled:
            return
        width = 24
        fill = int(width * self.done / self.total)
        line = (f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                f"{time.perf_counter() - self.t0:6.1f}s {msg}")
        sys.stderr.write(line[:110].ljust(110))
        sys.stderr.flush()

    def step(self):
        self.done += 1

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


@dataclass
class Config:
    apps: list
    sizes: list
    tools: list
    out: Path
    min_time: float = 0.5
    samples: int = 10
    case_budget_s: float = 20.0
    slow_limit_s: float = 5.0
    seed: int = 0
    memory: bool = True
    plots: bool = True
    quick: bool = False
    progress: bool = True


def _measure_group(mod, size, tools, cfg, prog, label):
    """Prepare, check and time ``tools`` on ``mod`` at ``size``; returns {tool: result}."""
    args = mod.make_inputs(size, seed=cfg.seed)
    res: dict = {}
    prepared: dict = {}
    for tool in tools:
        prog.show(f"{label}: prepare {tool}")
        r = {"status": "ok"}
        try:
            p = prepare(tool, mod, args)
            prepared[tool] = p
            r["prep"] = p.info
            if "tape_bytes" in p.info:
                r["tape_bytes"] = p.info["tape_bytes"]
        except Missing as e:
            r = {"status": "missing", "message": str(e)}
        except Unsupported as e:
            r = {"status": "unsupported", "message": str(e)}
        except Crashed as e:
            r = {"status": "crashed", "message": str(e)}
        except Exception as e:
            r = {"status": "failed", "message": f"{type(e).__name__}: {_first_line(e)}"}
        res[tool] = r

    # correctness: against coarsen, or against the hand-written gradient when coarsen failed
    # the hand-written gradient is the reference (it is checked against central differences
    # in tests/apps); coarsen's gradients are checked like every other tool's, so a wrong coarse
    # gradient shows as coarsen's mismatch, not as every peer's
    ref_tool = next((t for t in ("handwritten", "coarsen", "coarsen_fine") if t in prepared),
                    None)
    if ref_tool is None:
        try:
            ref = mod.handwritten_grad(*args)
            ref_tool = "handwritten"
        except Exception:
            ref = None
    else:
        ref = prepared[ref_tool].grad
    for tool, p in list(prepared.items()):
        if tool == "primal":
            continue
        try:
            err = adbench_err(p.grad, ref) if ref is not None else float("nan")
        except Exception as e:
            err = float("inf")
            res[tool]["message"] = f"{type(e).__name__}: {_first_line(e)}"
        res[tool]["err_vs_" + ref_tool] = err
        if not err <= TOL:
            res[tool]["status"] = "mismatch"
            res[tool]["err"] = err
            res[tool]["ref"] = ref_tool
            del prepared[tool]

    # timing
    reps = {}
    for tool, p in list(prepared.items()):
        prog.show(f"{label}: calibrate {tool}")
        try:
            reps[tool], est = calibrate(p.fn, cfg.min_time)
            res[tool]["reps"] = reps[tool]
        except Exception as e:
            res[tool] = {"status": "failed", "message": f"{type(e).__name__}: {_first_line(e)}"}
            del prepared[tool]
    prog.show(f"{label}: interleaved samples")
    try:
        times = interleaved({t: prepared[t].fn for t in prepared}, reps, cfg.samples,
                            cfg.case_budget_s)
    except Exception as e:  # a tool that fails only sometimes: retime without it is overkill
        times = {}
        for t in prepared:
            res[t] = {"status": "failed", "message": f"{type(e).__name__}: {_first_line(e)}"}
    for t, ts in times.items():
        a = np.array(ts)
        res[t].update(median_s=float(np.median(a)), min_s=float(a.min()), max_s=float(a.max()),
                      samples=len(ts))
    if cfg.memory:
        for t in list(times):
            if t in UNTRACKED_MEMORY:
                res[t]["peak_bytes"] = None
                continue
            prog.show(f"{label}: memory {t}")
            try:
                res[t]["peak_bytes"] = peak_memory(prepared[t].fn)
            except Exception:
                res[t]["peak_bytes"] = None
    return res


def _smaller(size):
    order = apps.SIZES
    i = order.index(size)
    return order[i - 1] if i > 0 else None


PY_LEVEL = ("autograd", "tangent", "torch")


def run(cfg: Config) -> dict:
    """Run the benchmark; returns the JSON-able results and writes the report to ``cfg.out``."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    prog = Progress(len(cfg.apps) * len(cfg.sizes), cfg.progress)
    cases = []
    for name in cfg.apps:
        try:
            mod = apps.load(name)
        except Exception as e:
            for size in cfg.sizes:
                cases.append({"app": name, "size": size, "error": _first_line(e), "tools": {}})
                prog.step()
            continue
        # per tool: (size, t_call, t_handwritten) at the last size it ran, to predict slowness
        history: dict = {}
        for size in sorted(cfg.sizes, key=apps.SIZES.index):
            label = f"{name}/{size}"
            case = {"app": name, "size": size, "dims": mod.SIZES[size], "tools": {}}
            main_tools, reduced = [], []
            if any(t in PY_LEVEL for t in cfg.tools):
                history["__hwquick__" + size] = _hw_quick_time(mod, size, cfg.seed)
            for tool in cfg.tools:
                if tool in PY_LEVEL and _predict_slow(tool, size, history, cfg):
                    reduced.append(tool)
                else:
                    main_tools.append(tool)
            res = _measure_group(mod, size, main_tools, cfg, prog, label)
            _record(history, res, size)
            # a peer that turned out slow here is re-measured at a smaller size
            for tool in main_tools:
                r = res[tool]
                if (tool in PY_LEVEL and r["status"] == "ok" and _smaller(size) is not None
                        and r.get("prep", {}).get("second_call_s", 0.0) > cfg.slow_limit_s):
                    reduced.append(tool)
            red_size = _smaller(size)
            while reduced and red_size is not None:
                sub = _measure_group(mod, red_size, ["primal", "handwritten"] + reduced, cfg,
                                     prog, f"{label} (peers @{red_size})")
                still = []
                for tool in reduced:
                    r = dict(sub[tool])
                    r["reduced_size"] = red_size
                    for base in ("primal", "handwritten"):
                        if sub[base].get("median_s") is not None:
                            r[f"{base}_median_s_at_reduced"] = sub[base]["median_s"]
                    res[tool] = r
                    if (r["status"] == "ok"
                            and r.get("prep", {}).get("second_call_s", 0) > cfg.slow_limit_s
                            and _smaller(red_size) is not None):
                        still.append(tool)
                reduced, red_size = still, _smaller(red_size)
            case["tools"] = {t: res[t] for t in cfg.tools if t in res}
            cases.append(case)
            prog.step()
    prog.close()
    result = {"meta": _meta(cfg), "cases": cases}
    (cfg.out / "results.json").write_text(json.dumps(result, indent=1, default=_json_default))
    md = render_markdown(result)
    (cfg.out / "results.md").write_text(md)
    if cfg.plots:
        result["plots"] = make_plots(result, cfg.out)
    return result


def _record(history, res, size):
    hw = res.get("handwritten", {}).get("median_s")
    for t, r in res.items():
        if r.get("status") == "ok":
            history[t] = (size, r.get("prep", {}).get("second_call_s", 0.0), hw)
    history["__hw__" + size] = hw


def _predict_slow(tool, size, history, cfg):
    """Predict the time per call at ``size`` from the last measured size, scaled by how much
    the hand-written gradient's time grew (conservative: small sizes are overhead-bound)."""
    if tool not in history:
        return False
    prev_size, t_prev, _ = history[tool]
    if prev_size == size:
        return False
    if t_prev > cfg.slow_limit_s:
        return True
    hw_prev = history.get("__hwquick__" + prev_size)
    hw_now = history.get("__hwquick__" + size)
    if hw_prev and hw_now:
        return t_prev * hw_now / hw_prev > cfg.slow_limit_s
    return False


def _hw_quick_time(mod, size, seed):
    """Best of three calls of the hand-written gradient at ``size`` (after one warm-up call):
    the yardstick :func:`_predict_slow` scales the Python-level peers' times by, measured
    before they run, so a slow peer is never prepared at a size where it would take minutes."""
    try:
        args = mod.make_inputs(size, seed=seed)
        mod.handwritten_grad(*args)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            mod.handwritten_grad(*args)
            best = min(best, time.perf_counter() - t0)
        return best
    except Exception:
        return None


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    return str(o)


def _meta(cfg):
    from importlib import metadata

    vers = {}
    for dist in ("numpy", "numba", "coarsen", "jax", "autograd", "torch", "tangent-ad"):
        try:
            vers[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            vers[dist] = None
    return {
        "python": platform.python_version(), "machine": platform.machine(),
        "processor": platform.processor(), "cpus": os.cpu_count(), "versions": vers,
        "min_time_s": cfg.min_time, "samples": cfg.samples, "slow_limit_s": cfg.slow_limit_s,
        "quick": cfg.quick, "tools": cfg.tools, "apps": cfg.apps, "sizes": cfg.sizes,
        "tolerance": TOL, "memory_method": "tracemalloc peak of one call (NumPy + Numba NRT + "
        "Python objects); JAX and PyTorch allocate outside it (n/a)",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


# ----------------------------------------------------------------------------- reporting

def _fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def _fmt_bytes(b):
    if b is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024.0


def _status_cell(r):
    st = r.get("status")
    if st == "mismatch":
        return f"MISMATCH {r.get('err', float('nan')):.1e} vs {r.get('ref')}"
    if st in ("failed", "unsupported", "missing", "crashed"):
        return f"{st.upper()}: {r.get('message', '')}"[:90].replace("|", "/")
    return None


def ratio(case, tool, base):
    """median(tool) / median(base) in the same run (at the reduced size when marked)."""
    r = case["tools"].get(tool, {})
    if r.get("status") != "ok" or r.get("median_s") is None:
        return None
    if r.get("reduced_size"):
        b = r.get(f"{base}_median_s_at_reduced")
    else:
        b = case["tools"].get(base, {}).get("median_s")
    if not b:
        return None
    return r["median_s"] / b


def _geomean(vals):
    vals = [v for v in vals if v is not None and v > 0]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))


def _tool_median(case, tool):
    r = case["tools"].get(tool, {})
    if r.get("status") != "ok" or r.get("reduced_size"):
        return None
    return r.get("median_s")


def render_summary(result) -> str:
    """The headline table: coarse against fine-grained AD (the paper's claim) per app and size,
    with the hand-written gradient, ``g.tape_bytes`` and tracemalloc peaks; geomeans per size."""
    cases = result["cases"]
    tools = result["meta"]["tools"]
    if not ("coarsen" in tools and "coarsen_fine" in tools):
        return ""
    lines = ["## Coarse vs fine-grained AD (summary)", "",
             "speedup = fine median / coarse median; tape = `g.tape_bytes` of one call; peak = "
             "tracemalloc peak of one call; hw = hand-written gradient.", ""]
    lines.append("| app | size | coarse | fine | speedup fine/coarse | coarse / hw "
                 "| tape coarse | tape fine | peak coarse | peak fine |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    per_size: dict = {}
    for c in cases:
        rc, rf = c["tools"].get("coarsen", {}), c["tools"].get("coarsen_fine", {})
        tc, tf = _tool_median(c, "coarsen"), _tool_median(c, "coarsen_fine")
        th = _tool_median(c, "handwritten")
        sp = tf / tc if tc and tf else None
        vh = tc / th if tc and th else None
        tbc, tbf = rc.get("tape_bytes"), rf.get("tape_bytes")
        both_ok = rc.get("status") == "ok" and rf.get("status") == "ok"
        tape_ratio = (tbf / tbc) if tbc and tbf and both_ok else None
        pc, pf = rc.get("peak_bytes"), rf.get("peak_bytes")
        ps = per_size.setdefault(c["size"], {"speedup": [], "vs_hw": [], "tape": [], "peak": []})
        ps["speedup"].append(sp)
        ps["vs_hw"].append(vh)
        ps["tape"].append(tape_ratio)
        ps["peak"].append(pf / pc if pc and pf and both_ok else None)

        def cell(r, t):
            st = _status_cell(r) if r else "-"
            return st[:40] if st else _fmt_time(t)

        def tape(b, r):
            if r.get("status") != "ok":
                return "-"
            return "0 B" if b == 0 else (_fmt_bytes(b) if b is not None else "n/a")

        lines.append(
            f"| {c['app']} {_dims(c)} | {c['size']} | {cell(rc, tc)} | {cell(rf, tf)} | "
            f"{'-' if sp is None else f'{sp:.3g}x'} | {'-' if vh is None else f'{vh:.3g}'} | "
            f"{tape(tbc, rc)} | {tape(tbf, rf)} | "
            f"{_fmt_bytes(pc) if pc is not None else '-'} | "
            f"{_fmt_bytes(pf) if pf is not None else '-'} |")
    lines.append("")
    for size, ps in per_size.items():
        def g(k):
            v = _geomean(ps[k])
            n = len([x for x in ps[k] if x])
            return "-" if v is None else f"{v:.3g} (over {n} apps)"
        lines.append(f"- size {size}: geomean speedup fine/coarse {g('speedup')}; coarse / "
                     f"hand-written {g('vs_hw')}; tape fine/coarse {g('tape')} (apps where both "
                     f"tapes are non-empty); peak fine/coarse {g('peak')}")
    lines.append("")
    return "\n".join(lines)


def render_markdown(result) -> str:
    meta = result["meta"]
    cases = result["cases"]
    tools = meta["tools"]
    lines = ["# coarsen benchmark", ""]
    lines.append(f"{meta['date']}; Python {meta['python']} on {meta['machine']} "
                 f"({meta['cpus']} CPUs); " + ", ".join(f"{k} {v}" for k, v in
                                                        meta["versions"].items() if v))
    lines.append("")
    lines.append(f"Protocol: untimed preparation; gradients checked against the hand-written "
                 f"one (else coarsen's) with |x-y|/max(1,|x|+|y|) <= {meta['tolerance']:g}; "
                 f"repeats doubled until a batch takes {meta['min_time_s']:g} s; up to "
                 f"{meta['samples']} interleaved round-robin samples; medians [min, max]. "
                 f"`@s` marks a peer measured at a smaller size (slower than "
                 f"{meta['slow_limit_s']:g} s per call), its ratios taken against the primal and "
                 f"hand-written gradient at that size. Memory: {meta['memory_method']}. "
                 f"coarsen's preparation is split into the transformation (`differentiate` plus "
                 f"`source_for`: SSA, analyses, AD, printing) and the first call (Numba "
                 f"compilation plus one run); both use on-disk caches, so a rerun shows cache "
                 f"loads.")
    lines.append("")
    summary = render_summary(result)
    if summary:
        lines += [summary, ""]
    sizes = [s for s in apps.SIZES if any(c["size"] == s for c in cases)]
    missing_notes = {}
    for size in sizes:
        cs = [c for c in cases if c["size"] == size]
        for title, base in (("Gradient time / hand-written gradient time", "handwritten"),
                            ("Gradient time / Numba primal time", "primal")):
            lines += [f"## Size {size}: {title}", ""]
            cols = [t for t in tools if t != base]
            lines.append("| app | " + " | ".join(cols) + " |")
            lines.append("|---" * (len(cols) + 1) + "|")
            per_tool = {t: [] for t in cols}
            for c in cs:
                row = [f"{c['app']} {_dims(c)}"]
                for t in cols:
                    r = c["tools"].get(t)
                    if r is None:
                        row.append("-")
                        continue
                    s = _status_cell(r)
                    if r.get("status") == "missing":
                        missing_notes[t] = r.get("message", "")
                        row.append("missing")
                        continue
                    if s:
                        row.append(s)
                        continue
                    v = ratio(c, t, base)
                    per_tool[t].append(v)
                    mark = f" @{r['reduced_size']}" if r.get("reduced_size") else ""
                    row.append("-" if v is None else f"{v:.3g}{mark}")
                lines.append("| " + " | ".join(row) + " |")
            geo = ["**geomean**"]
            for t in cols:
                g = _geomean(per_tool[t])
                n_ok = len([v for v in per_tool[t] if v])
                geo.append("-" if g is None else
                           f"**{g:.3g}**" + ("" if n_ok == len(cs) else f" ({n_ok}/{len(cs)})"))
            lines.append("| " + " | ".join(geo) + " |")
            lines.append("")
        lines += [f"## Size {size}: median time per call [min, max]", ""]
        lines.append("| app | " + " | ".join(tools) + " |")
        lines.append("|---" * (len(tools) + 1) + "|")
        for c in cs:
            row = [c["app"]]
            for t in tools:
                r = c["tools"].get(t, {})
                if r.get("median_s") is None:
                    row.append(r.get("status", "-") if r else "-")
                else:
                    mark = f" @{r['reduced_size']}" if r.get("reduced_size") else ""
                    row.append(f"{_fmt_time(r['median_s'])} [{_fmt_time(r['min_s'])}, "
                               f"{_fmt_time(r['max_s'])}]{mark}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        lines += [f"## Size {size}: preparation (untimed) and peak memory of one call", ""]
        lines.append("| app | tool | transform | first call (compile + run) | peak memory "
                     "| tape |")
        lines.append("|---|---|---|---|---|---|")
        for c in cs:
            for t in tools:
                r = c["tools"].get(t, {})
                if r.get("status") not in ("ok", "mismatch"):
                    continue
                prep = r.get("prep", {})
                tr = prep.get("transform_s")
                trs = _fmt_time(tr) if tr is not None else (
                    f"(cached {_fmt_time(prep['transform_s_cached'])})"
                    if "transform_s_cached" in prep else "-")
                lines.append(f"| {c['app']} | {t} | {trs} | "
                             f"{_fmt_time(prep.get('first_call_s'))} | "
                             f"{_fmt_bytes(r.get('peak_bytes')) if 'peak_bytes' in r else '-'} | "
                             f"{_fmt_bytes(r['tape_bytes']) if r.get('tape_bytes') else '-'} |")
        lines.append("")
    if missing_notes:
        lines += ["## Peers not installed", ""]
        lines += [f"- {t}: {m}" for t, m in missing_notes.items()]
        lines.append("")
    return "\n".join(lines)


def _dims(c):
    d = c.get("dims")
    if isinstance(d, (list, tuple)):
        return "(" + "x".join(str(v) for v in d) + ")"
    return f"({d})" if d is not None else ""


def make_plots(result, out: Path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    tools = result["meta"]["tools"]
    cases = result["cases"]
    for size in [s for s in apps.SIZES if any(c["size"] == s for c in cases)]:
        cs = [c for c in cases if c["size"] == size]
        for base in ("handwritten", "primal"):
            cols = [t for t in tools if t != base]
            fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(cs) + 2), 4.5))
            width = 0.8 / max(1, len(cols))
            any_bar = False
            for j, t in enumerate(cols):
                xs, ys, hatch = [], [], []
                for i, c in enumerate(cs):
                    v = ratio(c, t, base)
                    if v is not None:
                        xs.append(i + (j - (len(cols) - 1) / 2) * width)
                        ys.append(v)
                        hatch.append("//" if c["tools"][t].get("reduced_size") else None)
                if xs:
                    bars = ax.bar(xs, ys, width, label=t, color=f"C{j}")
                    for b, h in zip(bars, hatch):
                        if h:
                            b.set_hatch(h)
                    any_bar = True
            ax.set_xticks(range(len(cs)))
            ax.set_xticklabels([c["app"] for c in cs], rotation=30, ha="right")
            if any_bar:
                ax.set_yscale("log")
                ax.legend(fontsize=8, ncol=2)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_ylabel(f"time / {base} time (log)")
            ax.set_title(f"gradient time relative to {base}, size {size} "
                         f"(hatched: peer measured at a smaller size)")
            fig.tight_layout()
            path = out / f"ratio_vs_{base}_{size}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            files.append(str(path))
    return files


# ----------------------------------------------------------------------------- CLI

def _split(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m apps.bench", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="sizes s,m; 0.05 s batches, 3 samples: a few minutes on 2 cores")
    ap.add_argument("--apps", type=_split, default=list(apps.APP_NAMES),
                    help="comma-separated apps (default: all): " + ",".join(apps.APP_NAMES))
    ap.add_argument("--sizes", type=_split, default=None, help="comma-separated from s,m,l")
    ap.add_argument("--tools", type=_split, default=list(ALL_TOOLS),
                    help="comma-separated from " + ",".join(ALL_TOOLS))
    ap.add_argument("--out", type=Path, default=Path("bench_out"))
    ap.add_argument("--min-time", type=float, default=None, help="seconds per calibrated batch")
    ap.add_argument("--samples", type=int, default=None, help="interleaved samples per tool")
    ap.add_argument("--slow-limit", type=float, default=None,
                    help="seconds per call above which a Python-level peer runs at a smaller size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    for x in a.apps:
        if x not in apps.APP_NAMES:
            ap.error(f"unknown app {x!r}")
    for t in a.tools:
        if t not in ALL_TOOLS:
            ap.error(f"unknown tool {t!r}")
    tools = list(a.tools)
    for base in ("primal", "handwritten"):  # the ratios need them
        if base not in tools:
            tools.insert(0 if base == "primal" else min(len(tools), 1), base)
    sizes = a.sizes or (["s", "m"] if a.quick else ["s", "m", "l"])
    for s in sizes:
        if s not in apps.SIZES:
            ap.error(f"unknown size {s!r}")
    cfg = Config(
        apps=a.apps, sizes=sizes, tools=[t for t in ALL_TOOLS if t in tools], out=a.out,
        min_time=a.min_time if a.min_time is not None else (0.05 if a.quick else 0.5),
        samples=a.samples if a.samples is not None else (3 if a.quick else 10),
        case_budget_s=2.0 if a.quick else 20.0,
        slow_limit_s=a.slow_limit if a.slow_limit is not None else (0.5 if a.quick else 5.0),
        seed=a.seed, memory=not a.no_memory, plots=not a.no_plots, quick=a.quick,
        progress=not a.no_progress,
    )
    result = run(cfg)
    print(render_markdown(result))
    summary = render_summary(result)
    if summary:  # the headline again, last, so it is what a terminal shows
        print("\n" + summary)
    print(f"\nwrote {cfg.out / 'results.md'}, {cfg.out / 'results.json'}"
          + (f" and {len(result.get('plots', []))} plots" if result.get("plots") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
