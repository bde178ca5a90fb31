"""The benchmark harness: coarsen against its peers on the applications in :mod:`apps`.

Run ``python -m apps.bench [--quick] [--apps a,b] [--sizes s,m,l] [--tools ...] [--out DIR]``.

Requires the apps of :mod:`apps`; the peers are optional.  This package re-exports the harness's
public names; its modules are:

``tools``     tool names, peer availability, :class:`Missing` / :class:`Unsupported`, messages
``adapters``  one callable per (tool, app, inputs) and its untimed first call (:func:`prepare`)
``probe``     the crash probe: a first call in a ``spawn``-ed child (:func:`probe_crash`)
``timing``    :func:`calibrate`, :func:`interleaved`, :func:`peak_memory`
``measure``   one group of tools on one app and size: prepare, check, time (:func:`measure_group`)
``runner``    :class:`Config`, :func:`run`: every app and size, results written as they come
``progress``  the progress display on stderr (a bar on a terminal, plain lines in a log)
``report``    the Markdown report, footnotes for failure messages, :func:`ratio`
``plots``     the PNG bar charts
``arrays``    the arrays suite (``--suite arrays``; a step of the main run, ``--no-arrays``)
``cli``       the command line (:func:`main`)

Tools
    ``primal`` (``numba.njit(objective)``, the baseline of the "x primal" ratios), ``coarsen``
    (coarse), ``coarsen_fine`` (``coarsen=False``: fine-grained AD through the same machinery),
    ``handwritten`` (hand-derived, ``numba.njit``), ``jax`` (``jit(grad)`` of the app's idiomatic
    JAX version, float64), ``autograd`` (its vectorized ``xp_objective`` on ``autograd.numpy``),
    ``tangent`` (tangent-ad on the loop ``objective``, like coarsen) and ``torch`` (PyTorch eager
    on ``xp_objective`` through :class:`apps._xp.TorchNS`).  The peers are optional: the
    ``bench`` extra installs JAX, autograd and tangent-ad, not PyTorch.  A peer that is not
    installed gets no column; the report and the terminal say which were skipped and how to
    install them.  A peer that is installed but fails to import is reported as "missing".

Protocol (in the spirit of ADBench)
    1. Preparation is untimed but recorded: coarsen's transformation time
       (``coarsen.differentiate``) separately from its first call (Numba compilation plus one
       run); the first call of every other tool (JIT compilation, tracing).  For coarsen's
       tools, the crash probe's fresh process also records the artifact's
       ``transform_seconds`` (symbolic work and code generation), the time from
       ``differentiate`` to the first gradient, Numba's compile time (first call less second)
       and whether each came from an on-disk cache; ``--cold`` runs with empty caches.
    2. Every tool's gradient is checked against the hand-written one (itself checked against
       central differences in ``tests/apps``; against coarsen's when the hand-written one is
       not run or failed) with ADBench's measure ``|x - y| / max(1, |x| + |y|) <= 1e-8``.  A
       tool that disagrees is reported as a mismatch and is not timed; a tool that raises is
       reported with the first line of its exception (in a footnote of the report).  The harness
       never stops because a tool failed: coarsen's generated gradients make their first call at
       each size in a child process started with ``spawn`` first (:func:`probe_crash`), so a
       crash in generated code is reported as ``crashed`` instead of ending the run.
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
against fine-grained AD with ``g.tape_bytes`` and peaks) and ``results.json`` (everything
measured), both rewritten after every (app, size) case, so a run that is stopped keeps what it
finished; then ``ratio_vs_handwritten_<size>.png`` / ``ratio_vs_primal_<size>.png`` (log-scale
bars; skipped without matplotlib).  When the run completes, the command line also writes the
report under a heading with the command, date, machine and mode to ``BENCHMARKS.md``: at the
repository root for a run of every app into the default ``--out`` (the main job's ``--quick``
run), in ``--out`` otherwise; ``--benchmarks PATH|none`` overrides it.  The terminal gets the same
report once, ending on the summary.  Progress goes to stderr: a bar on a terminal (with tqdm), plain lines otherwise.
"""
from __future__ import annotations

from apps.bench.adapters import Prepared, jax_grad_fn, prepare, wrt_positions
from apps.bench.cli import main, parse_config
from apps.bench.measure import measure_group
from apps.bench.probe import START_METHOD, Crashed, GradientProbe, probe_context, probe_crash
from apps.bench.progress import Progress
from apps.bench.report import (Footnotes, ratio, render_compile_times, render_markdown,
                               render_summary)
from apps.bench.runner import Config, cold_caches, run, run_app, write_results
from apps.bench.timing import calibrate, interleaved, peak_memory
from apps.bench.tools import (ALL_TOOLS, GRAD_TOOLS, PEERS, TOL, Missing, SkippedPeer,
                              Unsupported, available_tools, first_line)

#: the old name of :func:`first_line`
_first_line = first_line

__all__ = [
    "ALL_TOOLS", "GRAD_TOOLS", "PEERS", "START_METHOD", "TOL", "Config", "Crashed", "Footnotes",
    "GradientProbe", "Missing", "Prepared", "Progress", "SkippedPeer", "Unsupported",
    "available_tools", "calibrate", "cold_caches", "first_line", "interleaved", "jax_grad_fn", "main",
    "measure_group", "parse_config", "peak_memory", "prepare", "probe_context", "probe_crash",
    "ratio", "render_compile_times", "render_markdown", "render_summary", "run", "run_app", "write_results",
    "wrt_positions",
]
