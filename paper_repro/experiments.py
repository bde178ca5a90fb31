"""The measurements behind each claim; every function returns plain data (JSON-able dicts).

Protocol for every timing: each gradient is prepared and called once untimed (transformation,
Numba compilation); gradients are checked against each other and against a reference before
anything is timed; repeats are calibrated per gradient (doubling until a batch takes
``min_time``); samples are interleaved round-robin across the gradients being compared, in the
same process, and the median per call is reported (min and max kept in the JSON).  Generated
gradients run in a spawned child first (:func:`apps.bench.probe_crash`), so a segfault in
generated code is recorded instead of ending the run.

coarsen is used through its public API only: ``coarsen.differentiate``, ``g(*args)``,
``g.tape_bytes``, ``g.report(*args)`` and ``coarsen.symbolic``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

import coarsen
from coarsen.symbolic import Budget, BudgetExceeded, derivatives, naive_derivative_ops

from apps import bench
from apps._common import adbench_err

from . import chains, programs

TOL = 1e-8


@dataclass
class Settings:
    quick: bool = False
    min_time: float = 0.2
    samples: int = 7
    budget_s: float = 10.0

    @classmethod
    def make(cls, quick):
        if quick:
            return cls(quick=True, min_time=0.02, samples=3, budget_s=1.5)
        return cls()


def _flat(g):
    parts = g if isinstance(g, tuple) else (g,)
    return np.concatenate([np.ravel(np.asarray(p, dtype=float)) for p in parts])


def time_interleaved(fns: dict, st: Settings) -> dict:
    """{name: {median_s, min_s, max_s, samples}} from interleaved, calibrated samples."""
    if not fns:
        return {}
    reps = {n: bench.calibrate(f, st.min_time)[0] for n, f in fns.items()}
    times = bench.interleaved(fns, reps, st.samples, st.budget_s)
    out = {}
    for n, ts in times.items():
        a = np.array(ts)
        out[n] = {"median_s": float(np.median(a)), "min_s": float(a.min()),
                  "max_s": float(a.max()), "samples": len(ts), "reps": reps[n]}
    return out


def central_differences(fn, args, wrt_positions, h=1e-6):
    """Central differences of a scalar function (reference for our own small programs)."""
    out = []
    for p in wrt_positions:
        a = args[p]
        if isinstance(a, np.ndarray):
            g = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                up, dn = a.copy(), a.copy()
                up[idx] += h
                dn[idx] -= h
                g[idx] = (fn(*_with(args, p, up)) - fn(*_with(args, p, dn))) / (2 * h)
            out.append(g)
        else:
            out.append((fn(*_with(args, p, a + h)) - fn(*_with(args, p, a - h))) / (2 * h))
    return tuple(out)


def _with(args, p, v):
    a = list(args)
    a[p] = v
    return tuple(a)


def _prepare_gradient(fn, args, *, coarse, wrt=None, plan="auto"):
    """Differentiate, probe for crashes in a child, call once; returns (g, grad, info).

    ``plan`` is coarsen's per-segment strategy (``"auto"``: the cost model; or one forced on
    every segment).  For a coarse gradient ``info["strategies"]`` is the strategy of each
    segment of interest, from ``g.report(*args)`` (:func:`strategies_of`)."""
    info = {}
    t0 = time.perf_counter()
    g = coarsen.differentiate(fn, wrt=wrt, coarsen=coarse,
                              **({} if plan == "auto" else {"plan": plan}))
    g.source_for(*args)
    info["transform_s"] = time.perf_counter() - t0
    crash = bench.probe_crash(bench.GradientProbe(fn, wrt, coarse, tuple(args), plan=plan))
    if crash:
        raise bench.Crashed(crash)
    t0 = time.perf_counter()
    grad = g(*args)
    info["first_call_s"] = time.perf_counter() - t0
    info["tape_bytes"] = g.tape_bytes
    if coarse:
        info["strategies"] = strategies_of(g, args)
    return g, grad, info


#: the order strategies are listed in (``g.report()``'s ``"strategy"`` values)
STRATEGIES = ("closed form", "forward mode", "preaccumulate", "cut", "recompute", "fine")


def quiet_report(g, args):
    """``g.report(*args)`` without its printout: the list of per-segment dicts."""
    import io

    return list(g.report(*args, file=io.StringIO()))


def strategies_of(g, args):
    """The ``"strategy"`` of each segment of interest of ``g`` at ``args``, in plan order."""
    return [s.get("strategy") for s in quiet_report(g, args)]


def strategy_mix(strategies):
    """Counts per strategy, ordered as :data:`STRATEGIES` (unknown names last):
    ``{"preaccumulate": 2, "cut": 1}``; empty for a function without segments."""
    counts: dict = {}
    for s in strategies:
        counts[str(s)] = counts.get(str(s), 0) + 1
    order = {k: i for i, k in enumerate(STRATEGIES)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def app_strategies(name, size="m", seed=0):
    """The auto plan's strategies of app ``name`` at ``size``: the gradient the harness builds
    (``coarsen.differentiate(mod.objective, wrt=tuple(mod.WRT))``, from coarsen's cache) and
    its report at the harness's inputs."""
    import apps as apps_pkg

    mod = apps_pkg.load(name)
    args = mod.make_inputs(size, seed=seed)
    g = coarsen.differentiate(mod.objective, wrt=tuple(mod.WRT))
    return strategies_of(g, args)


def _err_text(e):
    return f"{type(e).__name__}: {bench.first_line(e)}"


# ----------------------------------------------------------------------------- (a) + (b), apps

def apps_coarse_vs_fine(st: Settings, size="m", app_names=None, progress=True):
    """coarse vs fine (and the hand-written gradient, and the Numba primal) on the apps,
    through the benchmark harness (same protocol, gradients checked before timing)."""
    import tempfile
    from pathlib import Path

    import apps as apps_pkg

    cfg = bench.Config(apps=list(app_names or apps_pkg.APP_NAMES), sizes=[size],
                       tools=["primal", "coarsen", "coarsen_fine", "handwritten"],
                       out=Path(tempfile.mkdtemp(prefix="paper_repro_bench_")),
                       min_time=st.min_time, samples=st.samples, case_budget_s=st.budget_s,
                       slow_limit_s=1e9, memory=True, plots=False, quick=st.quick,
                       progress=progress)
    result = bench.run(cfg)
    rows = []
    for c in result["cases"]:
        t = c["tools"]
        row = {"app": c["app"], "size": c["size"], "dims": c.get("dims")}
        for tool in ("primal", "coarsen", "coarsen_fine", "handwritten"):
            r = t.get(tool, {})
            row[tool] = {k: r.get(k) for k in ("status", "message", "median_s", "min_s", "max_s",
                                               "tape_bytes", "peak_bytes", "err", "ref")}
            row[tool]["transform_s"] = r.get("prep", {}).get("transform_s")
        # the strategy mix of the auto plan (the "coarsen" tool's gradient)
        try:
            row["strategies"] = app_strategies(c["app"], c["size"], cfg.seed)
            row["strategy_mix"] = strategy_mix(row["strategies"])
        except Exception as e:
            row["strategy_error"] = _err_text(e)
        rows.append(row)
    return {"rows": rows, "meta": result["meta"]}


# ----------------------------------------------------------------------------- (a) + (b), kernels

def kernels_coarse_vs_fine(st: Settings, size="m"):
    """coarse vs fine on our own small programs (paper_repro/programs.py), each checked against
    central differences at a small size first."""
    rows = []
    for name, (fn, sizes, wrt_pos) in programs.kernels().items():
        row = {"kernel": name, "size": size, "wrt": list(wrt_pos)}
        try:
            small = sizes["s"]
            big = sizes[size]
            ref = _flat(central_differences(fn, small, wrt_pos))
            ok = {}
            for mode, coarse in (("coarse", True), ("fine", False)):
                g = coarsen.differentiate(fn, wrt=tuple(wrt_pos), coarsen=coarse)
                gs = _flat(g(*small))
                err = float(np.max(np.abs(gs - ref)) / max(1.0, np.max(np.abs(ref))))
                row[f"{mode}_fd_err"] = err
                ok[mode] = err < 1e-5
            fns, info = {}, {}
            grads = {}
            for mode, coarse in (("coarse", True), ("fine", False)):
                try:
                    g, grad, inf = _prepare_gradient(fn, big, coarse=coarse, wrt=tuple(wrt_pos))
                except Exception as e:
                    row[mode] = {"status": "failed", "message": _err_text(e)}
                    continue
                grads[mode] = grad
                info[mode] = inf
                fns[mode] = (lambda g=g: g(*big))
                if coarse:
                    row["strategies"] = inf["strategies"]
                    row["strategy_mix"] = strategy_mix(inf["strategies"])
            if "coarse" in grads and "fine" in grads:
                row["coarse_vs_fine_err"] = float(adbench_err(grads["coarse"], grads["fine"]))
            for mode in list(fns):
                if not ok[mode]:
                    row[mode] = {"status": "wrong gradient",
                                 "message": f"differs from central differences "
                                            f"(rel. err {row[f'{mode}_fd_err']:.2g})"}
                    del fns[mode]
            timed = time_interleaved(fns, st) if fns else {}
            for mode in ("coarse", "fine"):
                if mode in timed:
                    row[mode] = {"status": "ok", **timed[mode], **info[mode]}
                    row[mode]["peak_bytes"] = bench.peak_memory(fns[mode])
                elif mode not in row:
                    row[mode] = {"status": "failed", "message": "not timed"}
                if mode in info:
                    row[mode].setdefault("tape_bytes", info[mode]["tape_bytes"])
        except Exception as e:
            row["error"] = _err_text(e)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- (c) swell

def swell(L_max=40, naive_max_ops=100_000, naive_seconds=20.0, report_Ls=(1, 2, 4, 8, 16, 32)):
    """Derivative op counts of the chain x = sin(x)*x + cos(x) repeated L times.

    ``reuse``: ``coarsen.symbolic.derivatives(...).ops_after`` (value + derivative after
    reverse accumulation along the DAG and CSE), and its ``ops_before`` (the estimate of
    fine-grained AD of the same statements); ``naive``: ``naive_derivative_ops`` (full inlining,
    no CSE) until it raises BudgetExceeded (then ``None`` from there on, with the reason);
    ``report``: the ``ops_after`` that ``g.report()`` shows for a generated ``chain_scalar``."""
    rows = []
    exploded = None
    for L in range(1, L_max + 1):
        asg, ins, outs = chains.chain_assignments(L)
        t0 = time.perf_counter()
        jac = derivatives(asg, ins, outs, Budget(max_ops=10 ** 7, seconds=120.0))
        t_reuse = time.perf_counter() - t0
        row = {"L": L, "reuse_ops": jac.ops_after, "fine_ops_estimate": jac.ops_before,
               "reuse_s": t_reuse, "naive_ops": None, "naive_s": None}
        if exploded is None:
            t0 = time.perf_counter()
            try:
                row["naive_ops"] = naive_derivative_ops(
                    asg, ins, outs, Budget(max_ops=naive_max_ops, seconds=naive_seconds))
            except BudgetExceeded as e:
                exploded = {"L": L, "reason": e.reason}
            row["naive_s"] = time.perf_counter() - t0
        rows.append(row)
    report_rows = []
    for L in report_Ls:
        if L > L_max:
            continue
        mod = chains.chain_module(L)
        g = coarsen.differentiate(mod.chain_scalar)
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            rep = g.report(0.3)
        segs = list(rep)
        val, grad = g.value_and_grad(0.3)
        rv, rg = chains.chain_value_and_grad(L, 0.3)
        report_rows.append({
            "L": L, "segments": len(segs),
            "ops_after": sum(s["ops_after"] or 0 for s in segs),
            "ops_before": sum(s["ops_before"] or 0 for s in segs),
            "fallbacks": [s["fallback"] for s in segs if s["fallback"]],
            "transform_s": rep.transform_seconds,
            "grad_err": abs(grad[0] - rg) / max(1.0, abs(rg)),
        })
    return {"rows": rows, "exploded": exploded, "naive_max_ops": naive_max_ops,
            "report_rows": report_rows}


# ----------------------------------------------------------------------------- (d) closed forms

def closed_forms(st: Settings, ns=(10 ** 2, 10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)):
    """Gradient time against the trip count for ``lin_sum`` (s += a*i) and ``quad_sum``
    (s += a*i*i + b*i): coarse (closed form) against fine (one adjoint step per trip)."""
    cases = {
        "lin_sum": (programs.lin_sum, lambda n: (0.5, n), ("a",),
                    lambda n: (n * (n - 1) / 2.0,)),
        "quad_sum": (programs.quad_sum, lambda n: (0.5, 1.5, n), ("a", "b"),
                     lambda n: ((n - 1) * n * (2 * n - 1) / 6.0, n * (n - 1) / 2.0)),
    }
    out = {}
    for name, (fn, mk, wrt, exact) in cases.items():
        gs = {mode: coarsen.differentiate(fn, wrt=wrt, coarsen=(mode == "coarse"))
              for mode in ("coarse", "fine")}
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            rep = list(gs["coarse"].report(*mk(10)))
        rows = []
        for n in ns:
            args = mk(n)
            row = {"n": n}
            fns = {}
            for mode, g in gs.items():
                crash = bench.probe_crash(bench.GradientProbe(fn, wrt, mode == "coarse",
                                                              tuple(args)))
                if crash:
                    row[mode] = {"status": "crashed", "message": crash}
                    continue
                grad = g(*args)
                err = adbench_err(grad, exact(n))
                row[mode] = {"status": "ok" if err <= TOL else "wrong gradient", "err": err,
                             "tape_bytes": g.tape_bytes}
                if err <= TOL:
                    fns[mode] = (lambda g=g: g(*args))
            for mode, t in time_interleaved(fns, st).items():
                row[mode].update(t)
            rows.append(row)
        out[name] = {"rows": rows, "closed_form": [s.get("closed_form") for s in rep],
                     "kinds": [s.get("kind") for s in rep]}
    return out


# ----------------------------------------------------------------------------- (e) segment size

#: the variants of (e): row key -> (coarsen=, plan=)
SEGMENT_VARIANTS = {"coarse": (True, "auto"), "fine": (False, "auto"),
                    "recompute": (True, "recompute"), "cut": (True, "cut"),
                    "preaccumulate": (True, "preaccumulate")}


def segment_size(st: Settings, Ls=(1, 2, 4, 8, 16, 32), n=20000):
    """Chains of increasing length inside a loop (``chain_loop``): the auto plan (``coarse``),
    fine-grained AD (``fine``) and the three forced coarse plans (``recompute``, ``cut``,
    ``preaccumulate``), each checked against forward mode and then timed interleaved in the
    same run; op counts of the segment (report), the auto plan's choice and cost estimates,
    symbolic-stage time (the report's transform time, and ``derivatives`` alone), and tapes.

    Per row: ``auto_strategy`` (the strategy the cost model chose for the chain's segment),
    ``costs`` (its estimates), ``speedup`` (variant -> fine time / variant time) and, per
    variant, ``strategies`` (what its report says each segment does)."""
    import sys

    rng = np.random.default_rng(3)
    xs = rng.uniform(-1.0, 1.0, n)
    rows = []
    for L in Ls:
        mod = chains.chain_module(L)
        # the crash probe's spawned child unpickles ``chain_loop`` by module name: it inherits
        # sys.path, so the folder of the generated modules makes them importable there
        folder = str(chains._tmpdir())
        if folder not in sys.path:
            sys.path.append(folder)
        row = {"L": L, "n": n}
        asg, ins, outs = chains.chain_assignments(L)
        t0 = time.perf_counter()
        derivatives(asg, ins, outs, Budget(max_ops=10 ** 7, seconds=120.0))
        row["symbolic_s"] = time.perf_counter() - t0
        fns = {}
        grads = {}
        for mode, (coarse, plan) in SEGMENT_VARIANTS.items():
            try:
                g, grad, info = _prepare_gradient(mod.chain_loop, (xs,), coarse=coarse,
                                                  plan=plan)
            except Exception as e:
                row[mode] = {"status": "failed", "message": _err_text(e)}
                continue
            row[mode] = {"status": "ok", "plan": plan if coarse else "coarsen=False", **info}
            grads[mode] = grad
            fns[mode] = (lambda g=g: g(xs))
            if mode == "coarse":
                segs = quiet_report(g, (xs,))
                row["segments"] = len(segs)
                row["ops_after"] = sum(s["ops_after"] or 0 for s in segs)
                row["ops_before"] = sum(s["ops_before"] or 0 for s in segs)
                row["fallbacks"] = [s["fallback"] for s in segs if s["fallback"]]
                chosen = [s.get("strategy") for s in segs]
                row["auto_strategy"] = chosen[0] if len(set(chosen)) == 1 else ", ".join(
                    str(c) for c in chosen)
                row["costs"] = segs[0].get("costs") if len(segs) == 1 else [
                    s.get("costs") for s in segs]
        # reference: the chain's derivative per element by forward mode
        ref = np.array([chains.chain_value_and_grad(L, float(v))[1] for v in xs[:200]])
        for mode in list(fns):
            # relative to the largest derivative: the chain's derivatives shrink fast with L
            abs_err = float(np.max(np.abs(_flat(grads[mode])[:200] - ref)))
            scale = float(np.max(np.abs(ref)))
            err = abs_err / scale if scale > 1e-200 else abs_err
            row[mode]["ref_err"] = err
            if not (err <= 1e-8 or abs_err <= 1e-200):
                row[mode]["status"] = "wrong gradient"
                del fns[mode]
        for mode, t in time_interleaved(fns, st).items():
            row[mode].update(t)
            row[mode]["peak_bytes"] = bench.peak_memory(fns[mode])
        tf = row.get("fine", {}).get("median_s")
        row["speedup"] = {mode: ratio(tf, row[mode].get("median_s"))
                          for mode in SEGMENT_VARIANTS if mode != "fine" and mode in row}
        rows.append(row)
    return rows


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def geomean(vals):
    vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))


