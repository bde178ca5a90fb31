"""The harness's Hessian section: ``coarsen.hessian`` against ``jax.hessian`` and a
hand-written Hessian, on the logistic regression of ``apps/logreg.py`` (with respect to
``w``; 200 samples, 20 and 100 features) and the GMM objective of ``apps/gmm.py`` at size s
(all three parameters, 18 values).

Tools: ``coarsen`` (``coarsen.hessian(objective, wrt)``, method ``"auto"``: forward over
reverse where the gradient allows it), ``coarsen_rev_fwd`` (``method="reverse-over-forward"``:
one reverse sweep per column, the method before forward over reverse), ``jax``
(``jax.jit(jax.hessian(jax_objective))`` in float64) and ``handwritten`` (logistic
regression: ``X.T diag(s (1 - s)) X / n + lam I`` in NumPy).  Every result is checked against
the reference (the hand-written Hessian; for GMM, reverse over forward) before it is timed,
with ADBench's error measure; a mismatch is reported, not timed.  Timing: ``apps.bench.timing``'s
calibration and interleaved samples, medians.
Guarantees: :func:`measure_hessians` returns a JSON-able list of rows and never raises for a
tool (a failure is the row's ``status``); :func:`render` gives the report's section.
"""
from __future__ import annotations

import numpy as np

from apps import gmm, logreg
from apps.bench.jacobians import measure_tools, tool_cells
from apps.bench.tools import TOL

TOOLS = ("coarsen", "coarsen_rev_fwd", "jax", "handwritten")
#: logistic regression: (samples, features)
LOGREG = ((200, 20), (200, 100))


def logreg_inputs(n, d, seed=0):
    r = np.random.default_rng(seed)
    return (0.1 * r.standard_normal(d), 0.1, r.standard_normal((n, d)),
            (r.random(n) < 0.5).astype(np.float64), 0.01)


def logreg_hessian(w, b, X, y, lam):
    """The hand-written Hessian of ``apps.logreg.objective`` with respect to ``w``."""
    s = 1.0 / (1.0 + np.exp(-(X @ w + b)))
    return (X.T * (s * (1.0 - s))) @ X / X.shape[0] + lam * np.eye(w.shape[0])


def dense(blocks, sizes):
    """JAX's nested ``H[p][q]`` blocks as one matrix (``sizes``: the parameters' sizes)."""
    if not isinstance(blocks, tuple):
        return np.asarray(blocks).reshape(sizes[0], sizes[0])
    return np.vstack([np.hstack([np.asarray(b).reshape(n, -1) for b in row])
                      for n, row in zip(sizes, blocks)])


def _coarsen(fn, wrt, method, sizes):
    import coarsen
    h = coarsen.hessian(fn, wrt=wrt, method=method)
    return lambda *a: dense(h(*a), sizes)


def _jax(objective, argnums, sizes, static=()):
    import jax
    jax.config.update("jax_enable_x64", True)
    f = jax.jit(jax.hessian(objective, argnums=argnums), static_argnums=static)

    def run(*a):
        out = f(*a)
        jax.block_until_ready(out)
        return dense(jax.tree_util.tree_map(np.asarray, out), sizes)
    return run


def _jax_logreg(w, b, X, y, lam):
    import jax
    import jax.numpy as jnp
    z = X @ w + b
    return jnp.mean(jax.nn.softplus(z) - y * z) + 0.5 * lam * jnp.sum(w * w)


def _measure(makers, args, ref, cfg):
    """``jacobians.measure_tools``, the reference (``None``) being reverse over forward's."""
    if ref is None:
        ref = np.asarray(makers["coarsen_rev_fwd"]()(*args))
    return measure_tools(makers, args, ref, cfg)


def measure_hessians(cfg, tools, cases=("logreg", "gmm")):
    """The section's rows (see the module docstring); JAX's column when ``"jax"`` is in
    ``tools``."""
    rows = []
    with_jax = "jax" in tools
    if "logreg" in cases:
        for n, d in LOGREG:
            args = logreg_inputs(n, d, cfg.seed)
            makers = {"coarsen": lambda: _coarsen(logreg.objective, "w", "auto", (d,)),
                      "coarsen_rev_fwd": lambda: _coarsen(logreg.objective, "w",
                                                          "reverse-over-forward", (d,))}
            if with_jax:
                makers["jax"] = lambda: _jax(_jax_logreg, 0, (d,))
            makers["handwritten"] = lambda: logreg_hessian
            rows.append({"case": "logreg", "dims": (n, d), "parameters": d,
                         "tools": _measure(makers, args, logreg_hessian(*args), cfg)})
    if "gmm" in cases:
        args = gmm.make_inputs("s", seed=cfg.seed)
        wrt = tuple(gmm.WRT)
        sizes = tuple(int(np.size(args[k])) for k in range(3))
        makers = {"coarsen": lambda: _coarsen(gmm.objective, wrt, "auto", sizes),
                  "coarsen_rev_fwd": lambda: _coarsen(gmm.objective, wrt, "reverse-over-forward",
                                                      sizes)}
        if with_jax:
            makers["jax"] = lambda: _jax(gmm.jax_objective, (0, 1, 2), sizes, (4, 5))
        rows.append({"case": "gmm", "dims": gmm.SIZES["s"],
                     "parameters": sum(sizes),
                     "tools": _measure(makers, args, None, cfg)})
    return rows


def render(rows):
    """The report's section (markdown lines); nothing when there are no rows."""
    if not rows:
        return []
    lines = ["## Hessians: median time per call [min, max]", "",
             "`coarsen`: `coarsen.hessian` (forward over reverse where the gradient allows it); "
             "`coarsen_rev_fwd`: `method=\"reverse-over-forward\"`; `jax`: "
             "`jit(hessian)` in float64; `handwritten`: NumPy `X.T D X` (logistic regression, "
             "200 samples, w.r.t. `w`). GMM: size s, all three parameters. Checked against the "
             f"hand-written Hessian (GMM: reverse over forward), ADBench's error <= {TOL:g}.", "",
             "| case | dims | parameters | " + " | ".join(TOOLS) + " |",
             "|---" * (len(TOOLS) + 3) + "|"]
    for r in rows:
        lines.append(f"| {r['case']} | {tuple(r['dims'])} | {r['parameters']} | "
                     + " | ".join(tool_cells(r["tools"], TOOLS)) + " |")
    return lines + [""]
