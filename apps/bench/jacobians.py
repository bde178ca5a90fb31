"""The harness's Jacobian section: ADBench's bundle-adjustment Jacobian, timed for coarsen
against ``jax.jacfwd`` and ``jax.jacrev`` and a hand-written one.

ADBench's BA Jacobian is sparse: each observation's two reprojection residuals depend on its
camera (11 values), its point (3) and its weight (1), and its weight residual ``1 - w^2`` on
the weight alone.  Two measurements:

* ``blocks`` (sizes s and m, ADBench's layout): the ``(p, 3, 15)`` per-observation blocks.
  coarsen: ``coarsen.jvp`` of :func:`stacked_residuals` (the residuals of every observation
  from its gathered camera and point) along 15 compressed directions (direction ``j`` sets the
  ``j``-th of the 15 inputs of every observation at once: the observations share no input in
  this form), one call of the vector JVP (``directions=15``: the primal once, 15 lanes of
  tangents) over all observations.  JAX: ``jit(vmap(jacfwd(residual)))`` and
  ``jit(vmap(jacrev(residual)))`` of ADBench's per-observation residual.  Hand-written:
  ``apps.ba.handwritten_jacobian_block`` (a reverse sweep per residual), in Numba.
* ``dense`` (size s only: the dense matrix of size m has 22 million entries): the dense
  ``(3p, n*11 + m*3 + p)`` Jacobian of the residual vector, ``coarsen.jacobian`` (mode
  ``"auto"``: forward, fewer inputs than outputs; every sweep in one compiled function)
  against ``jit(jacfwd)`` and ``jit(jacrev)`` of the same residual vector in JAX.

Every tool's result is checked against the hand-written blocks with ADBench's error measure
(``apps._common.adbench_err``, ``TOL``) before it is timed; a mismatch is reported, not timed.
Timing: ``apps.bench.timing``'s calibration and interleaved round-robin samples, medians.
Requires the ``ba`` app; JAX columns only where ``jax`` is among the tools and installed.
Guarantees: :func:`measure_ba_jacobian` returns a JSON-able list of rows (one per variant and
size) and never raises for a tool: a failure is the row's ``status``; :func:`render` gives the
report's markdown section.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps import ba
from apps._common import adbench_err
from apps.bench.report import fmt_time
from apps.bench.timing import calibrate, interleaved
from apps.bench.tools import TOL, failure_message

SIZES = ("s", "m")
DENSE_SIZES = ("s",)
TOOLS = ("coarsen", "jax_jacfwd", "jax_jacrev", "handwritten")


def stacked_residuals(C, P, w, feats):
    """Every observation's residuals from its gathered camera ``C[o]`` and point ``P[o]``:
    ``r[o, 0:2]`` the reprojection errors, ``r[o, 2] = 1 - w[o]^2`` (coarsen's input
    language)."""
    p = C.shape[0]
    r = np.zeros((p, 3))
    for o in range(p):
        x0 = P[o, 0] - C[o, 3]
        x1 = P[o, 1] - C[o, 4]
        x2 = P[o, 2] - C[o, 5]
        r0 = C[o, 0]
        r1 = C[o, 1]
        r2 = C[o, 2]
        sqtheta = r0 * r0 + r1 * r1 + r2 * r2
        if sqtheta != 0.0:
            theta = math.sqrt(sqtheta)
            costheta = math.cos(theta)
            sintheta = math.sin(theta)
            w0 = r0 / theta
            w1 = r1 / theta
            w2 = r2 / theta
            tmp = (1.0 - costheta) * (w0 * x0 + w1 * x1 + w2 * x2)
            y0 = x0 * costheta + (w1 * x2 - w2 * x1) * sintheta + w0 * tmp
            y1 = x1 * costheta + (w2 * x0 - w0 * x2) * sintheta + w1 * tmp
            y2 = x2 * costheta + (w0 * x1 - w1 * x0) * sintheta + w2 * tmp
        else:
            y0 = x0 + (r1 * x2 - r2 * x1)
            y1 = x1 + (r2 * x0 - r0 * x2)
            y2 = x2 + (r0 * x1 - r1 * x0)
        p0 = y0 / y2
        p1 = y1 / y2
        rsq = p0 * p0 + p1 * p1
        distortion = 1.0 + C[o, 9] * rsq + C[o, 10] * rsq * rsq
        r[o, 0] = w[o] * (p0 * distortion * C[o, 6] + C[o, 7] - feats[o, 0])
        r[o, 1] = w[o] * (p1 * distortion * C[o, 6] + C[o, 8] - feats[o, 1])
        r[o, 2] = 1.0 - w[o] * w[o]
    return r


def dense_residuals(cams, X, w, obs, feats):
    """ADBench's residual vector: rows ``2o, 2o + 1`` the reprojection errors of observation
    ``o``, rows ``2p + o`` its weight error (coarsen's input language)."""
    p = obs.shape[0]
    C = np.zeros((p, 11))
    P = np.zeros((p, 3))
    for o in range(p):
        for k in range(11):
            C[o, k] = cams[obs[o, 0], k]
        for k in range(3):
            P[o, k] = X[obs[o, 1], k]
    s = stacked_residuals(C, P, w, feats)
    r = np.zeros(3 * p)
    for o in range(p):
        r[2 * o] = s[o, 0]
        r[2 * o + 1] = s[o, 1]
        r[2 * p + o] = s[o, 2]
    return r


@numba.njit
def handwritten_blocks(C, P, w, feats):
    """The ``(p, 3, 15)`` blocks from ``apps.ba.handwritten_jacobian_block`` (camera 0:11,
    point 11:14, weight 14)."""
    p = C.shape[0]
    out = np.zeros((p, 3, 15))
    J = np.zeros((2, 15))
    for o in range(p):
        ba.handwritten_jacobian_block(C[o], P[o], w[o], feats[o], J)
        out[o, 0:2, :] = J
        out[o, 2, 14] = -2.0 * w[o]
    return out


def _coarsen_blocks():
    import coarsen
    j = coarsen.jvp(stacked_residuals, wrt=("C", "P", "w"), directions=15)
    cache = {}

    def run(C, P, w, feats):
        p = C.shape[0]
        if p not in cache:
            # direction k sets input k of every observation (camera 0:11, point 11:14,
            # weight 14): the blocks' columns
            tc, tp, tw = np.zeros((15, p, 11)), np.zeros((15, p, 3)), np.zeros((15, p))
            for k in range(11):
                tc[k, :, k] = 1.0
            for k in range(3):
                tp[11 + k, :, k] = 1.0
            tw[14, :] = 1.0
            cache[p] = (tc, tp, tw)
        return np.moveaxis(j(C, P, w, feats, tangents=cache[p])[1], 0, -1)
    return run


def _jax():
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def _jax_residual(jnp):
    def rodrigues(rot, x):
        sq = jnp.sum(rot * rot)
        safe = jnp.where(sq != 0.0, sq, 1.0)
        theta = jnp.sqrt(safe)
        wv = rot / theta
        rotated = (x * jnp.cos(theta) + jnp.cross(wv, x) * jnp.sin(theta)
                   + wv * (1.0 - jnp.cos(theta)) * jnp.dot(wv, x))
        return jnp.where(sq != 0.0, rotated, x + jnp.cross(rot, x))

    def residual(cam, pt, wo, feat):
        y = rodrigues(cam[0:3], pt - cam[3:6])
        q = y[:2] / y[2]
        rsq = jnp.sum(q * q)
        q = q * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
        return jnp.concatenate([wo * (q * cam[6] + cam[7:9] - feat), (1.0 - wo * wo)[None]])
    return residual


def _jax_blocks(how):
    jax, jnp = _jax()
    jac = getattr(jax, how)(_jax_residual(jnp), argnums=(0, 1, 2))
    f = jax.jit(jax.vmap(jac))

    def run(C, P, w, feats):
        jc, jp, jw = f(C, P, w, feats)
        return jnp.concatenate([jc, jp, jw[:, :, None]], axis=2).block_until_ready()
    return run


def _jax_dense(how):
    jax, jnp = _jax()
    residual = jax.vmap(_jax_residual(jnp))

    def vec(cams, X, w, obs, feats):
        r = residual(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
        return jnp.concatenate([jnp.ravel(r[:, 0:2]), r[:, 2]])
    jac = jax.jit(getattr(jax, how)(vec, argnums=(0, 1, 2)))

    def run(cams, X, w, obs, feats):
        jc, jx, jw = jac(cams, X, w, obs, feats)
        p = obs.shape[0]
        return jnp.concatenate([jc.reshape(3 * p, -1), jx.reshape(3 * p, -1), jw],
                               axis=1).block_until_ready()
    return run


def _coarsen_dense():
    import coarsen
    J = coarsen.jacobian(dense_residuals, wrt=("cams", "X", "w"))

    def run(cams, X, w, obs, feats):
        jc, jx, jw = J(cams, X, w, obs, feats)
        p = obs.shape[0]
        return np.concatenate([jc.reshape(3 * p, -1), jx.reshape(3 * p, -1), jw], axis=1)
    return run


def dense_of_blocks(blocks, cams, X, obs):
    """The dense ADBench Jacobian of the hand-written blocks."""
    p, n, m = obs.shape[0], cams.shape[0], X.shape[0]
    D = np.zeros((3 * p, 11 * n + 3 * m + p))
    for o in range(p):
        c, pt = obs[o]
        for row, r in ((0, 2 * o), (1, 2 * o + 1), (2, 2 * p + o)):
            D[r, 11 * c:11 * c + 11] = blocks[o, row, 0:11]
            D[r, 11 * n + 3 * pt:11 * n + 3 * pt + 3] = blocks[o, row, 11:14]
            D[r, 11 * n + 3 * m + o] = blocks[o, row, 14]
    return D


def measure_tools(makers, args, ref, cfg):
    """Prepare, check and time ``{tool: maker}`` on ``args``: {tool: result dict}."""
    res, fns = {}, {}
    for tool, make in makers.items():
        try:
            fn = make()
            got = np.asarray(fn(*args))
            err = adbench_err(got, ref)
            if err > TOL:
                res[tool] = {"status": "mismatch", "err": err}
                continue
            fns[tool] = lambda fn=fn: fn(*args)
            res[tool] = {"status": "ok", "err": err}
        except ImportError as e:
            res[tool] = {"status": "missing", "message": failure_message(e)}
        except Exception as e:          # a tool's failure is its row's status
            res[tool] = {"status": "failed", "message": failure_message(e)}
    reps = {t: calibrate(f, cfg.min_time)[0] for t, f in fns.items()}
    times = interleaved(fns, reps, cfg.samples, cfg.case_budget_s)
    for t, ts in times.items():
        ts = sorted(ts)
        res[t].update(median_s=ts[len(ts) // 2], min_s=ts[0], max_s=ts[-1], samples=len(ts))
    return res


def measure_ba_jacobian(cfg, tools):
    """The section's rows (see the module docstring) for the sizes of ``cfg`` among
    ``SIZES``; JAX's columns when ``"jax"`` is in ``tools``."""
    rows = []
    with_jax = "jax" in tools
    for size in [s for s in SIZES if s in cfg.sizes]:
        cams, X, w, obs, feats = ba.make_inputs(size, seed=cfg.seed)
        C, P = cams[obs[:, 0]], X[obs[:, 1]]
        hand = handwritten_blocks(C, P, w, feats)
        makers = {"coarsen": _coarsen_blocks}
        if with_jax:
            makers.update(jax_jacfwd=lambda: _jax_blocks("jacfwd"),
                          jax_jacrev=lambda: _jax_blocks("jacrev"))
        makers["handwritten"] = lambda: handwritten_blocks
        rows.append({"variant": "blocks", "size": size, "dims": ba.SIZES[size],
                     "tools": measure_tools(makers, (C, P, w, feats), hand, cfg)})
        if size in DENSE_SIZES:
            makers = {"coarsen": _coarsen_dense}
            if with_jax:
                makers.update(jax_jacfwd=lambda: _jax_dense("jacfwd"),
                              jax_jacrev=lambda: _jax_dense("jacrev"))
            rows.append({"variant": "dense", "size": size, "dims": ba.SIZES[size],
                         "tools": measure_tools(makers, (cams, X, w, obs, feats),
                                           dense_of_blocks(hand, cams, X, obs), cfg)})
    return rows


def render(rows):
    """The report's section (markdown lines); nothing when there are no rows."""
    if not rows:
        return []
    lines = ["## ADBench BA Jacobian: median time per call [min, max]", "",
             "`blocks`: the (p, 3, 15) per-observation blocks (coarsen: one vector `coarsen.jvp` of "
             "15 compressed directions; JAX: `jit(vmap(jacfwd/jacrev(residual)))`); `dense`: the "
             "dense (3p, 11n + 3m + p) matrix (coarsen: `coarsen.jacobian`; JAX: "
             "`jit(jacfwd/jacrev)`). Checked against the hand-written blocks (ADBench's error "
             f"<= {TOL:g}).", "",
             "| variant | size (n, m, p) | " + " | ".join(TOOLS) + " |",
             "|---" * (len(TOOLS) + 2) + "|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['size']} {tuple(r['dims'])} | "
                     + " | ".join(tool_cells(r["tools"], TOOLS)) + " |")
    return lines + [""]


def tool_cells(results, tools):
    """A table row's cells: each tool's median [min, max], its status, or ``-``."""
    cells = []
    for t in tools:
        x = results.get(t)
        if x is None:
            cells.append("-")
        elif x.get("median_s") is None:
            cells.append(x["status"])
        else:
            cells.append(f"{fmt_time(x['median_s'])} [{fmt_time(x['min_s'])}, "
                         f"{fmt_time(x['max_s'])}]")
    return cells
