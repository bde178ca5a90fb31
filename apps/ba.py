"""ADBench's bundle adjustment, as a scalar objective.

ADBench's BA computes a vector of residuals and its sparse Jacobian.  coarsen's API is the
gradient of a scalar, so the benchmark differentiates

    objective = 1/2 ||r||^2 = 1/2 sum_obs ||w_o (project(cam_c, X_p) - feat_o)||^2
                              + 1/2 sum_obs (1 - w_o^2)^2

with respect to the cameras (n, 11), the points (m, 3) and the weights (p,): that is J^T r, which
costs about what one reverse sweep over ADBench's residuals costs.  The residuals themselves are
checked against ADBench's reference values (:func:`residuals`), and the first row of ADBench's
Jacobian (15 values: 11 camera, 3 point, 1 weight) is the gradient of the scalar per-residual
function :func:`reproj_x` (and in :func:`handwritten_jacobian_row`).

Camera layout (ADBench): rotation 0:3 (Rodrigues), centre 3:6, focal 6, principal point 7:9,
radial distortion 9:11.  ``obs[o] = (camera index, point index)`` (int64).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps._common import adbench_dir, check_size, rng

WRT = ("cams", "X", "w")

#: size -> (n cameras, m points, p observations); "l" is ADBench's ba1 (n49 m7776 p31843).
SIZES = {"s": (2, 5, 8), "m": (16, 500, 2000), "l": (49, 7776, 31843)}


def objective(cams, X, w, obs, feats):
    p = obs.shape[0]
    total = 0.0
    for o in range(p):
        c = obs[o, 0]
        pt = obs[o, 1]
        x0 = X[pt, 0] - cams[c, 3]
        x1 = X[pt, 1] - cams[c, 4]
        x2 = X[pt, 2] - cams[c, 5]
        r0 = cams[c, 0]
        r1 = cams[c, 1]
        r2 = cams[c, 2]
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
        distortion = 1.0 + cams[c, 9] * rsq + cams[c, 10] * rsq * rsq
        e0 = w[o] * (p0 * distortion * cams[c, 6] + cams[c, 7] - feats[o, 0])
        e1 = w[o] * (p1 * distortion * cams[c, 6] + cams[c, 8] - feats[o, 1])
        total += e0 * e0 + e1 * e1
    for o in range(p):
        werr = 1.0 - w[o] * w[o]
        total += werr * werr
    return 0.5 * total


primal_numba = numba.njit(objective)


def reproj_x(cam, pt, w, feat):
    """The x reprojection residual of one observation: its gradient w.r.t. (cam, pt, w) is the
    first row of ADBench's BA Jacobian (11 + 3 + 1 values)."""
    x0 = pt[0] - cam[3]
    x1 = pt[1] - cam[4]
    x2 = pt[2] - cam[5]
    r0 = cam[0]
    r1 = cam[1]
    r2 = cam[2]
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
        y2 = x2 * costheta + (w0 * x1 - w1 * x0) * sintheta + w2 * tmp
        y1 = x1 * costheta + (w2 * x0 - w0 * x2) * sintheta + w1 * tmp
    else:
        y0 = x0 + (r1 * x2 - r2 * x1)
        y1 = x1 + (r2 * x0 - r0 * x2)
        y2 = x2 + (r0 * x1 - r1 * x0)
    p0 = y0 / y2
    p1 = y1 / y2
    rsq = p0 * p0 + p1 * p1
    distortion = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
    return w * (p0 * distortion * cam[6] + cam[7] - feat[0])