# ----------------------------------------------------------------------------- bugs

def bugs():
    """Re-check the reproducers of :mod:`paper_repro.bug_repros` (see its docstring)."""
    import copy

    from . import bug_repros

    rows = []
    for name, fn, args, wrt, what in bug_repros.CASES:
        row = {"name": name, "what": what}
        fresh = lambda: copy.deepcopy(args)  # noqa: E731  (q is written in place)
        try:
            ref = _flat(central_differences(lambda *a: fn(*copy.deepcopy(a)), fresh(), wrt))
        except Exception as e:
            ref = None
            row["ref_error"] = _err_text(e)
        for mode, coarse in (("coarse", True), ("fine", False)):
            try:
                g = coarsen.differentiate(fn, wrt=tuple(wrt), coarsen=coarse)
                crash = bench.probe_crash(bench.GradientProbe(fn, tuple(wrt), coarse,
                                                              tuple(fresh())))
                if crash:
                    row[mode] = "crashed (" + crash.split(" in ")[0].replace("crashed with ", "") + ")"
                    continue
                got = _flat(g(*fresh()))
                err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
                row[mode] = "ok" if err < 1e-6 else f"WRONG (rel. err {err:.2g})"
            except Exception as e:
                row[mode] = "error: " + _err_text(e)[:80]
        rows.append(row)
    return rows
