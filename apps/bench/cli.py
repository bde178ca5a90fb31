"""The command line: ``python -m apps.bench [--quick] [--apps a,b] [--sizes s,m,l] [--tools ...]
[--out DIR] [--benchmarks PATH] [--no-arrays]``, and ``python -m apps.bench --suite arrays
[--quick] [--kernels a,b] [--sizes s,m] [--out DIR]`` (the arrays suite alone:
:mod:`apps.bench.arrays`; default ``--out`` ``bench_out/arrays``, sizes m with ``--quick``, else
s,m; it writes no ``BENCHMARKS.md``).

Requires the apps of :mod:`apps`.  Guarantees: validates every name before running; always runs
the primal and the hand-written gradient (the ratios need them); prints the report once, ending
on the coarse-vs-fine summary (the skipped peers, with the command that installs each, are a
section of the report), then one line naming the skipped peers and one saying where the files
went.  Progress goes to stderr.  Returns 0.

When the run completes, the report (summary first, under a heading with the command, date,
machine and mode) is also written to ``BENCHMARKS.md`` (:func:`benchmarks_path`): at the
repository root for a run of every app into the default ``--out``, the main job's
``python3 -m apps.bench --quick`` among them, so that the repository's table is the last such
run's; in the ``--out`` folder otherwise, so that a run of a few apps, or into another folder
(the tests' runs), never replaces it.  ``--benchmarks PATH`` names the file, ``--benchmarks
none`` writes none.  A run that is stopped leaves the file as it was.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import apps
import apps.arrays
from apps.bench.report import render_benchmarks, render_markdown
from apps.bench.runner import Config, run, write_atomic
from apps.bench.tools import ALL_TOOLS, DEFAULT_TOOLS

#: the default ``--out``
DEFAULT_OUT = Path("bench_out")
_ROOT = Path(__file__).resolve().parents[2]
#: the repository's benchmark tables, written by a run of every app into the default ``--out``
REPO_BENCHMARKS = (_ROOT if (_ROOT / "pyproject.toml").is_file() else Path()) / "BENCHMARKS.md"


def _split(s):
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_config(argv=None) -> Config:
    from apps import bench

    ap = argparse.ArgumentParser(prog="python -m apps.bench",
                                 description=bench.__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=("apps", "arrays"), default="apps",
                    help="apps (default: the applications, then the sections, the arrays suite "
                    "at size m among them) or arrays (the arrays suite alone)")
    ap.add_argument("--kernels", type=_split, default=None,
                    help="--suite arrays: comma-separated kernels (default: all): "
                    + ",".join(apps.arrays.KERNEL_NAMES))
    ap.add_argument("--no-arrays", action="store_true",
                    help="skip the arrays suite's step of a run of every app")
    ap.add_argument("--quick", action="store_true",
                    help="sizes s,m; 0.05 s batches, 3 samples: about 5 minutes on 2 cores")
    ap.add_argument("--apps", type=_split, default=list(apps.APP_NAMES),
                    help="comma-separated apps (default: all): " + ",".join(apps.APP_NAMES))
    ap.add_argument("--sizes", type=_split, default=None, help="comma-separated from s,m,l")
    ap.add_argument("--tools", type=_split, default=list(DEFAULT_TOOLS),
                    help="comma-separated from " + ",".join(ALL_TOOLS)
                    + " (peers that are not installed are skipped)")
    ap.add_argument("--out", type=Path, default=None,
                    help="output folder (default: bench_out; bench_out/arrays with --suite arrays)")
    ap.add_argument("--benchmarks", default=None,
                    help="where to write BENCHMARKS.md ('none': nowhere); default: the "
                    "repository root for a run of every app into the default --out, else --out")
    ap.add_argument("--min-time", type=float, default=None, help="seconds per calibrated batch")
    ap.add_argument("--samples", type=int, default=None, help="interleaved samples per tool")
    ap.add_argument("--slow-limit", type=float, default=None,
                    help="seconds per call above which a Python-level peer runs at a smaller size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--cold", action="store_true",
                    help="empty coarsen and Numba caches for this run (a temporary "
                    "COARSEN_CACHE_DIR): transform and compile times of a first use")
    a = ap.parse_args(argv)
    if a.suite == "arrays":
        return _arrays_config(ap, a)
    if a.kernels is not None:
        ap.error("--kernels needs --suite arrays")
    a.out = a.out if a.out is not None else DEFAULT_OUT
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
    return Config(
        apps=a.apps, sizes=sizes, tools=[t for t in ALL_TOOLS if t in tools], out=a.out,
        min_time=a.min_time if a.min_time is not None else (0.05 if a.quick else 0.5),
        samples=a.samples if a.samples is not None else (3 if a.quick else 10),
        case_budget_s=2.0 if a.quick else 20.0,
        slow_limit_s=a.slow_limit if a.slow_limit is not None else (0.5 if a.quick else 5.0),
        seed=a.seed, memory=not a.no_memory, plots=not a.no_plots, quick=a.quick,
        progress=not a.no_progress, cold=a.cold,
        benchmarks=benchmarks_path(a.benchmarks, a.out, a.apps),
        arrays=False if a.no_arrays else None,
    )


def _arrays_config(ap, a):
    from apps.bench.arrays import DEFAULT_OUT as ARRAYS_OUT
    from apps.bench.arrays import ArraysConfig

    try:
        kernels = [apps.arrays.canonical(k) for k in (a.kernels or apps.arrays.KERNEL_NAMES)]
    except KeyError as e:
        ap.error(str(e.args[0]))
    sizes = a.sizes or (["m"] if a.quick else ["s", "m"])
    for s in sizes:
        if s not in apps.arrays.SIZES:
            ap.error(f"unknown size {s!r} for the arrays suite (s, m)")
    return ArraysConfig(
        kernels=kernels, sizes=sizes, out=a.out if a.out is not None else ARRAYS_OUT,
        min_time=a.min_time if a.min_time is not None else (0.05 if a.quick else 0.2),
        samples=a.samples if a.samples is not None else (3 if a.quick else 7),
        case_budget_s=2.0 if a.quick else 10.0, seed=a.seed, quick=a.quick,
        plots=not a.no_plots, progress=not a.no_progress, cold=a.cold)


def benchmarks_path(option, out, app_names):
    """Where ``BENCHMARKS.md`` goes: ``option`` (``--benchmarks``; ``"none"``: None), else
    the repository root's for a run of every app into the default ``--out``, else ``out``'s."""
    if option is not None:
        return None if option.lower() == "none" else Path(option)
    if Path(out) == DEFAULT_OUT and set(app_names) == set(apps.APP_NAMES):
        return REPO_BENCHMARKS
    return Path(out) / "BENCHMARKS.md"


def main_arrays(cfg) -> int:
    """``--suite arrays``: run the suite, print its report, say where the files went."""
    from apps.bench.arrays import render, run_arrays

    show = None
    if cfg.progress:
        def show(label):
            print(label, file=sys.stderr, flush=True)
    result = run_arrays(cfg, show=show)
    print(render(result))
    plots = result.get("plots") or []
    print(f"wrote {cfg.out / 'results.md'}, {cfg.out / 'results.json'}"
          + (f" and {len(plots)} plots" if plots else ""))
    return 0


def main(argv=None):
    cfg = parse_config(argv)
    if not isinstance(cfg, Config):
        return main_arrays(cfg)
    result = run(cfg)
    print(render_markdown(result, summary="last"))
    skipped = [s["tool"] for s in result["meta"]["skipped_peers"]]
    if skipped:
        print(f"skipped (not installed): {', '.join(skipped)}; how to add them: \"Peers not "
              f"installed\" above and in {cfg.out / 'results.md'}")
    plots = result.get("plots") or []
    written = [str(cfg.out / "results.md"), str(cfg.out / "results.json")]
    if cfg.benchmarks is not None:
        command = "python3 -m apps.bench" + "".join(" " + a for a in (
            sys.argv[1:] if argv is None else argv))
        write_atomic(Path(cfg.benchmarks), render_benchmarks(result, command))
        written.append(str(cfg.benchmarks))
    print(f"wrote {', '.join(written)}" + (f" and {len(plots)} plots" if plots else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
