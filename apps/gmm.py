"""ADBench's Gaussian mixture model: negative log-likelihood with a Wishart prior.

The objective follows ADBench's definition exactly (see ``../shared/adbench/README.md`` and
ADBench's ``gmm.h``).  With ``Q_k = diag(exp(q_k)) + L_k`` (``L_k`` strictly lower triangular,
filled column by column from ``l_k``; ``icf_k = (q_k, l_k)``)::

    f = -n d/2 log(2 pi)
        + sum_i logsumexp_k(alpha_k + sum(q_k) - 1/2 ||Q_k (x_i - mu_k)||^2)
        - n logsumexp_k(alpha_k)
        + sum_k (gamma^2/2 (||exp(q_k)||^2 + ||l_k||^2) - m sum(q_k))
        - K ((d+m+1) d log(gamma/sqrt 2) - multigammaln((d+m+1)/2, d))

Parameters: ``alphas`` (K,), ``means`` (K, d), ``icf`` (K, d + d(d-1)/2); data ``x`` (n, d),
``wishart_gamma`` (float), ``wishart_m`` (int).  Flattened row by row, the gradient in ``WRT``
order is ADBench's gradient vector.

:func:`read_gmm` reads ADBench's file format (including its replicate-point mode).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from apps._common import adbench_dir, check_size, rng

WRT = ("alphas", "means", "icf")

#: size -> (d, K, n).  "m" and "l" match ADBench's gmm_d10_K5 and gmm_d10_K25 (1k points).
SIZES = {"s": (2, 3, 4), "m": (10, 5, 1000), "l": (10, 25, 1000)}


def objective(alphas, means, icf, x, wishart_gamma, wishart_m):
    K = means.shape[0]
    d = means.shape[1]
    n = x.shape[0]
    icf_sz = icf.shape[1]
    main_term = np.zeros(K)
    qx = np.zeros(d)
    slse = 0.0
    for i in range(n):
        for k in range(K):
            sum_q = 0.0
            for j in range(d):
                sum_q += icf[k, j]
                qx[j] = math.exp(icf[k, j]) * (x[i, j] - means[k, j])
            idx = d
            for j in range(d):
                for l in range(j + 1, d):
                    qx[l] += icf[k, idx] * (x[i, j] - means[k, j])
                    idx += 1
            sq = 0.0
            for j in range(d):
                sq += qx[j] * qx[j]
            main_term[k] = alphas[k] + sum_q - 0.5 * sq
        mx = main_term[0]
        for k in range(1, K):
            if main_term[k] > mx:
                mx = main_term[k]
        se = 0.0
        for k in range(K):
            se += math.exp(main_term[k] - mx)
        slse += mx + math.log(se)

    amax = alphas[0]
    for k in range(1, K):
        if alphas[k] > amax:
            amax = alphas[k]
    ase = 0.0
    for k in range(K):
        ase += math.exp(alphas[k] - amax)
    lse_alphas = amax + math.log(ase)

    # Wishart prior
    nn = d + wishart_m + 1
    lgd = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(1, d + 1):
        lgd += math.lgamma(0.5 * nn + 0.5 * (1 - j))
    C = nn * d * (math.log(wishart_gamma) - 0.5 * math.log(2.0)) - lgd
    prior = 0.0
    for k in range(K):
        fro = 0.0
        sum_q = 0.0
        for j in range(d):
            e = math.exp(icf[k, j])
            fro += e * e
            sum_q += icf[k, j]
        for j in range(d, icf_sz):
            fro += icf[k, j] * icf[k, j]
        prior += 0.5 * wishart_gamma * wishart_gamma * fro - wishart_m * sum_q
    prior -= K * C

    const = -n * d * 0.5 * math.log(2.0 * math.pi)
    return const + slse - n * lse_alphas + prior


primal_numba = numba.njit(cache=False)(objective)


@numba.njit
def handwritten_grad(alphas, means, icf, x, wishart_gamma, wishart_m):
    """Hand-derived gradient (alphas, means, icf)."""
    K, d = means.shape
    n = x.shape[0]
    icf_sz = icf.shape[1]
    g_alphas = np.zeros(K)
    g_means = np.zeros((K, d))
    g_icf = np.zeros((K, icf_sz))
    main = np.zeros(K)
    xc = np.zeros((K, d))
    qx = np.zeros((K, d))
    Qd = np.exp(icf[:, :d])
    for i in range(n):
        for k in range(K):
            sq = 0.0
            sum_q = 0.0
            for j in range(d):
                xc[k, j] = x[i, j] - means[k, j]
                qx[k, j] = Qd[k, j] * xc[k, j]
                sum_q += icf[k, j]
            idx = d
            for j in range(d):
                for l in range(j + 1, d):
                    qx[k, l] += icf[k, idx] * xc[k, j]
                    idx += 1
            for j in range(d):
                sq += qx[k, j] * qx[k, j]
            main[k] = alphas[k] + sum_q - 0.5 * sq
        mx = main.max()
        se = 0.0
        for k in range(K):
            main[k] = math.exp(main[k] - mx)
            se += main[k]
        for k in range(K):
            w = main[k] / se  # d f / d main_k
            g_alphas[k] += w
            # d main / d q_kj = 1 - qx_j * Qd_j * xc_j ; d main / d L[l, j] = -qx_l * xc_j
            # d main / d mu_k = Q^T qx
            for j in range(d):
                g_icf[k, j] += w * (1.0 - qx[k, j] * Qd[k, j] * xc[k, j])
                g_means[k, j] += w * Qd[k, j] * qx[k, j]
            idx = d
            for j in range(d):
                for l in range(j + 1, d):
                    g_icf[k, idx] -= w * qx[k, l] * xc[k, j]
                    g_means[k, j] += w * icf[k, idx] * qx[k, l]
                    idx += 1
    amax = alphas.max()
    ea = np.exp(alphas - amax)
    g_alphas -= n * ea / ea.sum()
    g2 = wishart_gamma * wishart_gamma
    for k in range(K):
        for j in range(d):
            g_icf[k, j] += g2 * Qd[k, j] * Qd[k, j] - wishart_m
        for j in range(d, icf_sz):
            g_icf[k, j] += g2 * icf[k, j]
    return g_alphas, g_means, g_icf


def _lower_map(d):
    """0/1 matrix E with (l @ E).reshape(d, d) = L, L filled column by column (ADBench)."""
    nl = d * (d - 1) // 2
    E = np.zeros((nl, d * d))
    idx = 0
    for j in range(d):
        for l in range(j + 1, d):
            E[idx, l * d + j] = 1.0
            idx += 1
    return E


def _prior_const(d, K, wishart_gamma, wishart_m):
    nn = d + wishart_m + 1
    lgd = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(1, d + 1):
        lgd += math.lgamma(0.5 * nn + 0.5 * (1 - j))
    return K * (nn * d * (math.log(wishart_gamma) - 0.5 * math.log(2.0)) - lgd)


def xp_objective(xp, alphas, means, icf, x, wishart_gamma, wishart_m):
    """Vectorized version over an array namespace (autograd.numpy, NumPy, the torch shim)."""
    K, d = means.shape
    n = x.shape[0]
    qs = icf[:, :d]
    Qdiag = xp.exp(qs)
    sum_qs = xp.sum(qs, axis=1)
    L = (icf[:, d:] @ xp.asarray(_lower_map(d))).reshape(K, d, d)
    xc = x[:, None, :] - means[None, :, :]                           # n, K, d
    Qxc = Qdiag[None, :, :] * xc + xp.sum(L[None, :, :, :] * xc[:, :, None, :], axis=3)
    main = alphas[None, :] + sum_qs[None, :] - 0.5 * xp.sum(Qxc * Qxc, axis=2)
    mx = xp.max(main, axis=1, keepdims=True)
    slse = xp.sum(mx[:, 0] + xp.log(xp.sum(xp.exp(main - mx), axis=1)))
    amax = xp.max(alphas)
    lse_alphas = amax + xp.log(xp.sum(xp.exp(alphas - amax)))
    prior = xp.sum(0.5 * wishart_gamma ** 2 * (xp.sum(Qdiag * Qdiag, axis=1)
                                               + xp.sum(icf[:, d:] * icf[:, d:], axis=1))
                   - wishart_m * sum_qs)
    const = -n * d * 0.5 * math.log(2.0 * math.pi)
    return const + slse - n * lse_alphas + prior - _prior_const(d, K, wishart_gamma, wishart_m)


def jax_objective(alphas, means, icf, x, wishart_gamma, wishart_m):
    """Idiomatic JAX: vectorized with ``jax.scipy.special.logsumexp``."""
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    K, d = means.shape
    n = x.shape[0]
    qs = icf[:, :d]
    Qdiag = jnp.exp(qs)
    L = (icf[:, d:] @ jnp.asarray(_lower_map(d))).reshape(K, d, d)
    xc = x[:, None, :] - means[None, :, :]
    Qxc = Qdiag[None] * xc + jnp.einsum("klj,nkj->nkl", L, xc)
    main = alphas + jnp.sum(qs, axis=1) - 0.5 * jnp.sum(Qxc ** 2, axis=2)
    prior = jnp.sum(0.5 * wishart_gamma ** 2 * (jnp.sum(Qdiag ** 2, axis=1)
                                                + jnp.sum(icf[:, d:] ** 2, axis=1))
                    - wishart_m * jnp.sum(qs, axis=1))
    const = -n * d * 0.5 * math.log(2.0 * math.pi)
    return (const + jnp.sum(logsumexp(main, axis=1)) - n * logsumexp(alphas) + prior
            - _prior_const(d, K, wishart_gamma, wishart_m))


def make_inputs(size="s", seed=0):
    """Random inputs like ADBench's generator: alphas ~ N(0,1), means ~ U(0,1), icf ~ N(0,1)/2,
    x ~ U(0,1); Wishart gamma = 1, m = 0."""
    d, K, n = check_size(size, SIZES)
    r = rng(seed)
    alphas = r.standard_normal(K)
    means = r.uniform(size=(K, d))
    icf = 0.5 * r.standard_normal((K, d + d * (d - 1) // 2))
    x = r.uniform(size=(n, d))
    return alphas, means, icf, x, 1.0, 0


def read_gmm(path, replicate_point=False):
    """Read ADBench's gmm format: ``d K n``; K alphas; K means; K icf rows; the points; ``gamma m``.

    In replicate-point mode (or when the file holds a single point but ``n > 1``) the one point
    line is repeated n times.  Returns the argument tuple of :func:`objective`.
    """
    with open(path) as fh:
        lines = [ln.split() for ln in fh if ln.strip()]
    d, K, n = (int(v) for v in lines[0])
    pos = 1
    alphas = np.array([float(lines[pos + k][0]) for k in range(K)])
    pos += K
    means = np.array([[float(v) for v in lines[pos + k][:d]] for k in range(K)])
    pos += K
    icf_sz = d + d * (d - 1) // 2
    icf = np.array([[float(v) for v in lines[pos + k][:icf_sz]] for k in range(K)])
    pos += K
    n_x_lines = len(lines) - pos - 1
    if replicate_point or (n_x_lines == 1 and n > 1):
        x = np.tile(np.array([float(v) for v in lines[pos][:d]]), (n, 1))
        pos += 1
    else:
        x = np.array([[float(v) for v in lines[pos + i][:d]] for i in range(n)])
        pos += n
    wishart_gamma = float(lines[pos][0])
    wishart_m = int(float(lines[pos][1]))
    return alphas, means, icf, x, wishart_gamma, wishart_m


#: ADBench's reference on gmm/test.txt.
REFERENCE_OBJECTIVE = 8.07380408004975791
REFERENCE_GRADIENT = np.array([
    1.08662855508652456e-01, -7.41270039523898472e-01, 6.32607184015246071e-01,
    1.11692576532787013e+00, 1.63333013551455269e-01, -2.19989824071193142e-02,
    2.27778292254236098e-01, 1.20963025612832187e+00, -6.06375920733956339e-02,
    2.58529994051162237e+00, 1.12632694524213789e-01, 3.85744309849611777e-01,
    7.35180573182305508e-02, 5.41836362715595232e+00, -3.21494409677446469e-01,
    1.71892309775004937e+00, 8.60091090790866875e-01, -9.94640930466322848e-01,
])


def adbench_test_inputs():
    """The argument tuple for ADBench's gmm/test.txt, or ``None`` when the file is absent."""
    base = adbench_dir()
    if base is None or not (base / "gmm" / "test.txt").is_file():
        return None
    return read_gmm(base / "gmm" / "test.txt")