@numba.njit
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@numba.njit
def _proj_jac(cam, pt, w, feat, J):
    """Residuals (e0, e1) of one observation; writes their 2 x 15 Jacobian into J.

    Hand-written reverse sweep of the projection, once per residual component."""
    r0, r1, r2 = cam[0], cam[1], cam[2]
    x0, x1, x2 = pt[0] - cam[3], pt[1] - cam[4], pt[2] - cam[5]
    sq = r0 * r0 + r1 * r1 + r2 * r2
    rot = sq != 0.0
    if rot:
        th = math.sqrt(sq)
        ct = math.cos(th)
        st = math.sin(th)
        inv = 1.0 / th
        w0, w1, w2 = r0 * inv, r1 * inv, r2 * inv
        c0, c1, c2 = _cross(w0, w1, w2, x0, x1, x2)
        dwx = w0 * x0 + w1 * x1 + w2 * x2
        tmp = (1.0 - ct) * dwx
        y0 = x0 * ct + c0 * st + w0 * tmp
        y1 = x1 * ct + c1 * st + w1 * tmp
        y2 = x2 * ct + c2 * st + w2 * tmp
    else:
        th = ct = st = inv = w0 = w1 = w2 = c0 = c1 = c2 = dwx = tmp = 0.0
        a0, a1, a2 = _cross(r0, r1, r2, x0, x1, x2)
        y0, y1, y2 = x0 + a0, x1 + a1, x2 + a2
    p0 = y0 / y2
    p1 = y1 / y2
    rsq = p0 * p0 + p1 * p1
    k1, k2, f = cam[9], cam[10], cam[6]
    Ld = 1.0 + k1 * rsq + k2 * rsq * rsq
    proj0 = p0 * Ld * f + cam[7]
    proj1 = p1 * Ld * f + cam[8]
    e0 = w * (proj0 - feat[0])
    e1 = w * (proj1 - feat[1])
    for row in range(2):
        eb0 = 1.0 if row == 0 else 0.0
        eb1 = 1.0 - eb0
        g = J[row]
        g[:] = 0.0
        g[14] = eb0 * (proj0 - feat[0]) + eb1 * (proj1 - feat[1])
        pb0, pb1 = w * eb0, w * eb1
        g[7] = pb0
        g[8] = pb1
        g[6] = pb0 * p0 * Ld + pb1 * p1 * Ld
        db0, db1 = pb0 * f, pb1 * f
        p0b, p1b = db0 * Ld, db1 * Ld
        Lb = db0 * p0 + db1 * p1
        g[9] = Lb * rsq
        g[10] = Lb * rsq * rsq
        rsqb = Lb * (k1 + 2.0 * k2 * rsq)
        p0b += 2.0 * p0 * rsqb
        p1b += 2.0 * p1 * rsqb
        yb0 = p0b / y2
        yb1 = p1b / y2
        yb2 = -(p0b * p0 + p1b * p1) / y2
        if rot:
            xb0, xb1, xb2 = yb0 * ct, yb1 * ct, yb2 * ct
            ctb = yb0 * x0 + yb1 * x1 + yb2 * x2
            cb0, cb1, cb2 = yb0 * st, yb1 * st, yb2 * st
            stb = yb0 * c0 + yb1 * c1 + yb2 * c2
            wb0, wb1, wb2 = yb0 * tmp, yb1 * tmp, yb2 * tmp
            tmpb = yb0 * w0 + yb1 * w1 + yb2 * w2
            ctb -= tmpb * dwx
            dwxb = tmpb * (1.0 - ct)
            wb0 += dwxb * x0
            wb1 += dwxb * x1
            wb2 += dwxb * x2
            xb0 += dwxb * w0
            xb1 += dwxb * w1
            xb2 += dwxb * w2
            # c = w x x:  w_bar += x x c_bar ; x_bar += c_bar x w
            t0, t1, t2 = _cross(x0, x1, x2, cb0, cb1, cb2)
            wb0 += t0
            wb1 += t1
            wb2 += t2
            t0, t1, t2 = _cross(cb0, cb1, cb2, w0, w1, w2)
            xb0 += t0
            xb1 += t1
            xb2 += t2
            invb = wb0 * r0 + wb1 * r1 + wb2 * r2
            thb = -invb * inv * inv - ctb * st + stb * ct
            sqb = thb / (2.0 * th)
            g[0] = wb0 * inv + 2.0 * r0 * sqb
            g[1] = wb1 * inv + 2.0 * r1 * sqb
            g[2] = wb2 * inv + 2.0 * r2 * sqb
        else:
            # y = x + r x x
            t0, t1, t2 = _cross(x0, x1, x2, yb0, yb1, yb2)
            g[0], g[1], g[2] = t0, t1, t2
            t0, t1, t2 = _cross(yb0, yb1, yb2, r0, r1, r2)
            xb0, xb1, xb2 = yb0 + t0, yb1 + t1, yb2 + t2
        g[3], g[4], g[5] = -xb0, -xb1, -xb2
        g[11], g[12], g[13] = xb0, xb1, xb2
    return e0, e1


