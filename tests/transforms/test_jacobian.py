"""coarsen.jacobian: forward-mode columns against reverse-mode rows, against the
extended-precision oracle, JAX's layout, ADBench's BA Jacobian, and refusals."""
import math

import numpy as np
import pytest

import coarsen
from apps import ba
from apps._common import adbench_err
from apps.bench.jacobians import dense_residuals as ba_residuals
from tests.oracle import fd_grad
from tests.zoo import realistic


# ------------------------------------------------------------------ vector-valued programs
def lv_state(p, u0, dt, n):
    """RK4 on Lotka-Volterra: the final state (2,)."""
    u = u0.copy()
    for _ in range(n):
        k1a = p[0] * u[0] - p[1] * u[0] * u[1]
        k1b = p[3] * u[0] * u[1] - p[2] * u[1]
        a = u[0] + 0.5 * dt * k1a
        b = u[1] + 0.5 * dt * k1b
        k2a = p[0] * a - p[1] * a * b
        k2b = p[3] * a * b - p[2] * b
        u[0] = u[0] + dt * k2a
        u[1] = u[1] + dt * k2b
    return u


def heat_profile(u0, kappa, steps):
    """Explicit heat equation on slices: the final profile."""
    u = u0.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + kappa * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return u


def softmax(z):
    e = np.exp(z - np.max(z))
    return e / np.sum(e)


def polar(r, theta):
    return r * math.cos(theta), r * math.sin(theta), r * r


def matrix_out(x):
    out = np.empty((2, 3))
    for i in range(2):
        for j in range(3):
            out[i, j] = math.sin(x[i] * (j + 1)) + x[i] * x[j]
    return out


def returns_int(x):
    return np.zeros(x.shape[0], dtype=np.int64) + 1


def mixed_returns(x):
    if x[0] > 0.0:
        return x[0], x[1]
    return x[0]


_rng = np.random.default_rng(7)
VECTOR_CASES = [
    (lv_state, lambda: (np.array([1.1, 0.4, 0.9, 0.3]), np.array([1.2, 0.8]), 0.05, 12), None),
    (heat_profile, lambda: (np.linspace(0.0, 1.0, 7) ** 2, 0.2, 5), ("u0", "kappa")),
    (softmax, lambda: (np.array([0.3, -1.2, 0.8, 0.1, 2.0]),), "z"),
    (polar, lambda: (1.3, 0.7), None),
    (matrix_out, lambda: (np.array([0.4, -0.9, 1.3]),), 0),
]
IDS = [c[0].__name__ for c in VECTOR_CASES]


def _flat_blocks(res, single):
    return [res] if single else list(res)


@pytest.fixture(scope="module")
def transforms():
    """One forward and one reverse Jacobian per case (python target), shared."""
    return {fn.__name__: (coarsen.jacobian(fn, wrt, mode="forward", target="python"),
                          coarsen.jacobian(fn, wrt, mode="reverse", target="python"))
            for fn, _, wrt in VECTOR_CASES}


@pytest.mark.parametrize("case", VECTOR_CASES, ids=IDS)
def test_columns_match_rows_and_the_oracle(case, transforms):
    fn, make, wrt = case
    fwd, rev = transforms[fn.__name__]
    args = make()
    before = [np.copy(a) for a in args]
    jf, jr = fwd(*args), rev(*args)
    single = wrt is not None and not isinstance(wrt, (tuple, list))
    names = list(fwd.params)
    pos = ([names.index(wrt) if isinstance(wrt, str) else wrt] if single else
           [names.index(w) for w in wrt] if wrt is not None else
           [k for k, a in enumerate(args) if isinstance(a, float) or
            (isinstance(a, np.ndarray) and a.dtype.kind == "f")])
    out = fn(*args)
    outs = list(out) if isinstance(out, tuple) else None
    if outs is not None:    # a tuple of scalars: one Jacobian per output
        pairs = [( _flat_blocks(a, single), _flat_blocks(b, single)) for a, b in zip(jf, jr)]
    else:
        pairs = [(_flat_blocks(jf, single), _flat_blocks(jr, single))]
    for a, b in pairs:
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
    # shapes: out.shape + in.shape
    oshape = () if outs is not None else np.shape(out)
    for blocks, _ in pairs:
        for k, p in zip(blocks, pos):
            assert np.shape(k) == oshape + np.shape(args[p])
    # the oracle, one output element at a time
    flat_out = np.ravel(np.asarray(out, dtype=np.float64))
    for i in range(flat_out.size):
        def comp(*a, _i=i, _fn=fn):
            return np.ravel(np.asarray(_fn(*a)))[_i]
        ref = fd_grad(comp, args, pos)
        if outs is not None:
            got = pairs[i][0]
        else:
            got = [np.reshape(k, (flat_out.size,) + np.shape(args[p]))[i]
                   for k, p in zip(pairs[0][0], pos)]
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, np.asarray(r, dtype=np.float64), rtol=1e-8, atol=1e-10)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", [c for c in realistic.CASES
                                  if c[0].__name__ in ("logreg_loss", "rk4_lotka_volterra",
                                                       "lennard_jones", "softmax_regression")],
                         ids=lambda c: c[0].__name__)
