"""Loop-invariant transcendental calls in tables before their loop (coarsen.ir.hoist): hoisted
only where the table holds the same values, and the gradients stay exact."""
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle

RNG = np.random.default_rng(12)


def mixture(icf, x, mu):
    s = 0.0
    for i in range(x.shape[0]):
        for k in range(icf.shape[0]):
            q = 0.0
            for j in range(icf.shape[1]):
                q += math.exp(icf[k, j]) * (x[i, j] - mu[k, j])
            s += math.sin(q)
    return s


def written_inside(icf, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(icf.shape[0]):
            s += math.exp(icf[j]) * x[i]
            icf[j] = icf[j] * 0.5          # the table would go stale
    return s


def guarded(icf, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(icf.shape[0]):
            if x[i] > 0.0:
                s += math.log(icf[j]) * x[i]     # evaluated on one path only
    return s


def triangular(a, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(i, a.shape[0]):           # the range depends on i
            s += math.tanh(a[j]) * x[i]
    return s


def indexed_by_outer(a, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(a.shape[1]):
            s += math.exp(a[i, j]) * x[i]        # depends on i: nothing to hoist
    return s


def stale_stop(a, x, m, k):
    s = 0.0
    n = m
    for i in range(x.shape[0]):
        for j in range(n):                       # n is m in the first trip, k after
            s += math.exp(a[j]) * x[i]
        n = k
    return s


def inverse_hyperbolic(a, b, c, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(a.shape[0]):
            s += (math.asinh(a[j]) + math.acosh(b[j]) + math.atanh(c[j])) * x[i]
    return s


def _hoisted(g, args):
    return "_tab" in g.source_for(*args)


def test_hoisted_and_exact():
    args = (RNG.standard_normal((3, 4)) * 0.3, RNG.standard_normal((5, 4)), RNG.standard_normal((3, 4)))
    for coarse in (True, False):
        g, _, _ = check_against_oracle(mixture, args, target="cpu", coarse=coarse)
        assert _hoisted(g, args)


def test_hoisted_by_cost_class():
    """What is hoisted is read from the registry (a unary element-wise primitive priced as a
    square root or dearer): the inverse hyperbolic functions too, with exact gradients."""
    args = (RNG.standard_normal(4), RNG.uniform(1.5, 3.0, 4), RNG.uniform(-0.8, 0.8, 4),
            RNG.standard_normal(3))
    for coarse in (True, False):
        g, _, _ = check_against_oracle(inverse_hyperbolic, args, target="cpu", coarse=coarse)
        assert g.source_for(*args).count("_tab") >= 3


def test_zero_trips_and_empty_tables():
    args = (RNG.standard_normal((3, 4)), np.zeros((0, 4)), RNG.standard_normal((3, 4)))
    g = coarsen.differentiate(mixture)
    v, grads = g.value_and_grad(*args)
    assert v == 0.0 and all(np.all(np.asarray(x) == 0) for x in grads)
    args = (np.zeros((0, 4)), RNG.standard_normal((5, 4)), np.zeros((0, 4)))
    v, grads = g.value_and_grad(*args)
    assert v == 0.0


@pytest.mark.parametrize("fn, args", [
    (written_inside, (RNG.standard_normal(4), RNG.standard_normal(3))),
    (guarded, (RNG.uniform(0.5, 2.0, 4), RNG.standard_normal(6))),
    (triangular, (RNG.standard_normal(5), RNG.standard_normal(4))),
    (indexed_by_outer, (RNG.standard_normal((3, 4)), RNG.standard_normal(3))),
    (stale_stop, (RNG.standard_normal(8), RNG.standard_normal(3), 6, 3)),
])
def test_not_hoisted_where_values_could_differ(fn, args):
    g, _, _ = check_against_oracle(fn, args, target="cpu")
    assert not _hoisted(g, args)


def test_python_target_keeps_the_calls():
    args = (RNG.standard_normal((3, 4)) * 0.3, RNG.standard_normal((5, 4)), RNG.standard_normal((3, 4)))
    g = coarsen.differentiate(mixture, target="python")
    assert not _hoisted(g, args)
    cpu = coarsen.differentiate(mixture)(*args)
    py = g(*args)
    for a, b in zip(cpu, py):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
