"""The arrays suite (``python -m apps.bench --suite arrays``): coarsen against JAX, the Numba
primal and the NumPy primal on the kernels of :mod:`apps.arrays`.

Requires the kernels of :mod:`apps.arrays`; JAX, matplotlib and threadpoolctl are optional.
Guarantees, for every kernel at every size:

* Tools: ``coarsen`` (``coarsen.differentiate(objective, wrt=WRT)``, the default target),
  ``coarsen_fine`` (``coarsen=False``: fine-grained AD, as the apps harness builds it; the loops
  group only), ``jax`` (``jax.jit(jax.value_and_grad(jax_objective, argnums=WRT))`` in float64,
  the non-array arguments static), ``numba_primal`` (``numba.njit(objective)``, helpers jitted
  too, or the kernel's ``numba_objective`` where Numba cannot compile the objective as written:
  :func:`apps.arrays.numba_primal`) and ``numpy_primal`` (``objective`` itself).  coarsen
  is timed as ``g.value_and_grad(*args)``, like JAX's ``value_and_grad``.
* coarsen's first call runs in the crash probe's ``spawn``-ed child
  (:func:`apps.bench.probe.probe_crash`), which also measures the time to the first gradient in
  a fresh process (``differentiate``, code generation, Numba's compilation, one call; cache
  loads unless ``--cold``).  A crash is a ``CRASHED`` cell, a ``CoarsenError`` a ``REFUSED``
  cell, any other exception ``FAILED``, each with its message in a footnote; the run goes on.
* Checked before timing: coarsen's (and coarsen_fine's) gradient against JAX's,
  ``||g - g_jax|| / ||g_jax|| <= TOL`` over all parameters flattened, and its value against the
  NumPy primal's; a tool that disagrees is a ``MISMATCH`` cell and is not timed.  Without JAX the
  gradients are unchecked (said in the report).
* Timing: :func:`apps.bench.timing.calibrate` then :func:`apps.bench.timing.interleaved`
  (round-robin, the starting tool rotating); medians.
* ``results.json`` and ``results.md`` in ``out`` are rewritten after every (kernel, size);
  ``jax_over_coarsen_<size>.png`` is drawn at the end (matplotlib, Agg; none without it).

:func:`run_arrays` is the suite; :func:`render` its report; :func:`render_section` the section
the main harness's report gets (:func:`measure_section`, run by ``python -m apps.bench`` with
every app, skipped with ``--no-arrays``).
"""
from __future__ import annotations

import inspect
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import apps.arrays as karr
from apps.bench.report import Footnotes, geomean
from apps.bench.timing import calibrate, interleaved
from apps.bench.tools import failure_message, first_line

#: ||g - g_jax|| / ||g_jax|| above this is a mismatch
TOL = 1e-8
#: the columns, in order
TOOLS = ("coarsen", "coarsen_fine", "jax", "numba_primal", "numpy_primal")
#: the default output folder of ``--suite arrays``
DEFAULT_OUT = Path("bench_out") / "arrays"
#: environment variables that slow NumPy's BLAS on some machines: the benchmark command unsets
#: them before NumPy is imported (``apps/bench/__main__.py``)
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
#: set by ``apps/bench/__main__.py`` in the re-executed process: what it unset
UNSET_ENV = "COARSEN_BENCH_UNSET"


@dataclass
class ArraysConfig:
    kernels: list = field(default_factory=lambda: list(karr.KERNEL_NAMES))
    sizes: list = field(default_factory=lambda: ["s", "m"])
    out: Path = DEFAULT_OUT
    min_time: float = 0.2
    samples: int = 7
    case_budget_s: float = 10.0
    seed: int = 0
    quick: bool = False
    plots: bool = True
    progress: bool = True
    cold: bool = False
    #: fine-grained AD (``coarsen_fine``) for the loops group
    fine: bool = True
    #: the crash probe (a spawned child per coarsen tool and case); False: first call in-process
    probe: bool = True


