"""``python -m paper_repro [--quick] [--only a,b,c,d,e] [--apps gmm,ba]``.

Writes ``paper_repro/REPORT.md``, ``paper_repro/results.json`` and the PNG figures in
``paper_repro/figures/`` (next to this file, or under ``--out``).  Progress goes to stderr.

Parts: ``a`` and ``b`` (coarse vs fine speedup, tapes and peak memory on the apps and on our
small programs), ``c`` (expression swell), ``d`` (closed-form loops against the trip count),
``e`` (segment size).  ``--quick`` (a few minutes on 2 cores): fewer and shorter samples, chain
lengths up to 16, the swell sweep to L = 24.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


def _log(msg):
    sys.stderr.write(f"[paper_repro {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _versions():
    from importlib import metadata

    out = {}
    for d in ("coarsen", "numpy", "numba", "sympy"):
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def _loadavg():
    """The 1-minute load average (None where the platform has none): timings are noisier when
    it is near or above the number of CPUs."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m paper_repro", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few minutes on 2 cores")
    ap.add_argument("--only", default="a,b,c,d,e", help="comma-separated parts (a,b,c,d,e)")
    ap.add_argument("--apps", default=None, help="comma-separated apps for (a)/(b)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    parts = {p.strip() for p in a.only.split(",") if p.strip()}

    from . import experiments as ex
    from . import report

    st = ex.Settings.make(a.quick)
    t_start = time.perf_counter()
    load_start = _loadavg()
    res: dict = {}
    errors: dict = {}

    def part(key, fn):
        try:
            res[key] = fn()
        except Exception as e:  # one failing part must not lose the others
            import traceback
            errors[key] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    if parts & {"a", "b"}:
        _log("(a)+(b) applications, coarse vs fine (size m)")
        apps_sel = [x for x in a.apps.split(",")] if a.apps else None
        part("apps", lambda: ex.apps_coarse_vs_fine(st, "m", apps_sel,
                                                    progress=not a.no_progress))
        _log("(a)+(b) our small programs")
        part("kernels", lambda: ex.kernels_coarse_vs_fine(st, "m"))
    if "c" in parts:
        _log("(c) expression swell")
        part("swell", lambda: ex.swell(L_max=24 if a.quick else 40,
                                       naive_max_ops=100_000,
                                       report_Ls=(1, 2, 4, 8) if a.quick
                                       else (1, 2, 4, 8, 16, 32)))
    if "d" in parts:
        _log("(d) closed-form loops")
        part("closed_forms", lambda: ex.closed_forms(st))
    if "e" in parts:
        _log("(e) segment size")
        part("segment_size", lambda: ex.segment_size(st, Ls=(1, 2, 4, 8, 16) if a.quick
                                                     else (1, 2, 4, 8, 16, 32),
                                                     n=5000 if a.quick else 20000))
    _log("bug reproducers")
    part("bugs", ex.bugs)
    meta = {"quick": a.quick, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "versions": _versions(),
            "elapsed_s": time.perf_counter() - t_start, "parts": sorted(parts),
            "loadavg_start": load_start, "loadavg_end": _loadavg(),
            "errors": errors}
    a.out.mkdir(parents=True, exist_ok=True)
    files = report.make_figures(res, a.out / "figures")
    md = report.render(res, files, meta)
    (a.out / "REPORT.md").write_text(md)
    (a.out / "results.json").write_text(json.dumps({"meta": meta, "results": res}, indent=1,
                                                   default=str))
    print(md)
    _log(f"wrote {a.out / 'REPORT.md'}, results.json and {len(files)} figures in "
         f"{time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
