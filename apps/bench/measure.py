"""One measurement group: prepare, check and time a set of tools on one app at one size.

Requires an app module (see :mod:`apps`), a :class:`~apps.bench.runner.Config`-like object with
``seed``, ``min_time``, ``samples``, ``case_budget_s`` and ``memory``, and a
:class:`~apps.bench.progress.Progress`.  Guarantees, for every tool asked for, a result dict with
a ``status``:

* ``ok``: checked and timed (``median_s``, ``min_s``, ``max_s``, ``samples``, ``reps``, ``prep``,
  and ``peak_bytes`` unless memory is off; ``tape_bytes`` for coarsen);
* ``mismatch`` (``err``, ``ref``): the gradient disagrees with the reference beyond
  :data:`~apps.bench.tools.TOL` and is not timed;
* ``missing``, ``unsupported``, ``crashed``, ``failed``, ``too_slow`` (``message``): never an
  exception.

The reference is the hand-written gradient (checked against central differences in
``tests/apps``), else coarsen's when the hand-written one was not run or failed, so a wrong
coarse gradient shows as coarsen's mismatch, not as every peer's.
"""
from __future__ import annotations

import numpy as np

from apps._common import adbench_err
from apps.bench.adapters import prepare
from apps.bench.probe import Crashed
from apps.bench.timing import calibrate, interleaved, peak_memory
from apps.bench.tools import TOL, UNTRACKED_MEMORY, Missing, TooSlow, Unsupported, failure_message


def measure_group(mod, size, tools, cfg, prog, label, limited=()):
    """Prepare, check and time ``tools`` on ``mod`` at ``size``; returns {tool: result}.
    The tools in ``limited`` get ``cfg.slow_limit_s`` as their limit per call
    (``adapters.prepare``): past it, their status is ``too_slow`` and nothing is timed."""
    args = mod.make_inputs(size, seed=cfg.seed)
    res: dict = {}
    prepared: dict = {}
    for tool in tools:
        prog.show(f"{label}: prepare {tool}")
        r = {"status": "ok"}
        try:
            p = prepare(tool, mod, args, limit_s=cfg.slow_limit_s if tool in limited else None)
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
        except TooSlow as e:
            r = {"status": "too_slow", "message": str(e)}
        except Exception as e:
            r = {"status": "failed", "message": failure_message(e)}
        res[tool] = r

    _check(mod, args, prepared, res)
    times = _time(prepared, res, cfg, prog, label)
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


def _check(mod, args, prepared, res):
    """Compare every gradient with the reference; a mismatch leaves ``prepared`` (not timed)."""
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
            res[tool]["message"] = failure_message(e)
        res[tool]["err_vs_" + str(ref_tool)] = err
        if not err <= TOL:
            res[tool]["status"] = "mismatch"
            res[tool]["err"] = err
            res[tool]["ref"] = ref_tool
            del prepared[tool]


def _time(prepared, res, cfg, prog, label):
    """Calibrate, then interleaved samples; fills the medians into ``res``."""
    reps = {}
    for tool, p in list(prepared.items()):
        prog.show(f"{label}: calibrate {tool}")
        try:
            reps[tool], _ = calibrate(p.fn, cfg.min_time)
            res[tool]["reps"] = reps[tool]
        except Exception as e:
            res[tool] = {"status": "failed", "message": failure_message(e)}
            del prepared[tool]
    prog.show(f"{label}: interleaved samples")
    try:
        times = interleaved({t: prepared[t].fn for t in prepared}, reps, cfg.samples,
                            cfg.case_budget_s)
    except Exception as e:  # a tool that fails only sometimes: retime without it is overkill
        times = {}
        for t in prepared:
            res[t] = {"status": "failed", "message": failure_message(e)}
    for t, ts in times.items():
        a = np.array(ts)
        res[t].update(median_s=float(np.median(a)), min_s=float(a.min()), max_s=float(a.max()),
                      samples=len(ts))
    return times