# ---------------------------------------------------------------------- environment
def blas_info():
    """The BLAS libraries threadpoolctl sees in this process (NumPy's, and SciPy's when loaded):
    ``[{"internal_api", "architecture", "num_threads", "version", "library"}]``; ``None``
    without threadpoolctl."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    import numpy  # noqa: F401  (NumPy's BLAS must be loaded to be seen)
    try:
        import scipy.linalg  # noqa: F401  (Numba's @ and np.dot call SciPy's BLAS)
    except ImportError:
        pass
    out = []
    for d in threadpoolctl.threadpool_info():
        if d.get("user_api") != "blas":
            continue
        out.append({"internal_api": d.get("internal_api"), "architecture": d.get("architecture"),
                    "num_threads": d.get("num_threads"), "version": d.get("version"),
                    "library": os.path.basename(d.get("filepath") or "")})
    return out


def env_info():
    """What the benchmark command did to the BLAS environment, and the BLAS it got."""
    unset = os.environ.get(UNSET_ENV)
    still = {k: os.environ[k] for k in BLAS_ENV if k in os.environ}
    bench_set = os.environ.get("COARSEN_BENCH_SET")
    return {"unset": unset.split(";") if unset else [], "still_set": still, "blas": blas_info(),
            "set": [bench_set] if bench_set else []}


def render_env(env) -> list[str]:
    lines = []
    blas = (env or {}).get("blas")
    if blas is None:
        lines.append("BLAS: unknown (threadpoolctl is not installed: `pip install threadpoolctl`).")
    elif not blas:
        lines.append("BLAS: threadpoolctl sees no BLAS library.")
    else:
        lines.append("BLAS (threadpoolctl): " + "; ".join(
            f"{b['library']} ({b['internal_api']} {b['version']}, kernel {b['architecture']}, "
            f"{b['num_threads']} threads)" for b in blas) + ".")
    if env and env.get("unset"):
        lines.append("Unset for this run (they slow NumPy's BLAS): " + ", ".join(
            f"`{u}`" for u in env["unset"]) + ".")
    if env and env.get("set"):
        lines.append("Set for this run: " + ", ".join(f"`{u}`" for u in env["set"]) + " (the idle "
                     "OpenBLAS library's spinning threads slowed the other's calls 2-3x when tools "
                     "alternate: `apps/bench/__main__.py`).")
    if env and env.get("still_set"):
        lines.append("Still set (NumPy's BLAS may be slowed; run through `python -m apps.bench`): "
                     + ", ".join(f"`{k}={v}`" for k, v in env["still_set"].items()) + ".")
    return lines


# ---------------------------------------------------------------------- tools
def _wrt_positions(mod):
    names = list(inspect.signature(mod.objective).parameters)
    return [names.index(w) for w in mod.WRT]


def _flat(grads):
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    parts = [np.asarray(g, dtype=np.float64).reshape(-1) for g in grads]
    return np.concatenate(parts) if parts else np.zeros(0)


def grad_err(g, ref):
    """``||g - ref|| / ||ref||`` over all parameters flattened (inf on a shape mismatch or NaN)."""
    a, b = _flat(g), _flat(ref)
    if a.shape != b.shape:
        return float("inf")
    d = float(np.linalg.norm(a - b)) / max(float(np.linalg.norm(b)), 1e-300)
    return d if np.isfinite(d) else float("inf")


def jax_value_and_grad(mod, args):
    """``jit(value_and_grad(jax_objective))`` w.r.t. ``WRT`` in float64; the arguments that are
    not arrays and not differentiated are static.  Returns a zero-argument callable giving
    ``(value, grads)`` as NumPy values (after ``block_until_ready``)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    wpos = _wrt_positions(mod)
    static = tuple(i for i, a in enumerate(args) if i not in wpos and np.ndim(a) == 0
                   and not isinstance(a, np.ndarray))
    jargs = tuple(a if i in static else jnp.asarray(a, dtype=jnp.float64 if i in wpos else None)
                  for i, a in enumerate(args))
    vg = jax.jit(jax.value_and_grad(mod.jax_objective, argnums=tuple(wpos)),
                 static_argnums=static)
    return lambda: jax.block_until_ready(vg(*jargs))


