"""The harness's main loop: every app at every size, peers too slow for a size measured at a
smaller one, and the results written as they come.

Requires the apps of :mod:`apps` and a :class:`Config`.  Guarantees:

* Optional peers that are not installed are left out before anything runs (no column in the
  report); they are listed in ``meta["skipped_peers"]`` with the command that installs them.
* After every (app, size) case, ``results.json`` and ``results.md`` in ``cfg.out`` are rewritten
  atomically (a temporary file in the same folder, then ``os.replace``), so a run stopped at a
  time limit keeps every case it finished; ``meta["complete"]`` turns true only when the run
  ends.  Plots (``ratio_vs_*.png``) are drawn once, at the end.
* With ``cfg.cold`` the run uses empty coarsen and Numba caches (:func:`cold_caches`), so
  coarsen's transform and compile times are those of a first use.
* A Python-level peer whose predicted time per call at a size exceeds ``cfg.slow_limit_s`` is
  measured at the next smaller size, with the primal and the hand-written gradient at that size,
  and marked with ``reduced_size``.  The prediction scales the peer's time at the previous size by
  the growth of the hand-written gradient's time, measured before the peers run.  It is only a
  first guess (the hand-written gradient at a small size is overhead-bound, so it can guess
  low): a Python-level peer is also stopped as soon as one call passes the limit
  (``adapters.prepare``'s ``limit_s``, status ``too_slow``) and then measured at the smaller size.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

import apps
from apps.bench.measure import measure_group
from apps.bench.plots import make_plots
from apps.bench.progress import Progress
from apps.bench.report import render_markdown
from apps.bench.tools import PY_LEVEL, TOL, available_tools, first_line


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
    #: run with empty coarsen and Numba caches (a temporary ``$COARSEN_CACHE_DIR``), so the
    #: transform and compile times are those of a first use, not of cache loads
    cold: bool = False
    #: where the command line writes ``BENCHMARKS.md`` when the run completes (None: nowhere;
    #: :func:`run` itself writes only ``out``'s files)
    benchmarks: Path | None = None
    #: the bridges section (``apps.bench.bridges``): None runs it with every app (the main
    #: job's run), True or False always or never
    bridges: bool | None = None
    #: the arrays suite's step (``apps.bench.arrays``, size m, short timing, into
    #: ``out/arrays``): None runs it with every app (the main job's run; ``--no-arrays`` skips
    #: it), True or False always or never
    arrays: bool | None = None


def run(cfg: Config) -> dict:
    """Run the benchmark; returns the JSON-able results, written to ``cfg.out`` as they come."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    tools, skipped = available_tools(cfg.tools)
    result = {"meta": _meta(cfg, tools, [asdict(s) for s in skipped]), "cases": []}
    prog = Progress(len(cfg.apps) * len(cfg.sizes), cfg.progress)
    try:
        with cold_caches(cfg.cold and any(t.startswith("coarsen") for t in tools)):
            for name in cfg.apps:
                for case in run_app(name, cfg, tools, prog):
                    result["cases"].append(case)
                    write_results(result, out)
            if "ba" in cfg.apps and "coarsen" in tools:     # the Jacobian section
                from apps.bench.jacobians import measure_ba_jacobian
                prog.show("ba: Jacobians")
                result["jacobians"] = measure_ba_jacobian(cfg, tools)
                write_results(result, out)
            cases = [c for c in ("logreg", "gmm") if c in cfg.apps]
            if cases and "coarsen" in tools and "m" in cfg.sizes:     # the Hessian section
                from apps.bench.hessians import measure_hessians
                prog.show("Hessians")
                result["hessians"] = measure_hessians(cfg, tools, tuple(cases))
                write_results(result, out)
            if "coarsen" in tools and (cfg.bridges if cfg.bridges is not None
                                       else set(cfg.apps) == set(apps.APP_NAMES)):
                from apps.bench.bridges import measure_bridges     # the bridges section
                prog.show("bridges")
                result["bridges"] = measure_bridges(cfg)
                write_results(result, out)
            if "coarsen" in tools and (cfg.arrays if cfg.arrays is not None
                                       else set(cfg.apps) == set(apps.APP_NAMES)):
                from apps.bench.arrays import measure_section     # the arrays suite's step
                result["arrays"] = measure_section(cfg, show=prog.show)
                write_results(result, out)
    finally:
        prog.close()
    result["meta"]["complete"] = True
    write_results(result, out)
    if cfg.plots:
        result["plots"] = make_plots(result, out)
    return result


def run_app(name, cfg: Config, tools, prog):
    """Yield one case dict per size of app ``name`` (smallest first), stepping ``prog``."""
    try:
        mod = apps.load(name)
    except Exception as e:
        for size in cfg.sizes:
            prog.step()
            yield {"app": name, "size": size, "error": first_line(e), "tools": {}}
        return
    # per tool: (size, t_call, t_handwritten) at the last size it ran, to predict slowness
    history: dict = {}
    for size in sorted(cfg.sizes, key=apps.SIZES.index):
        case = {"app": name, "size": size, "dims": mod.SIZES[size],
                "tools": _measure_case(mod, name, size, cfg, tools, prog, history)}
        prog.step()
        yield case


