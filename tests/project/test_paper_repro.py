"""The cheap parts of paper_repro: the swell measurement and one closed-form loop, with numbers.

No timings are asserted (those are measured by ``python -m paper_repro``, never by tests).
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import coarsen
from coarsen.symbolic import Budget, BudgetExceeded, derivatives, naive_derivative_ops

from paper_repro import chains, experiments, programs, report


def _swell_counts(L_max):
    reuse, naive, fine = [], [], []
    for L in range(1, L_max + 1):
        asg, ins, outs = chains.chain_assignments(L)
        jac = derivatives(asg, ins, outs, Budget(max_ops=10 ** 6, seconds=60.0))
        reuse.append(jac.ops_after)
        fine.append(jac.ops_before)
        naive.append(naive_derivative_ops(asg, ins, outs, Budget(max_ops=10 ** 6, seconds=60.0)))
    return reuse, naive, fine


def test_swell_reuse_linear_naive_exponential():
    reuse, naive, fine = _swell_counts(8)
    # reuse-aware: the same number of operations per added statement (linear growth)
    steps = np.diff(reuse)
    assert steps.min() > 0 and steps.max() - steps.min() <= 2, reuse
    assert reuse[-1] <= 8 * reuse[0] + 8 * steps.max()
    # fine-grained AD estimate is linear too, and larger than the coarse segment
    assert all(f > r for f, r in zip(fine, reuse))
    # naive inlining: grows by more than 2x per statement from L = 3 on, and far exceeds reuse
    ratios = [b / a for a, b in zip(naive[2:], naive[3:])]
    assert min(ratios) > 2.0, naive
    assert naive[-1] > 100 * reuse[-1]
    assert naive[0] <= 2 * reuse[0] + 2  # at L = 1 there is nothing to swell


def test_naive_swell_hits_the_budget_reuse_does_not():
    asg, ins, outs = chains.chain_assignments(12)
    with pytest.raises(BudgetExceeded):
        naive_derivative_ops(asg, ins, outs, Budget(max_ops=50_000, seconds=20.0))
    jac = derivatives(asg, ins, outs, Budget(max_ops=50_000, seconds=20.0))
    assert jac.ops_after < 200


def test_swell_experiment_and_report_crosscheck():
    sw = experiments.swell(L_max=10, naive_max_ops=20_000, report_Ls=(2, 4))
    assert sw["exploded"] is not None and sw["exploded"]["L"] <= 10
    assert [r["L"] for r in sw["rows"]] == list(range(1, 11))
    # the public report of a generated chain function counts the same segment ops
    by_L = {r["L"]: r for r in sw["rows"]}
    for r in sw["report_rows"]:
        assert r["segments"] == 1 and not r["fallbacks"]
        assert abs(r["ops_after"] - by_L[r["L"]]["reuse_ops"]) <= 2 * r["L"] + 2
        assert r["grad_err"] < 1e-12
    md = report.headline({"swell": sw})
    assert "(c) expression swell" in md and "BudgetExceeded" in md


def test_closed_form_loop_is_exact_and_needs_no_tape():
    g = coarsen.differentiate(programs.lin_sum, wrt="a")
    n = 10 ** 6
    assert g(0.5, n) == pytest.approx(n * (n - 1) / 2.0, rel=1e-15)
    assert g.tape_bytes == 0
    with contextlib.redirect_stdout(io.StringIO()):
        rep = list(g.report(0.5, n))
    assert [s["kind"] for s in rep] == ["loop"] and rep[0]["closed_form"]
    # the fine-grained baseline agrees, looping n times
    gf = coarsen.differentiate(programs.lin_sum, wrt="a", coarsen=False)
    assert gf(0.5, 1000) == pytest.approx(1000 * 999 / 2.0, rel=1e-15)


def test_generated_chain_module_is_differentiable():
    mod = chains.chain_module(3)
    assert "chain_scalar" in chains.chain_source(3)
    v, d = chains.chain_value_and_grad(3, 0.4)
    assert mod.chain_scalar(0.4) == pytest.approx(v, rel=1e-15)
    for coarse in (True, False):
        (gd,) = coarsen.differentiate(mod.chain_scalar, coarsen=coarse, target="python")(0.4)
        assert gd == pytest.approx(d, rel=1e-12, abs=1e-15)


# ----------------------------------------------------------------------------- strategies (issue 11)

_ALLOWED = {"recompute", "cut", "preaccumulate", "fine", "closed form", "forward mode"}


def test_strategy_mix_counts_and_text():
    mix = experiments.strategy_mix(["recompute", "cut", "preaccumulate", "preaccumulate"])
    assert mix == {"preaccumulate": 2, "cut": 1, "recompute": 1}
    assert list(mix) == ["preaccumulate", "cut", "recompute"]  # the documented order
    assert report.fmt_mix(mix) == "2 preaccumulate, 1 cut, 1 recompute"
    assert report.fmt_mix({}) == "no segments" and report.fmt_mix(None) == "-"
    assert report.total_mix([mix, {"closed form": 1, "cut": 2}, None]) == {
        "closed form": 1, "preaccumulate": 2, "cut": 3, "recompute": 1}


def test_strategies_of_a_program_and_an_app():
    g = coarsen.differentiate(programs.quad_sum, wrt=("a", "b"))
    assert experiments.strategies_of(g, (0.5, 1.5, 10)) == ["closed form"]
    strategies = experiments.app_strategies("kalman", "s")
    assert strategies and set(strategies) <= _ALLOWED, strategies
    assert sum(experiments.strategy_mix(strategies).values()) == len(strategies)


def test_segment_size_times_every_plan_and_reports_the_auto_choice(monkeypatch):
    # the crash probe spawns a child per gradient; the tiny run here skips it (speed only)
    monkeypatch.setattr(experiments.bench, "probe_crash", lambda *a, **k: None)
    st = experiments.Settings(quick=True, min_time=0.001, samples=1, budget_s=0.2)
    rows = experiments.segment_size(st, Ls=(1, 2), n=64)
    assert [r["L"] for r in rows] == [1, 2]
    for r in rows:
        for mode, (coarse, plan) in experiments.SEGMENT_VARIANTS.items():
            m = r[mode]
            assert m["status"] == "ok", (r["L"], mode, m)
            assert m["ref_err"] <= 1e-8 and m["median_s"] > 0 and m["samples"] >= 1
            if coarse and plan != "auto":  # a forced plan is what the report shows
                assert m["strategies"] == [plan], (mode, m["strategies"])
        assert r["auto_strategy"] in _ALLOWED - {"closed form"}
        assert r["coarse"]["strategies"] == [r["auto_strategy"]]
        assert set(r["costs"]) >= {"recompute", "cut", "preaccumulate", "fine"}
        assert set(r["speedup"]) == {"coarse", "recompute", "cut", "preaccumulate"}
        assert all(v > 0 for v in r["speedup"].values())
    res = {"segment_size": rows}
    head = report.headline(res)
    assert "(e) segment size" in head and "Auto >= 1.0x against fine at every L: **" in head
    assert f"L=1: {report.fmt_x(rows[0]['speedup']['coarse'])} ({rows[0]['auto_strategy']})" in head
    md = report.render(res, {}, {"quick": True, "date": "d", "machine": "m", "cpus": 2,
                                 "versions": {}, "elapsed_s": 1.0, "loadavg_start": 0.1,
                                 "loadavg_end": 0.2})
    assert "| L | auto chose | estimates recompute / cut / preaccumulate / fine |" in md
    assert "Machine load (1-minute average) 0.10" in md and "busy" not in md


def test_apps_table_shows_the_strategy_mix():
    ok = {"status": "ok", "median_s": 1e-3, "tape_bytes": 8, "peak_bytes": 16}
    res = {"apps": {"rows": [{"app": "demo", "size": "m", "dims": None, "coarsen": ok,
                              "coarsen_fine": dict(ok, median_s=2e-3),
                              "handwritten": {"status": "ok", "median_s": 1e-3},
                              "strategy_mix": {"preaccumulate": 2, "cut": 1}}]},
           "kernels": [{"kernel": "k", "coarse": ok, "fine": ok, "coarse_fd_err": 0.0,
                        "fine_fd_err": 0.0, "strategy_mix": {"closed form": 1}}]}
    md = report.render(res, {}, {"quick": True, "date": "d", "machine": "m", "cpus": 2,
                                 "versions": {}, "elapsed_s": 1.0})
    assert "| strategies (auto plan) |" in md
    assert "| 2 preaccumulate, 1 cut |" in md and "| 1 closed form |" in md
    assert "over the apps' segments: 2 preaccumulate, 1 cut, over our programs': 1 closed form" \
        in report.headline(res)