def _classify(e):
    """(status, message) of a tool's exception."""
    try:
        from coarsen import CoarsenError
    except ImportError:                        # pragma: no cover
        CoarsenError = ()
    if CoarsenError and isinstance(e, CoarsenError):
        return "refused", f"CoarsenError: {first_line(e)}"
    return "failed", failure_message(e)


def _coarsen_tool(mod, args, fine, cfg, info):
    """The probe (a spawned child: crash safety and the time to the first gradient), then the
    gradient here; returns a callable giving ``(value, grads)``."""
    import coarsen
    from apps.bench.probe import Crashed, GradientProbe, probe_crash

    if cfg.probe:
        with tempfile.TemporaryDirectory(prefix="coarsen-arrays-probe-") as tmp:
            path = os.path.join(tmp, "timings.json")
            crash = probe_crash(GradientProbe(mod.objective, tuple(mod.WRT), coarse=not fine,
                                              args=tuple(args), timings_path=path))
            if crash:
                raise Crashed(crash)
            try:
                with open(path, encoding="utf-8") as f:
                    child = json.load(f)
                info["first_gradient_s"] = child.get("first_result_s")
                info["compile_cached"] = child.get("compile_cached")
                info["transform_cached"] = child.get("transform_cached")
                info["measured_in"] = "probe"
            except (OSError, ValueError):
                pass
    t0 = time.perf_counter()
    g = coarsen.differentiate(mod.objective, wrt=tuple(mod.WRT), coarsen=not fine)
    fn = lambda: g.value_and_grad(*args)        # noqa: E731
    fn()
    if "first_gradient_s" not in info:
        info["first_gradient_s"] = time.perf_counter() - t0
        info["measured_in"] = "parent"
    return fn


def _tools_for(name, cfg):
    tools = ["coarsen"]
    if cfg.fine and karr.GROUP_OF[name] == "loops":
        tools.append("coarsen_fine")
    return tools + ["jax", "numba_primal", "numpy_primal"]


def _jax_installed():
    import importlib.util
    try:
        return importlib.util.find_spec("jax") is not None
    except (ImportError, ValueError):
        return False


