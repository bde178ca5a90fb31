"""Applications: every gradient against an independent finite-difference oracle, at size "s".

The hand-written gradients and coarsen's gradients (coarse and fine) are compared with
Richardson-extrapolated central differences (``fd_oracle``); the ADBench cases are compared with
ADBench's published reference values when ``../shared/adbench`` is present.  coarsen tests skip
only when ``coarsen.differentiate`` does not exist yet or raises ``NotImplementedError``; any other
exception (``CoarsenError`` included) is a failure worth reporting.
"""
from __future__ import annotations

import numpy as np
import pytest

import apps
from apps._common import adbench_err, flat
from fd_oracle import fd_grad

APP_NAMES = list(apps.APP_NAMES)

#: ADBench's measure |x-y|/max(1,|x|+|y|); central differences are good to ~1e-9 here.
FD_TOL = 1e-6
#: what an exact gradient must meet against another exact one
EXACT_TOL = 1e-8

_fd_cache: dict = {}


def _oracle(name):
    if name not in _fd_cache:
        mod = apps.load(name)
        args = mod.make_inputs("s", seed=0)
        _fd_cache[name] = fd_grad(mod.objective, args, mod.WRT)
    return _fd_cache[name]


def _differentiate(fn, wrt, **kw):
    try:
        import coarsen
        diff = coarsen.differentiate
    except (ImportError, AttributeError):
        pytest.skip("coarsen.differentiate is not available yet")
    try:
        return diff(fn, wrt=wrt, **kw)
    except NotImplementedError as e:
        pytest.skip(f"coarsen: not implemented: {e}")


def _call(g, args):
    try:
        return g(*args)
    except NotImplementedError as e:
        pytest.skip(f"coarsen: not implemented: {e}")


@pytest.mark.parametrize("name", APP_NAMES)
def test_interface(name):
    mod = apps.load(name)
    assert callable(mod.objective) and callable(mod.handwritten_grad)
    assert isinstance(mod.WRT, tuple) and mod.WRT
    for size in ("s", "m", "l"):
        assert size in mod.SIZES
    args = mod.make_inputs("s", seed=0)
    value = mod.objective(*args)
    assert isinstance(value, float) and np.isfinite(value)
    # the Numba primal and the vectorized NumPy version compute the same value
    assert adbench_err(mod.primal_numba(*args), value) <= 1e-12
    assert adbench_err(mod.xp_objective(np, *args), value) <= 1e-12
    # make_inputs is deterministic
    again = mod.make_inputs("s", seed=0)
    for a, b in zip(args, again):
        assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", APP_NAMES)
def test_handwritten_vs_fd(name):
    mod = apps.load(name)
    args = mod.make_inputs("s", seed=0)
    grads = mod.handwritten_grad(*args)
    assert len(grads) == len(mod.WRT)
    ref = _oracle(name)
    for g, r, w in zip(grads, ref, mod.WRT):
        assert np.shape(g) == np.shape(r), w
    err = adbench_err(grads, ref)
    assert err <= FD_TOL, f"{name}: handwritten vs finite differences: {err:.3g}"


@pytest.mark.parametrize("fine", [False, True], ids=["coarse", "fine"])
@pytest.mark.parametrize("name", APP_NAMES)
def test_coarsen_vs_fd(name, fine):
    mod = apps.load(name)
    args = mod.make_inputs("s", seed=0)
    g = _differentiate(mod.objective, mod.WRT, coarsen=not fine)
    grads = _call(g, args)
    assert isinstance(grads, tuple) and len(grads) == len(mod.WRT)
    ref = _oracle(name)
    err_fd = adbench_err(grads, ref)
    assert err_fd <= FD_TOL, f"{name}: coarsen vs finite differences: {err_fd:.3g}"
    # and to 1e-8 against the exact hand-written gradient
    err_hw = adbench_err(grads, mod.handwritten_grad(*args))
    assert err_hw <= EXACT_TOL, f"{name}: coarsen vs handwritten: {err_hw:.3g}"
    value, grads2 = g.value_and_grad(*args)
    assert adbench_err(value, mod.objective(*args)) <= 1e-12
    assert adbench_err(grads2, grads) == 0.0