def test_scalar_programs_jacobian_is_the_gradient(case):
    """On realistic scalar programs: forward columns, the reverse row and differentiate agree."""
    fn, make, wrt = case
    args = make()
    jf = coarsen.jacobian(fn, wrt, mode="forward", target="python")(*args)
    jr = coarsen.jacobian(fn, wrt, mode="reverse", target="python")(*args)
    g = coarsen.differentiate(fn, wrt, target="python")(*args)
    single = wrt is not None and not isinstance(wrt, (tuple, list))
    for a, b, c in zip(_flat_blocks(jf, single), _flat_blocks(jr, single),
                       _flat_blocks(g, single)):
        np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(b, c)


def test_cpu_target_and_auto_mode():
    args = (np.array([1.1, 0.4, 0.9, 0.3]), np.array([1.2, 0.8]), 0.05, 12)
    J = coarsen.jacobian(lv_state, wrt=("p", "u0"))     # 6 inputs, 2 outputs: reverse
    jp, ju = J(*args)
    assert J.mode_used == "reverse" and jp.shape == (2, 4) and ju.shape == (2, 2)
    ref = coarsen.jacobian(lv_state, wrt=("p", "u0"), mode="forward", target="python")(*args)
    np.testing.assert_allclose(jp, ref[0], rtol=1e-12)
    np.testing.assert_allclose(ju, ref[1], rtol=1e-12)
    assert "value_and_grad" in J.source
    rep = J.report(file=open("/dev/null", "w"))
    assert rep.mode == "reverse" and rep.sweeps == 2
    K = coarsen.jacobian(matrix_out, wrt="x")           # 3 inputs, 6 outputs: forward
    k = K(np.array([0.4, -0.9, 1.3]))
    assert K.mode_used == "forward" and k.shape == (2, 3, 3)
    assert "jvp_" in K.source
    # the sweeps in a prange loop (forward columns, reverse rows): the same numbers, bit for bit
    kp = coarsen.jacobian(matrix_out, wrt="x", parallel=True)(np.array([0.4, -0.9, 1.3]))
    np.testing.assert_array_equal(kp, k)
    jpp, jup = coarsen.jacobian(lv_state, wrt=("p", "u0"), parallel=True)(*args)
    np.testing.assert_array_equal(jpp, jp)
    np.testing.assert_array_equal(jup, ju)


def test_scalar_layout():
    J = coarsen.jacobian(polar, wrt="r", target="python")
    jr = J(1.3, 0.7)
    assert isinstance(jr, tuple) and len(jr) == 3 and all(isinstance(v, float) for v in jr)
    assert jr[2] == pytest.approx(2.6)


