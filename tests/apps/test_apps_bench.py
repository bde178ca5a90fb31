"""The benchmark harness: it runs, checks gradients before timing, reports failures in the
table instead of crashing, and writes its Markdown, JSON and plots."""
from __future__ import annotations

import json
import types

import numba
import numpy as np
import pytest

from apps import bench


def _cfg(tmp_path, **kw):
    base = dict(apps=["series"], sizes=["s"], tools=["primal", "handwritten"], out=tmp_path,
                min_time=0.001, samples=2, case_budget_s=0.5, slow_limit_s=5.0, plots=False,
                progress=False)
    base.update(kw)
    return bench.Config(**base)


def test_run_writes_reports(tmp_path):
    res = bench.run(_cfg(tmp_path, apps=["series", "kalman"]))
    data = json.loads((tmp_path / "results.json").read_text())
    assert [c["app"] for c in data["cases"]] == ["series", "kalman"]
    for c in res["cases"]:
        hw = c["tools"]["handwritten"]
        assert hw["status"] == "ok" and hw["median_s"] > 0
        assert hw["min_s"] <= hw["median_s"] <= hw["max_s"] and hw["reps"] >= 1
        assert hw["peak_bytes"] is not None
        assert bench.ratio(c, "handwritten", "handwritten") == pytest.approx(1.0)
        assert bench.ratio(c, "handwritten", "primal") > 0
    md = (tmp_path / "results.md").read_text()
    assert "| series (7) |" in md and "geomean" in md


def _fake_app(xp_objective):
    """A one-parameter app: f(x, n) = sum_{i<n} x^2 i."""
    def objective(x, n):
        s = 0.0
        for i in range(n):
            s += x * x * i
        return s

    return types.SimpleNamespace(
        __name__="apps.fake", objective=objective, WRT=("x",), SIZES={"s": 4, "m": 8, "l": 16},
        make_inputs=lambda size, seed=0: (1.5, {"s": 4, "m": 8, "l": 16}[size]),
        primal_numba=numba.njit(objective),
        handwritten_grad=numba.njit(lambda x, n: (x * n * (n - 1),)),
        xp_objective=xp_objective, jax_objective=None)


def test_mismatch_and_failure_are_reported_not_timed(tmp_path):
    pytest.importorskip("autograd")
    cfg = _cfg(tmp_path, tools=["primal", "handwritten", "autograd"])
    prog = bench.Progress(1, enabled=False)

    wrong = _fake_app(lambda xp, x, n: 3.0 * x * x)          # gradient 6x, not x n (n-1)
    res = bench._measure_group(wrong, "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"]["status"] == "mismatch" and "median_s" not in res["autograd"]
    assert res["autograd"]["ref"] == "handwritten"
    assert res["handwritten"]["status"] == "ok"

    def boom(xp, x, n):
        raise RuntimeError("boom\nsecond line")

    res = bench._measure_group(_fake_app(boom), "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"] == {"status": "failed", "message": "RuntimeError: boom"}
    assert res["primal"]["status"] == "ok"

    right = _fake_app(lambda xp, x, n: x * x * (n * (n - 1) / 2))
    res = bench._measure_group(right, "s", cfg.tools, cfg, prog, "fake")
    assert res["autograd"]["status"] == "ok" and res["autograd"]["median_s"] > 0


def test_missing_peer_is_a_note(tmp_path, monkeypatch):
    def missing(mod, args):
        raise bench.Missing("jax not installed (test)")

    monkeypatch.setattr(bench, "jax_grad_fn", missing)
    res = bench.run(_cfg(tmp_path, tools=["primal", "handwritten", "jax"]))
    assert res["cases"][0]["tools"]["jax"]["status"] == "missing"
    md = (tmp_path / "results.md").read_text()
    assert "Peers not installed" in md and "jax not installed (test)" in md


def test_interleaving_is_round_robin():
    calls = []
    fns = {n: (lambda n=n: calls.append(n)) for n in "abc"}
    times = bench.interleaved(fns, {"a": 1, "b": 1, "c": 1}, samples=3, budget_s=100)
    assert calls == list("abc" "bca" "cab")
    assert all(len(v) == 3 for v in times.values())


def test_adbench_measure():
    from apps._common import adbench_err
    assert adbench_err([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert adbench_err(1e-9, 0.0) == pytest.approx(1e-9)
    assert adbench_err(1000.0, 1001.0) == pytest.approx(1 / 2001)
    assert adbench_err(np.ones(2), np.ones(3)) == float("inf")
    assert adbench_err([np.nan], [1.0]) == float("inf")


def test_cli_quick_smoke(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rc = bench.main(["--quick", "--apps", "series", "--sizes", "s", "--tools",
                     "primal,handwritten", "--out", str(tmp_path), "--min-time", "0.001",
                     "--samples", "2", "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "Gradient time / hand-written gradient time" in out
    assert (tmp_path / "ratio_vs_handwritten_s.png").stat().st_size > 1000


def test_probe_crash_reports_a_segfault_and_passes_normal_calls():
    import os

    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    import ctypes

    msg = bench.probe_crash(lambda: ctypes.string_at(0))
    assert msg is not None and "SIGSEGV" in msg
    assert bench.probe_crash(lambda: 1 + 1) is None
    assert bench.probe_crash(lambda: 1 / 0) is None  # exceptions are the parent's to report


def test_summary_table_coarse_vs_fine_with_tapes():
    def tool(med, tape, peak, status="ok"):
        return {"status": status, "median_s": med, "min_s": med, "max_s": med,
                "tape_bytes": tape, "peak_bytes": peak}

    result = {"meta": {"tools": ["primal", "coarsen", "coarsen_fine", "handwritten"]},
              "cases": [
                  {"app": "a", "size": "m", "dims": 10, "tools": {
                      "coarsen": tool(1e-3, 0, 100), "coarsen_fine": tool(4e-3, 800, 900),
                      "handwritten": tool(5e-4, None, 50)}},
                  {"app": "b", "size": "m", "dims": 20, "tools": {
                      "coarsen": tool(2e-3, 100, 200), "coarsen_fine": tool(2e-3, 400, 400),
                      "handwritten": tool(1e-3, None, 50)}},
                  {"app": "c", "size": "m", "dims": 5, "tools": {
                      "coarsen": {"status": "crashed", "message": "crashed with SIGSEGV"},
                      "coarsen_fine": tool(1e-3, 8, 8), "handwritten": tool(1e-3, None, 8)}},
              ]}
    md = bench.render_summary(result)
    assert "| a (10) | m | 1.00 ms | 4.00 ms | 4x | 2 | 0 B | 800 B |" in md
    assert "CRASHED" in md
    # geomean speedup over a and b: sqrt(4 * 1) = 2; tape ratio only where both are non-empty
    assert "geomean speedup fine/coarse 2 (over 2 apps)" in md
    assert "tape fine/coarse 4 (over 1 apps)" in md