@pytest.mark.parametrize("name", APP_NAMES)
def test_jax_version_matches(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    mod = apps.load(name)
    args = mod.make_inputs("s", seed=0)
    assert adbench_err(float(mod.jax_objective(*args)), mod.objective(*args)) <= 1e-12
    from apps.bench import jax_grad_fn  # the harness's own JAX wiring
    grads = jax_grad_fn(mod, args)()
    assert adbench_err(grads, mod.handwritten_grad(*args)) <= EXACT_TOL


# ---------------------------------------------------------------- ADBench reference values

def _gmm_test_args():
    from apps import gmm
    args = gmm.adbench_test_inputs()
    if args is None:
        pytest.skip("ADBench data (../shared/adbench) not present")
    return gmm, args


def test_gmm_adbench_reference_handwritten():
    gmm, args = _gmm_test_args()
    assert adbench_err(gmm.objective(*args), gmm.REFERENCE_OBJECTIVE) <= EXACT_TOL
    assert adbench_err(gmm.primal_numba(*args), gmm.REFERENCE_OBJECTIVE) <= EXACT_TOL
    grads = gmm.handwritten_grad(*args)
    assert flat(grads).shape == (18,)
    assert adbench_err(grads, gmm.REFERENCE_GRADIENT) <= EXACT_TOL


@pytest.mark.parametrize("fine", [False, True], ids=["coarse", "fine"])
def test_gmm_adbench_reference_coarsen(fine):
    gmm, args = _gmm_test_args()
    g = _differentiate(gmm.objective, gmm.WRT, coarsen=not fine)
    value, grads = _call(g.value_and_grad, args)
    assert adbench_err(value, gmm.REFERENCE_OBJECTIVE) <= EXACT_TOL
    assert adbench_err(grads, gmm.REFERENCE_GRADIENT) <= EXACT_TOL


def test_gmm_reader_1k(tmp_path):
    from apps import gmm
    from apps._common import adbench_dir
    base = adbench_dir()
    path = None if base is None else base / "gmm" / "gmm_d2_K5.txt"
    if path is None or not path.is_file():
        pytest.skip("ADBench data (../shared/adbench) not present")
    args = gmm.read_gmm(path)
    assert args[0].shape == (5,) and args[1].shape == (5, 2) and args[3].shape == (1000, 2)
    # replicate-point mode: a file with one point line and n > 1
    lines = path.read_text().splitlines()
    short = lines[:1 + 3 * 5 + 1] + [lines[-1]]
    p = tmp_path / "rep.txt"
    p.write_text("\n".join(short) + "\n")
    rep = gmm.read_gmm(p)
    assert rep[3].shape == (1000, 2) and np.all(rep[3] == args[3][0])
    assert rep[4] == args[4] and rep[5] == args[5]


def _ba_test_args():
    from apps import ba
    args = ba.adbench_test_inputs()
    if args is None:
        pytest.skip("ADBench data (../shared/adbench) not present")
    return ba, args


def test_ba_adbench_residuals_and_jacobian_handwritten():
    ba, args = _ba_test_args()
    cams, X, w, obs, feats = args
    reproj, werr = ba.residuals(*args)
    assert reproj.shape == (10, 2) and werr.shape == (10,)
    assert adbench_err(reproj, np.tile(ba.REFERENCE_REPROJ, (10, 1))) <= EXACT_TOL
    assert adbench_err(werr, np.full(10, ba.REFERENCE_WERR)) <= EXACT_TOL
    row = ba.handwritten_jacobian_row(cams[0], X[0], w[0], feats[0])
    assert adbench_err(row, ba.REFERENCE_JAC_ROW) <= EXACT_TOL
    assert adbench_err(-2.0 * w[0], ba.REFERENCE_WEIGHT_JAC) <= EXACT_TOL
    assert adbench_err(ba.reproj_x(cams[0], X[0], w[0], feats[0]),
                       ba.REFERENCE_REPROJ[0]) <= EXACT_TOL
    # the scalar objective is 1/2 ||r||^2
    half = 0.5 * (np.sum(reproj ** 2) + np.sum(werr ** 2))
    assert adbench_err(ba.objective(*args), half) <= 1e-12


def test_ba_jacobian_row_fd():
    from apps import ba
    cams, X, w, obs, feats = ba.make_inputs("s", seed=0)
    for o in range(3):
        c, p = obs[o]
        args = (cams[c].copy(), X[p].copy(), float(w[o]), feats[o].copy())
        ref = fd_grad(ba.reproj_x, args, ("cam", "pt", "w"))
        row = ba.handwritten_jacobian_row(*args)
        assert adbench_err(row, ref) <= FD_TOL


@pytest.mark.parametrize("fine", [False, True], ids=["coarse", "fine"])
def test_ba_adbench_jacobian_row_coarsen(fine):
    ba, args = _ba_test_args()
    cams, X, w, obs, feats = args
    g = _differentiate(ba.reproj_x, ("cam", "pt", "w"), coarsen=not fine)
    row = _call(g, (cams[0], X[0], float(w[0]), feats[0]))
    assert adbench_err(row, ba.REFERENCE_JAC_ROW) <= EXACT_TOL


def test_ba_zero_rotation_branch():
    """The ||rot|| = 0 branch of the Rodrigues rotation, checked against finite differences
    (which stay on the branch only for the non-rotation parameters)."""
    from apps import ba
    cams, X, w, obs, feats = ba.make_inputs("s", seed=1)
    cam = cams[0].copy()
    cam[0:3] = 0.0
    args = (cam, X[0].copy(), float(w[0]), feats[0].copy())
    ref = fd_grad(lambda cam3, pt, w, feat: ba.reproj_x(np.concatenate([cam[:3], cam3]), pt, w,
                                                        feat),
                  (cam[3:].copy(),) + args[1:], ("cam3", "pt", "w"))
    row = ba.handwritten_jacobian_row(*args)
    assert adbench_err(row[3:], ref) <= FD_TOL
    # at rot = 0 the rotation part of the Jacobian is x cross e (first-order Rodrigues)
    assert np.all(np.isfinite(row))