# ------------------------------------------------------------------ ADBench BA
@pytest.mark.skipif(ba.adbench_test_inputs() is None, reason="../shared/adbench is absent")
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_adbench_ba_jacobian(mode):
    cams, X, w, obs, feats = ba.adbench_test_inputs()
    p = obs.shape[0]
    jc, jx, jw = coarsen.jacobian(ba_residuals, wrt=("cams", "X", "w"), mode=mode,
                                  target="python")(cams, X, w, obs, feats)
    r = ba_residuals(cams, X, w, obs, feats)
    assert adbench_err(r[:2], ba.REFERENCE_REPROJ) <= 1e-8
    c, pt = obs[0]
    row = np.concatenate([jc[0, c], jx[0, pt], [jw[0, 0]]])
    assert adbench_err(row, ba.REFERENCE_JAC_ROW) <= 1e-8
    # every other entry of the first row is zero (the 15 non-zeros are all there is)
    assert np.count_nonzero(jc[0]) + np.count_nonzero(jx[0]) + np.count_nonzero(jw[0]) <= 15
    for o in range(p):
        assert adbench_err([jw[2 * p + o, o]], [ba.REFERENCE_WEIGHT_JAC]) <= 1e-8
        assert np.count_nonzero(jw[2 * p + o]) == 1
        assert not np.any(jc[2 * p + o]) and not np.any(jx[2 * p + o])


# ------------------------------------------------------------------ refusals
def test_refusals():
    x = np.array([0.3, 0.4])
    with pytest.raises(coarsen.CoarsenError, match="integer|int"):
        coarsen.jacobian(returns_int, target="python", mode="forward")(x)
    with pytest.raises(coarsen.CoarsenError, match="returns differ") as exc:
        coarsen.jacobian(mixed_returns)
    assert exc.value.lineno is not None and exc.value.filename.endswith("test_jacobian.py")
    with pytest.raises(coarsen.CoarsenError, match="unknown mode"):
        coarsen.jacobian(softmax, mode="sideways")
    with pytest.raises(coarsen.CoarsenError):
        coarsen.jacobian(softmax, wrt="nope")
    with pytest.raises(coarsen.CoarsenError, match="target"):
        coarsen.jacobian(softmax, target="tpu")
    J = coarsen.jacobian(softmax, mode="reverse", target="python")
    with pytest.raises(coarsen.CoarsenError):
        J.source


def _rows_by_float(x, a):
    n = int(a)
    y = np.zeros(n)
    for i in range(n):
        y[i] = x[i] * x[i]
    return y


def _segment_sums(x, labels):
    y = np.zeros(np.max(labels) + 1)
    for i in range(x.shape[0]):
        y[labels[i]] += x[i] * x[i]
    return y


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("mode", ["reverse", "auto"])
def test_reverse_rows_follow_a_result_shape_that_changes(mode, target):
    # the result's shape is learned once per signature, array shapes and int values; a float or
    # an int array's contents can change it: the stale seed broadcast a length-1 result into
    # copies of its one row (found by a probe). The row wrapper now raises on a size change,
    # and the shape is learned again.
    x = np.array([1.0, 2.0, 3.0])
    J = coarsen.jacobian(_rows_by_float, wrt="x", mode=mode, target=target)
    for a in (3.0, 1.0, 2.0, 3.0):
        want = np.diag(2 * x)[:int(a)]
        got = J(x, a)
        assert got.shape == want.shape and np.array_equal(got, want)
    J = coarsen.jacobian(_segment_sums, wrt="x", mode=mode, target=target)
    for labels in ([0, 1, 1], [0, 0, 0], [2, 0, 1]):
        labels = np.array(labels)
        want = np.zeros((labels.max() + 1, 3))
        want[labels, np.arange(3)] = 2 * x
        got = J(x, labels)
        assert got.shape == want.shape and np.array_equal(got, want)


def grid_of(x, shp):
    out = np.zeros((shp[0], shp[1]))
    for i in range(shp[0]):
        for j in range(shp[1]):
            out[i, j] = x[(i + 2 * j) % x.shape[0]] * (i + 1.0) - j
    return out


def test_reverse_mode_relearns_a_shape_set_by_an_int_arrays_contents():
    """(2, 3) then (3, 2): the same size, so the wrapper's reshape did not catch it, and the
    Jacobian kept the first layout."""
    x = np.array([0.3, -0.2, 0.8])
    J = coarsen.jacobian(grid_of, wrt="x", mode="reverse", target="python")
    F = coarsen.jacobian(grid_of, wrt="x", mode="forward", target="python")
    for shp in ([2, 3], [3, 2], [1, 6], [2, 3]):
        shp = np.array(shp)
        got = J(x, shp)
        assert got.shape == tuple(shp) + (3,)
        assert np.array_equal(got, F(x, shp))