def _measure_case(mod, name, size, cfg, tools, prog, history):
    label = f"{name}/{size}"
    main_tools, reduced = [], []
    if any(t in PY_LEVEL for t in tools):
        history["__hwquick__" + size] = _hw_quick_time(mod, size, cfg.seed)
    for tool in tools:
        if tool in PY_LEVEL and _predict_slow(tool, size, history, cfg):
            reduced.append(tool)
        else:
            main_tools.append(tool)
    # a Python-level peer is stopped once a call passes the limit, where it can still be
    # measured at a smaller size (a wrong prediction then costs seconds, not minutes)
    limited = [t for t in main_tools if t in PY_LEVEL] if _smaller(size) is not None else []
    res = measure_group(mod, size, main_tools, cfg, prog, label, limited=limited)
    _record(history, res, size)
    # a peer that turned out slow here is re-measured at a smaller size
    for tool in main_tools:
        r = res[tool]
        if tool in PY_LEVEL and _smaller(size) is not None and _slow(r, cfg):
            reduced.append(tool)
    red_size = _smaller(size)
    while reduced and red_size is not None:
        limited = reduced if _smaller(red_size) is not None else []
        sub = measure_group(mod, red_size, ["primal", "handwritten"] + reduced, cfg, prog,
                            f"{label} (peers @{red_size})", limited=limited)
        still = []
        for tool in reduced:
            r = dict(sub[tool])
            r["reduced_size"] = red_size
            for base in ("primal", "handwritten"):
                if sub[base].get("median_s") is not None:
                    r[f"{base}_median_s_at_reduced"] = sub[base]["median_s"]
            res[tool] = r
            if _slow(r, cfg) and _smaller(red_size) is not None:
                still.append(tool)
        reduced, red_size = still, _smaller(red_size)
    return {t: res[t] for t in tools if t in res}


@contextlib.contextmanager
def cold_caches(enabled: bool):
    """With ``enabled``, point ``$COARSEN_CACHE_DIR`` (inherited by the probe's children) at a
    new, empty folder for the duration, so coarsen's source cache and Numba's machine-code cache
    (kept beside the generated modules) start empty; the cost model's calibrated weights are
    copied in, so the plans stay those of this machine and no calibration is timed.  Yields the
    folder (None when not enabled); restores the variable and removes the folder afterwards."""
    if not enabled:
        yield None
        return
    from coarsen.lowering.cache import CACHE_ENV, cache_dir

    weights = None
    try:
        from coarsen.analysis import costmodel

        costmodel.machine_weights()           # calibrated (and stored) in the usual cache
        src = cache_dir() / costmodel.CACHE_FILE
        weights = (costmodel.CACHE_FILE, src.read_bytes()) if src.is_file() else None
    except Exception:
        weights = None
    before = os.environ.get(CACHE_ENV)
    tmp = tempfile.mkdtemp(prefix="coarsen-bench-cold-")
    try:
        os.environ[CACHE_ENV] = os.path.join(tmp, "cache")
        root = cache_dir()                    # created empty, with its CACHEDIR.TAG
        if weights is not None:
            (root / weights[0]).write_bytes(weights[1])
        yield root
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before
        shutil.rmtree(tmp, ignore_errors=True)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` in one step: readers see the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_results(result, out: Path) -> None:
    """``results.json`` (everything measured so far) and ``results.md``, both atomically."""
    write_atomic(out / "results.json", json.dumps(result, indent=1, default=_json_default))
    write_atomic(out / "results.md", render_markdown(result))


def _slow(r, cfg):
    """Whether a peer's result says it is too slow for its size: stopped at the limit, or a
    call (measured without a limit) past it."""
    return r["status"] == "too_slow" or (
        r["status"] == "ok" and r.get("prep", {}).get("second_call_s", 0.0) > cfg.slow_limit_s)


def _smaller(size):
    i = apps.SIZES.index(size)
    return apps.SIZES[i - 1] if i > 0 else None


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
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    return str(o)


def _cpu_model():
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _meta(cfg, tools, skipped):
    from importlib import metadata

    vers = {}
    for dist in ("numpy", "numba", "coarsen", "jax", "autograd", "torch", "tangent-ad"):
        try:
            vers[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            vers[dist] = None
    return {
        "python": platform.python_version(), "machine": platform.machine(),
        "processor": platform.processor(), "cpu_model": _cpu_model(), "cpus": os.cpu_count(),
        "versions": vers,
        "min_time_s": cfg.min_time, "samples": cfg.samples, "slow_limit_s": cfg.slow_limit_s,
        "quick": cfg.quick, "cold_caches": cfg.cold, "tools": list(tools), "requested_tools": list(cfg.tools),
        "skipped_peers": skipped, "apps": cfg.apps, "sizes": cfg.sizes,
        "cases_planned": len(cfg.apps) * len(cfg.sizes), "complete": False,
        "tolerance": TOL, "memory_method": "tracemalloc peak of one call (NumPy + Numba NRT + "
        "Python objects); JAX and PyTorch allocate outside it (n/a)",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
