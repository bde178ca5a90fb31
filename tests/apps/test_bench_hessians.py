"""The harness's Hessian section (apps/bench/hessians.py): each tool checked against the
hand-written Hessian (GMM: reverse over forward) before it is timed; the report's table."""
from types import SimpleNamespace

import numpy as np

from apps import logreg
from apps.bench import hessians


def test_logreg_section_checks_and_times(monkeypatch):
    monkeypatch.setattr(hessians, "LOGREG", ((12, 5),))
    cfg = SimpleNamespace(sizes=["m"], seed=0, min_time=0.001, samples=2, case_budget_s=0.5)
    rows = hessians.measure_hessians(cfg, ["coarsen"], cases=("logreg",))
    assert [(r["case"], r["dims"]) for r in rows] == [("logreg", (12, 5))]
    tools = rows[0]["tools"]
    for t in ("coarsen", "coarsen_rev_fwd", "handwritten"):
        assert tools[t]["status"] == "ok" and tools[t]["median_s"] > 0, (t, tools[t])
    assert tools["handwritten"]["err"] == 0.0 and "jax" not in tools
    text = "\n".join(hessians.render(rows))
    assert "## Hessians" in text and "| logreg | (12, 5) | 5 |" in text
    assert hessians.render([]) == []


def test_hand_written_hessian_is_the_objectives():
    """The reference itself, against central differences of the hand-written gradient."""
    w, b, X, y, lam = hessians.logreg_inputs(30, 4, seed=2)
    H = hessians.logreg_hessian(w, b, X, y, lam)
    eps = 1e-6
    cols = [(logreg.handwritten_grad(w + eps * e, b, X, y, lam)[0]
             - logreg.handwritten_grad(w - eps * e, b, X, y, lam)[0]) / (2 * eps)
            for e in np.eye(4)]
    np.testing.assert_allclose(H, np.array(cols).T, rtol=1e-6, atol=1e-9)


def test_dense_layout():
    a = np.arange(4.0).reshape(2, 2)
    blocks = ((a, np.ones((2, 3))), (np.zeros((3, 2)), 2 * np.eye(3)))
    d = hessians.dense(blocks, (2, 3))
    assert d.shape == (5, 5) and d[0, 2] == 1.0 and d[4, 4] == 2.0 and d[1, 1] == 3.0