@numba.njit
def residuals(cams, X, w, obs, feats):
    """ADBench's residuals: reprojection errors (p, 2) and weight errors (p,)."""
    p = obs.shape[0]
    reproj = np.zeros((p, 2))
    werr = np.zeros(p)
    J = np.zeros((2, 15))
    for o in range(p):
        e0, e1 = _proj_jac(cams[obs[o, 0]], X[obs[o, 1]], w[o], feats[o], J)
        reproj[o, 0] = e0
        reproj[o, 1] = e1
        werr[o] = 1.0 - w[o] * w[o]
    return reproj, werr


@numba.njit
def handwritten_jacobian_row(cam, pt, w, feat):
    """The 15 non-zeros of the first reprojection row of ADBench's Jacobian."""
    J = np.zeros((2, 15))
    _proj_jac(cam, pt, w, feat, J)
    return J[0].copy()


@numba.njit
def handwritten_jacobian_block(cam, pt, w, feat, J):
    """The residuals of one observation; writes their 2 x 15 Jacobian into ``J`` (camera
    0:11, point 11:14, weight 14)."""
    return _proj_jac(cam, pt, w, feat, J)


@numba.njit
def handwritten_grad(cams, X, w, obs, feats):
    """J^T r for the objective 1/2 ||r||^2, from the hand-written per-observation Jacobian."""
    p = obs.shape[0]
    gc = np.zeros(cams.shape)
    gX = np.zeros(X.shape)
    gw = np.zeros(w.shape[0])
    J = np.zeros((2, 15))
    for o in range(p):
        c = obs[o, 0]
        pt = obs[o, 1]
        e0, e1 = _proj_jac(cams[c], X[pt], w[o], feats[o], J)
        for j in range(11):
            gc[c, j] += J[0, j] * e0 + J[1, j] * e1
        for j in range(3):
            gX[pt, j] += J[0, 11 + j] * e0 + J[1, 11 + j] * e1
        gw[o] += J[0, 14] * e0 + J[1, 14] * e1 - 2.0 * w[o] * (1.0 - w[o] * w[o])
    return gc, gX, gw


def xp_objective(xp, cams, X, w, obs, feats):
    """Vectorized over observations (autograd.numpy, NumPy, the torch shim)."""
    C = cams[obs[:, 0]]
    P = X[obs[:, 1]]
    r0, r1, r2 = C[:, 0], C[:, 1], C[:, 2]
    x0, x1, x2 = P[:, 0] - C[:, 3], P[:, 1] - C[:, 4], P[:, 2] - C[:, 5]
    theta = xp.sqrt(r0 * r0 + r1 * r1 + r2 * r2)  # the data has no zero rotations
    ct, st = xp.cos(theta), xp.sin(theta)
    w0, w1, w2 = r0 / theta, r1 / theta, r2 / theta
    tmp = (1.0 - ct) * (w0 * x0 + w1 * x1 + w2 * x2)
    y0 = x0 * ct + (w1 * x2 - w2 * x1) * st + w0 * tmp
    y1 = x1 * ct + (w2 * x0 - w0 * x2) * st + w1 * tmp
    y2 = x2 * ct + (w0 * x1 - w1 * x0) * st + w2 * tmp
    p0, p1 = y0 / y2, y1 / y2
    rsq = p0 * p0 + p1 * p1
    dist = 1.0 + C[:, 9] * rsq + C[:, 10] * rsq * rsq
    e0 = w * (p0 * dist * C[:, 6] + C[:, 7] - feats[:, 0])
    e1 = w * (p1 * dist * C[:, 6] + C[:, 8] - feats[:, 1])
    werr = 1.0 - w * w
    return 0.5 * (xp.sum(e0 * e0) + xp.sum(e1 * e1) + xp.sum(werr * werr))


