"""The harness's bridges section (apps/bench/bridges.py): every row measured with the real
frameworks (each training step's loss checked against the NumPy loss before it is timed),
the report's tables, and the line that says a framework was skipped."""
from types import SimpleNamespace

import numpy as np

from apps.bench import bridges


def test_section_measures_every_bridge():
    cfg = SimpleNamespace(seed=0, min_time=0.001, samples=2, case_budget_s=0.5)
    res = bridges.measure_bridges(cfg)
    assert res["skipped"] == {}
    calls = [r["call"] for r in res["overhead"]]
    assert calls == ["torch: F(x, a)", "torch: F(x, a).backward()", "jax: jit(value_and_grad(F))",
                     "jax: F(x, a), eager", "scipy: fun(x), jac(x)"]
    for r in res["overhead"]:
        assert r["status"] == "ok" and r["bridge"]["median_s"] > 0, r
        assert (r["floor"] is None) == r["call"].startswith("scipy")
    assert [(r["framework"], r["status"]) for r in res["training"]] == [("torch", "ok"),
                                                                       ("jax", "ok")]
    text = "\n".join(bridges.render(res))
    assert "## Bridges" in text and "| torch: F(x, a) |" in text and "| jax |" in text
    assert "not installed" not in text


def test_skipped_framework_is_a_line():
    res = {"overhead": [], "training": [], "skipped": {"torch": "ModuleNotFoundError: x; "
                                                      + bridges.INSTALL["torch"]},
           "batch": bridges.B, "trips": bridges.trips(bridges.T_END, bridges.H)}
    text = "\n".join(bridges.render(res))
    assert "torch is not installed: its rows are skipped" in text
    assert "pip install torch==2.13.0" in text
    assert bridges.render(None) == [] and bridges.render({}) == []


def test_while_rule_trips_and_training_data():
    assert bridges.trips(1.0, 0.02) == 50 and bridges.trips(0.0, 0.1) == 0
    feats, w, b, y0, target = bridges.training_data(0)
    assert feats.shape == (bridges.B, 3) and target.shape == y0.shape == (bridges.B,)
    assert np.all(np.isfinite(target))
