"""The harness's Jacobian section (apps/bench/jacobians.py): ADBench's BA Jacobian, checked
against the hand-written blocks before it is timed; the report's table."""
from types import SimpleNamespace

import numpy as np

from apps import ba
from apps.bench import jacobians


def test_ba_jacobian_section_checks_and_times_coarsen():
    cfg = SimpleNamespace(sizes=["s"], seed=0, min_time=0.001, samples=2, case_budget_s=0.5)
    rows = jacobians.measure_ba_jacobian(cfg, ["coarsen"])
    assert [(r["variant"], r["size"]) for r in rows] == [("blocks", "s"), ("dense", "s")]
    for r in rows:
        assert r["tools"]["coarsen"]["status"] == "ok", r
        assert r["tools"]["coarsen"]["median_s"] > 0
    assert rows[0]["tools"]["handwritten"]["err"] == 0.0
    text = "\n".join(jacobians.render(rows))
    assert "## ADBench BA Jacobian" in text and "| blocks | s (2, 5, 8) |" in text
    assert jacobians.render([]) == []


def test_dense_residuals_are_adbench_residuals():
    cams, X, w, obs, feats = ba.make_inputs("s")
    reproj, werr = ba.residuals(cams, X, w, obs, feats)
    r = jacobians.dense_residuals(cams, X, w, obs, feats)
    np.testing.assert_allclose(r[:2 * obs.shape[0]], reproj.ravel(), rtol=1e-13)
    np.testing.assert_allclose(r[2 * obs.shape[0]:], werr, rtol=1e-13)