def jax_objective(cams, X, w, obs, feats):
    """Idiomatic JAX: a per-observation residual function, ``vmap``-ed over observations."""
    import jax
    import jax.numpy as jnp

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
        p = y[:2] / y[2]
        rsq = jnp.sum(p * p)
        p = p * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
        return wo * (p * cam[6] + cam[7:9] - feat)

    r = jax.vmap(residual)(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
    return 0.5 * (jnp.sum(r * r) + jnp.sum((1.0 - w * w) ** 2))


def make_inputs(size="s", seed=0):
    """Random but well-posed cameras looking down +z at points around z = 8; observation o
    links camera o mod n to point o mod m, as ADBench's reader does."""
    n, m, p = check_size(size, SIZES)
    r = rng(seed)
    cams = np.zeros((n, 11))
    cams[:, 0:3] = 0.2 * r.standard_normal((n, 3))
    cams[:, 3:6] = 0.5 * r.standard_normal((n, 3))
    cams[:, 6] = 400.0 + 100.0 * r.uniform(size=n)
    cams[:, 7:9] = r.standard_normal((n, 2))
    cams[:, 9:11] = 1e-3 * r.standard_normal((n, 2))
    X = r.standard_normal((m, 3)) + np.array([0.0, 0.0, 8.0])
    w = r.uniform(0.5, 1.5, size=p)
    j = np.arange(p)
    obs = np.stack([j % n, j % m], axis=1).astype(np.int64)
    feats = 50.0 * r.standard_normal((p, 2))
    return cams, X, w, obs, feats


def read_ba(path):
    """Read ADBench's ba format and tile it as ADBench's reader does (see the module doc)."""
    with open(path) as fh:
        tok = fh.read().split()
    n, m, p = int(tok[0]), int(tok[1]), int(tok[2])
    vals = [float(t) for t in tok[3:3 + 11 + 3 + 1 + 2]]
    cams = np.tile(np.array(vals[0:11]), (n, 1))
    X = np.tile(np.array(vals[11:14]), (m, 1))
    w = np.full(p, vals[14])
    feats = np.tile(np.array(vals[15:17]), (p, 1))
    j = np.arange(p)
    obs = np.stack([j % n, j % m], axis=1).astype(np.int64)
    return cams, X, w, obs, feats


REFERENCE_REPROJ = np.array([-2.69048849235189402e-01, 2.59944792677901881e-01])
REFERENCE_WERR = 8.26092651515999976e-01
REFERENCE_JAC_ROW = np.array([
    2.28877202208246757e+02, 6.34574811495545418e+02, -7.82222866259340549e+02,
    2.42892615607159668e+00, -1.17828079628011313e+01, 2.54169312487743460e+00,
    -1.03657084958518086e+00, 4.17022e-01, 0.0, -3.50739521096005205e+02,
    -9.12107773668008576e+02, -2.42892615607159668e+00, 1.17828079628011313e+01,
    -2.54169312487743460e+00, -6.45167039712987389e-01,
])
REFERENCE_WEIGHT_JAC = -8.34044e-01


def adbench_test_inputs():
    """The argument tuple for ADBench's ba/test.txt, or ``None`` when the file is absent."""
    base = adbench_dir()
    if base is None or not (base / "ba" / "test.txt").is_file():
        return None
    return read_ba(base / "ba" / "test.txt")
