"""A module-level array rebound after a transform was made (``module.W = new``) is refused
at the next call, naming it (``coarsen.transforms.module_arrays``): before, the transform went on with
the old array, value and gradient, while the function read the new one (only a new
signature's lowering noticed).  A write into the array in place is seen by every call."""
import numpy as np
import pytest

import coarsen
from tests import module_rebound as mr


def attribute_read(a):
    return np.sum(a * a * mr.V)


def through_helper(a):
    """Metamorphic: ``weighted`` split into a helper of its module, which reads W there."""
    return mr.weighted(a)


A = np.array([0.3, -1.2, 2.0])


@pytest.fixture
def restore():
    w, v = mr.W, mr.V
    yield
    mr.W, mr.V = w, v


def _transforms(fn):
    return {
        "grad": (coarsen.differentiate(fn, wrt="a", target="python"), lambda t: t(A)),
        "value_and_grad": (coarsen.differentiate(fn, wrt="a", target="python"),
                           lambda t: t.value_and_grad(A)),
        "jvp": (coarsen.jvp(fn, wrt="a", target="python"), lambda t: t(A, tangents=np.ones(3))),
        "jacobian": (coarsen.jacobian(fn, wrt="a", target="python"), lambda t: t(A)),
        "hessian": (coarsen.hessian(fn, wrt="a", target="python"), lambda t: t(A)),
        "hvp": (coarsen.hvp(fn, wrt="a", target="python"), lambda t: t(A, np.ones(3))),
    }


@pytest.mark.parametrize("fn,name", [(mr.weighted, "W"), (attribute_read, "V"),
                                     (through_helper, "W")],
                         ids=["bare-name", "attribute", "helper"])
def test_rebound_after_the_first_call_is_refused(restore, fn, name):
    transforms = _transforms(fn)
    for t, call in transforms.values():
        call(t)
    old = getattr(mr, name)
    # in place: seen by every transform (it has the array itself)
    old[:] = old * 2.0
    g, call = transforms["grad"]
    assert np.allclose(call(g), 2.0 * A * old)
    setattr(mr, name, old + 1.0)
    for kind, (t, call) in transforms.items():
        with pytest.raises(coarsen.CoarsenError, match=f"module-level array '{name}'.*rebound"):
            call(t)
    # a transform made now reads the new array
    fresh = coarsen.differentiate(fn, wrt="a", target="python")
    assert np.allclose(fresh(A), 2.0 * A * (old + 1.0))


def test_rebound_is_refused_on_the_cpu_fast_path(restore):
    g = coarsen.differentiate(mr.weighted)
    for _ in range(70):
        assert np.allclose(g(A), 2.0 * A * mr.W)
    assert np.allclose(g(A.astype(np.float32)), 2.0 * A * mr.W, rtol=1e-6)
    mr.W = np.array([5.0, 5.0, 5.0])
    with pytest.raises(coarsen.CoarsenError, match="'W'.*rebound"):
        g(A)
    with pytest.raises(coarsen.CoarsenError, match="'W'.*rebound"):
        g(A.astype(np.float32))
