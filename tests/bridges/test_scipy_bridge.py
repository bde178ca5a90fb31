"""``coarsen.scipy.objective`` with the real SciPy: a loop-written Rosenbrock whose ``jac`` and
``hess`` equal ``scipy.optimize.rosen_der`` and ``rosen_hess``, ``trust-ncg`` with ``hessp`` and
``L-BFGS-B`` converging on it, ``fun`` and ``jac`` sharing one coarsen call, several ``wrt``
parameters packed into ``x``, and the refusals."""
import numpy as np
import pytest
import scipy.optimize as so

import coarsen


def rosenbrock(x):
    s = 0.0
    for i in range(x.shape[0] - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def shifted(a, b, c):
    return (a - 1.0) ** 2 + np.sum((b - c) ** 2) * a


X0 = np.array([1.3, 0.7, 0.8, 1.9, 1.2])


@pytest.fixture(scope="module")
def obj():
    return coarsen.scipy.objective(rosenbrock)


def test_derivatives_equal_scipys(obj):
    rng = np.random.default_rng(0)
    for x in (X0, rng.normal(size=5)):
        assert obj.fun(x) == pytest.approx(so.rosen(x), rel=1e-14)
        np.testing.assert_allclose(obj.jac(x), so.rosen_der(x), rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(obj.hess(x), so.rosen_hess(x), rtol=1e-13, atol=1e-12)
        p = rng.normal(size=5)
        np.testing.assert_allclose(obj.hessp(x, p), so.rosen_hess_prod(x, p), rtol=1e-13,
                                   atol=1e-12)


def test_fun_and_jac_cost_one_call(obj):
    x = X0 + 0.25
    before = obj.calls
    obj.fun(x)
    g = obj.jac(x.copy())
    assert obj.calls == before + 1
    g[:] = 0.0                                  # a new array each time
    assert np.any(obj.jac(x) != 0.0) and obj.calls == before + 1
    obj.jac(x + 1.0)
    assert obj.calls == before + 2


def test_trust_ncg_and_lbfgsb_converge(obj):
    opts = {"gtol": 1e-8}
    r = so.minimize(obj.fun, X0, jac=obj.jac, hessp=obj.hessp, method="trust-ncg", options=opts)
    ref = so.minimize(so.rosen, X0, jac=so.rosen_der, hessp=so.rosen_hess_prod,
                      method="trust-ncg", options=opts)
    assert r.success and r.nit == ref.nit
    np.testing.assert_allclose(r.x, np.ones(5), atol=1e-7)
    r = so.minimize(obj.fun, X0, jac=obj.jac, method="L-BFGS-B")
    ref = so.minimize(so.rosen, X0, jac=so.rosen_der, method="L-BFGS-B")
    assert r.success and r.nit == ref.nit
    np.testing.assert_allclose(r.x, np.ones(5), atol=1e-4)
    r = so.minimize(obj.value_and_grad, X0, jac=True, method="BFGS")
    np.testing.assert_allclose(r.x, np.ones(5), atol=1e-4)


def test_several_wrt_parameters_and_args():
    c = np.array([1.0, 2.0])
    o = coarsen.scipy.objective(shifted, wrt=("a", "b"), args=(c,), target="python")
    x = o.pack(0.5, np.array([0.0, 3.0]))
    assert x.tolist() == [0.5, 0.0, 3.0]
    a, b = o.unpack(x)
    assert a == 0.5 and b.tolist() == [0.0, 3.0]
    assert o.fun(x) == shifted(0.5, np.array([0.0, 3.0]), c)
    np.testing.assert_allclose(o.jac(x), [-1.0 + 2.0, 2 * 0.5 * -1.0, 2 * 0.5 * 1.0], rtol=1e-15)
    H = np.array([[2.0, -2.0, 2.0], [-2.0, 1.0, 0.0], [2.0, 0.0, 1.0]])
    np.testing.assert_allclose(o.hess(x), H, rtol=1e-15)
    np.testing.assert_allclose(o.hessp(x, np.array([1.0, -1.0, 2.0])), H @ [1.0, -1.0, 2.0],
                               rtol=1e-15)
    # SciPy's convention: wrt=None is the parameters before args
    o2 = coarsen.scipy.objective(shifted, args=(np.array([0.0, 3.0]), c), target="python",
                                 shapes=((),))
    assert o2.names == ("a",)
    assert o2.fun(np.array([0.5])) == o.fun(x)


def test_refusals(obj):
    with pytest.raises(coarsen.CoarsenError, match="shape"):
        obj.fun(np.ones((2, 3)))
    o = coarsen.scipy.objective(shifted, wrt=("a", "b"), args=(np.ones(2),), target="python")
    with pytest.raises(coarsen.CoarsenError, match="shapes are not known"):
        o.fun(np.ones(3))
    with pytest.raises(coarsen.CoarsenError, match=r"1 shape\(s\) for 2 wrt parameters"):
        coarsen.scipy.objective(shifted, wrt=("a", "b"), args=(np.ones(2),), shapes=((),),
                                target="python").pack(1.0)
    with pytest.raises(coarsen.CoarsenError, match="args holds 2 values for the 1 parameters"):
        coarsen.scipy.objective(shifted, wrt=("a", "b"), args=(1.0, 2.0))
    with pytest.raises(coarsen.CoarsenError, match="none is left for x"):
        coarsen.scipy.objective(shifted, args=(1.0, 2.0, 3.0))
    o3 = coarsen.scipy.objective(shifted, wrt=("a", "b"), args=(np.ones(2),), shapes=((), (2,)),
                                 target="python")
    with pytest.raises(coarsen.CoarsenError, match="hold 3 values"):
        o3.fun(np.ones(4))


def rosen_residuals(x, scale):
    r = np.zeros(2 * (x.shape[0] - 1))
    for i in range(x.shape[0] - 1):
        r[2 * i] = scale * (x[i + 1] - x[i] ** 2)
        r[2 * i + 1] = 1.0 - x[i]
    return r


def test_residuals_for_least_squares():
    res = coarsen.scipy.residuals(rosen_residuals, args=(10.0,))
    x = np.array([1.3, 0.7, 0.8])
    r = res.fun(x)
    assert r.shape == (4,) and r.dtype == np.float64
    np.testing.assert_array_equal(r, rosen_residuals(x, 10.0))
    assert 0.5 * np.sum(r ** 2) * 2 == pytest.approx(so.rosen(x), rel=1e-14)
    J = res.jac(x)
    want = np.array([[-20.0 * x[0], 10.0, 0.0], [-1.0, 0.0, 0.0],
                     [0.0, -20.0 * x[1], 10.0], [0.0, -1.0, 0.0]])
    np.testing.assert_allclose(J, want, rtol=1e-15)
    # the Gauss-Newton gradient J^T r is Rosenbrock's
    np.testing.assert_allclose(2.0 * J.T @ r, so.rosen_der(x), rtol=1e-13)
    out = so.least_squares(res.fun, x, jac=res.jac)
    np.testing.assert_allclose(out.x, np.ones(3), atol=1e-8)