def measure_kernel(name, size, cfg):
    """One (kernel, size) case: ``{"kernel", "group", "size", "dims", "tools": {tool: result}}``
    where a result has ``status`` (ok, mismatch, refused, failed, crashed, missing) and, when
    ok, ``median_s``, ``min_s``, ``max_s``, ``reps``, ``samples``."""
    case = {"kernel": name, "group": karr.GROUP_OF[name], "size": size, "tools": {}}
    try:
        mod = karr.load(name)
        case["dims"] = mod.SIZES[size]
        args = tuple(mod.make_inputs(size, seed=cfg.seed))
    except Exception as e:
        case["error"] = failure_message(e)
        return case
    res = case["tools"]
    fns, outs = {}, {}
    for tool in _tools_for(name, cfg):
        info = {}
        try:
            if tool in ("coarsen", "coarsen_fine"):
                fn = _coarsen_tool(mod, args, tool == "coarsen_fine", cfg, info)
            elif tool == "jax":
                if not _jax_installed():
                    res[tool] = {"status": "missing", "message": "jax is not installed"}
                    continue
                t0 = time.perf_counter()
                fn = jax_value_and_grad(mod, args)
                fn()
                info["first_call_s"] = time.perf_counter() - t0
            elif tool == "numba_primal":
                t0 = time.perf_counter()
                p = karr.numba_primal(mod)
                fn = lambda p=p: p(*args)       # noqa: E731
                fn()
                info["first_call_s"] = time.perf_counter() - t0
            else:
                fn = lambda: mod.objective(*args)   # noqa: E731
            outs[tool] = fn()
        except Exception as e:
            st, msg = _classify(e)
            if type(e).__name__ == "Crashed":
                st = "crashed"
            res[tool] = {"status": st, "message": msg, **info}
            continue
        fns[tool] = fn
        res[tool] = {"status": "ok", **info}
    _check(case, outs, fns)
    if fns:
        reps = {t: calibrate(f, cfg.min_time)[0] for t, f in fns.items()}
        times = interleaved(fns, reps, cfg.samples, cfg.case_budget_s)
        for t, ts in times.items():
            ts = sorted(ts)
            res[t].update(median_s=ts[len(ts) // 2], min_s=ts[0], max_s=ts[-1], reps=reps[t],
                          samples=len(ts))
    case["tools"] = {t: res[t] for t in TOOLS if t in res}
    return case


def _check(case, outs, fns):
    """coarsen's gradients against JAX's, values against the NumPy primal; a mismatch is
    recorded and its tool is not timed."""
    res = case["tools"]
    ref_v = outs.get("numpy_primal")
    jax_out = outs.get("jax")
    if jax_out is not None:
        jax_out = (float(jax_out[0]), tuple(np.asarray(g) for g in jax_out[1]))
        case["checked_against"] = "jax"
    else:
        case["checked_against"] = None
    for tool in ("coarsen", "coarsen_fine"):
        if tool not in outs:
            continue
        v, g = outs[tool]
        problems = []
        if ref_v is not None:
            dv = abs(float(v) - float(ref_v)) / max(1.0, abs(float(ref_v)))
            res[tool]["value_err"] = dv
            if not dv <= TOL:
                problems.append(f"value differs from the NumPy primal's by {dv:.1e} (relative)")
        if jax_out is not None:
            err = grad_err(g, jax_out[1])
            res[tool]["err"] = err
            if not err <= TOL:
                problems.append(f"gradient differs from JAX's by {err:.1e} (relative to its norm)")
        if problems:
            res[tool]["status"] = "mismatch"
            res[tool]["message"] = "; ".join(problems)
            fns.pop(tool, None)
    for tool in ("numba_primal", "jax"):
        if tool in outs and ref_v is not None:
            v = outs[tool] if tool == "numba_primal" else jax_out[0]
            dv = abs(float(v) - float(ref_v)) / max(1.0, abs(float(ref_v)))
            if not dv <= 1e-6:
                res[tool]["status"] = "mismatch"
                res[tool]["message"] = f"value differs from the NumPy primal's by {dv:.1e}"
                fns.pop(tool, None)


# ---------------------------------------------------------------------- the suite
def _meta(cfg):
    from importlib import metadata

    vers = {}
    for dist in ("numpy", "numba", "coarsen", "jax", "jaxlib"):
        try:
            vers[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            vers[dist] = None
    return {"python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "versions": vers, "kernels": list(cfg.kernels),
            "sizes": list(cfg.sizes), "min_time_s": cfg.min_time, "samples": cfg.samples,
            "quick": cfg.quick, "cold_caches": cfg.cold, "tolerance": TOL,
            "env": env_info(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cases_planned": len(cfg.kernels) * len(cfg.sizes), "complete": False}


def write_results(result, out: Path) -> None:
    from apps.bench.runner import _json_default, write_atomic

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.json", json.dumps(result, indent=1, default=_json_default))
    write_atomic(out / "results.md", render(result))


def run_arrays(cfg: ArraysConfig, show=None) -> dict:
    """Every kernel at every size (smallest first per kernel); results written as they come.
    ``show(label)`` is called before each case (progress)."""
    from apps.bench.runner import cold_caches

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    kernels = [karr.canonical(k) for k in cfg.kernels]
    result = {"meta": _meta(cfg), "cases": []}
    with cold_caches(cfg.cold):
        for name in kernels:
            for size in sorted(cfg.sizes, key=karr.SIZES.index):
                if show is not None:
                    show(f"arrays: {name}/{size}")
                result["cases"].append(measure_kernel(name, size, cfg))
                write_results(result, out)
    result["meta"]["complete"] = True
    write_results(result, out)
    if cfg.plots:
        result["plots"] = make_plots(result, out)
    return result


# ---------------------------------------------------------------------- report
def _med(case, tool):
    r = case["tools"].get(tool, {})
    return r.get("median_s") if r.get("status") == "ok" else None


def _ratio(a, b):
    return a / b if a and b else None


def ratios(case):
    """``jax/coarsen`` (>1: coarsen faster), ``coarsen/numba``, ``coarsen/numpy``, and for the
    loops group ``coarsen/fine``."""
    c = _med(case, "coarsen")
    return {"jax/coarsen": _ratio(_med(case, "jax"), c),
            "coarsen/numba": _ratio(c, _med(case, "numba_primal")),
            "coarsen/numpy": _ratio(c, _med(case, "numpy_primal")),
            "coarsen/fine": _ratio(c, _med(case, "coarsen_fine"))}


def _cell(r, tool, notes):
    st = r.get("status")
    if st is None:
        return "-"
    if st == "ok":
        return f"{r['median_s'] * 1e6:.1f}" if r.get("median_s") is not None else "-"
    msg = r.get("message", "")
    return st.upper() + (" " + notes.ref(f"{tool}: {msg}") if msg else "")


def _fmt_ratio(v):
    return "-" if v is None else (f"{v:.3g}" if v < 10 else f"{v:.1f}")


def _dims(d):
    if isinstance(d, (list, tuple)):
        return "x".join(str(v) for v in d)
    return "" if d is None else str(d)


def render_tables(result, notes=None, heading="###") -> list[str]:
    """One table per group present: times (us), ratios, time to first gradient, geomeans."""
    notes = notes if notes is not None else Footnotes()
    lines = []
    cases = result.get("cases", [])
    for group in karr.GROUPS:
        cs = [c for c in cases if c.get("group") == group]
        if not cs:
            continue
        fine = group == "loops" and any("coarsen_fine" in c["tools"] for c in cs)
        tools = [t for t in TOOLS if t != "coarsen_fine" or fine]
        title = ("whole-array NumPy kernels" if group == "arrays"
                 else "loop programs (explicit scalar loops)")
        lines += [f"{heading} {group}: {title}", ""]
        head = ["kernel", "size"] + [f"{t} (us)" for t in tools] + [
            "JAX / coarsen", "coarsen / numba primal", "coarsen / numpy primal"]
        if fine:
            head.append("coarsen / fine")
        head.append("first gradient (s)")
        lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        cols = {k: [] for k in ("jax/coarsen", "coarsen/numba", "coarsen/numpy", "coarsen/fine")}
        for c in cs:
            if c.get("error"):
                lines.append(f"| {c['kernel']} | {c['size']} | FAILED {notes.ref(c['error'])} |"
                             + " |" * (len(head) - 3))
                continue
            rs = ratios(c)
            for k, v in rs.items():
                cols[k].append(v)
            row = [c["kernel"], f"{c['size']} ({_dims(c.get('dims'))})"]
            row += [_cell(c["tools"].get(t, {}), t, notes) for t in tools]
            row += [_fmt_ratio(rs["jax/coarsen"]), _fmt_ratio(rs["coarsen/numba"]),
                    _fmt_ratio(rs["coarsen/numpy"])]
            if fine:
                row.append(_fmt_ratio(rs["coarsen/fine"]))
            fg = c["tools"].get("coarsen", {}).get("first_gradient_s")
            cached = c["tools"].get("coarsen", {}).get("compile_cached")
            row.append("-" if fg is None else f"{fg:.2f}" + (" (cached)" if cached else ""))
            lines.append("| " + " | ".join(row) + " |")
        gm = ["**geomean**", ""] + [""] * len(tools) + [
            _fmt_ratio(geomean(cols["jax/coarsen"])), _fmt_ratio(geomean(cols["coarsen/numba"])),
            _fmt_ratio(geomean(cols["coarsen/numpy"]))]
        if fine:
            gm.append(_fmt_ratio(geomean(cols["coarsen/fine"])))
        gm.append("")
        lines += ["| " + " | ".join(gm) + " |", ""]
        lines += notes.flush()
    return lines


def _protocol(meta):
    checked = ("coarsen's gradients checked against JAX's (||g - g_jax|| / ||g_jax|| <= "
               f"{meta['tolerance']:g}) and its value against the NumPy primal's before timing; "
               "a MISMATCH is not timed")
    return (f"Times in microseconds per call, medians of up to {meta['samples']} interleaved "
            f"round-robin samples of batches of at least {meta['min_time_s']:g} s; coarsen and "
            "JAX timed as value and gradient (`g.value_and_grad`, `jit(value_and_grad)`, "
            f"float64). {checked}. Ratios: JAX / coarsen > 1 means coarsen is faster; coarsen / "
            "primal is the gradient's cost over the primal (Numba `njit(objective)`, softmax's "
            "`numba_objective` since Numba's `np.max` takes no axis; NumPy `objective`). First "
            "gradient: `differentiate` to the first gradient in a fresh process (code generation "
            "and Numba compilation, or their on-disk cache loads: "
            "\"cached\"). REFUSED: coarsen raised CoarsenError; the message is in the footnote.")


def render(result, title="# coarsen arrays suite") -> str:
    """The suite's report (``results.md``)."""
    meta = result["meta"]
    lines = [title, ""] if title else []
    lines.append(f"{meta['date']}; Python {meta['python']} on {meta['machine']} "
                 f"({meta['cpus']} CPUs); " + ", ".join(f"{k} {v}" for k, v in
                                                        meta["versions"].items() if v))
    lines.append("")
    lines += render_env(meta.get("env")) + [""]
    if not meta.get("complete", True):
        lines += [f"Partial results: {len(result['cases'])} of {meta.get('cases_planned', '?')} "
                  "(kernel, size) cases so far.", ""]
    lines += [_protocol(meta), ""]
    lines += render_tables(result)
    return "\n".join(lines)


def render_section(result) -> list[str]:
    """The main report's section (markdown lines); nothing without results."""
    if not result:
        return []
    lines = ["## Arrays suite: whole-array NumPy kernels and loop programs", ""]
    lines += render_env(result["meta"].get("env")) + [""]
    lines += [_protocol(result["meta"]) + " `python -m apps.bench --suite arrays` runs it "
              "alone; `apps/README.md` lists the kernels.", ""]
    return lines + render_tables(result, heading="###")


def make_plots(result, out: Path):
    """``jax_over_coarsen_<size>.png``: JAX time / coarsen time per kernel (log scale, the
    loops group hatched); ``[]`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    files = []
    for size in karr.SIZES:
        cs = [c for c in result["cases"] if c["size"] == size]
        if not cs:
            continue
        vals = [ratios(c)["jax/coarsen"] for c in cs]
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(cs) + 2), 4.5))
        xs = [i for i, v in enumerate(vals) if v is not None]
        ys = [vals[i] for i in xs]
        bars = ax.bar(xs, ys, 0.7, color=["C2" if v >= 1 else "C3" for v in ys])
        for i, b in zip(xs, bars):
            if cs[i]["group"] == "loops":
                b.set_hatch("//")
        for i, v in enumerate(vals):
            if v is None:
                ax.text(i, 1.0, "n/a", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_xticks(range(len(cs)))
        ax.set_xticklabels([c["kernel"] for c in cs], rotation=45, ha="right", fontsize=8)
        if ys:
            ax.set_yscale("log")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("JAX time / coarsen time (log; > 1: coarsen faster)")
        ax.set_title(f"arrays suite, size {size} (hatched: loop programs)")
        fig.tight_layout()
        path = Path(out) / f"jax_over_coarsen_{size}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(str(path))
    return files


def measure_section(cfg, show=None) -> dict:
    """The main harness's arrays step: every kernel at size m with short timing, written to
    ``<out>/arrays``; returns the suite's result (the report's section)."""
    acfg = ArraysConfig(sizes=["m"], out=Path(cfg.out) / "arrays", min_time=min(cfg.min_time, 0.05),
                        samples=min(cfg.samples, 3), case_budget_s=min(cfg.case_budget_s, 2.0),
                        seed=cfg.seed, quick=True, plots=cfg.plots, cold=False)
    return run_arrays(acfg, show=show)
