"""Partials from the result (``primitives.defvjp_result``): ``exp``'s is ``y``, ``tanh``'s
``1 - y*y``, ``sqrt``'s ``0.5 / y``.  Each equals its ``defvjp`` partial bit for bit (checked
here on the rules themselves), and the reverse sweep reads the forward sweep's result instead
of evaluating the function again."""
import math

import numpy as np
import pytest

import coarsen
from coarsen.ir.primitives import REGISTRY
from tests.zoo.harness import check_value_and_grad

FNS = {"exp": math.exp, "tanh": math.tanh, "sqrt": math.sqrt}


def _eval(rule, x):
    import coarsen.ir.primitives.elementwise as E
    saved = E.fn
    E.fn = lambda name, *a: FNS[name](*a)
    try:
        return float(rule(x))
    finally:
        E.fn = saved


@pytest.mark.parametrize("name", sorted(FNS))
def test_rule_equals_the_partial(name):
    prim = REGISTRY[name]
    assert prim.result_partial is not None
    xs = np.random.default_rng(1).uniform(0.01, 3.0, 200)
    for x in xs:
        by_result = float(prim.result_partial(FNS[name](float(x))))
        assert by_result == _eval(prim.partials[0], float(x)), (name, x)


def chain(x, w):
    s = 0.0
    for k in range(w.shape[0]):
        s += math.tanh(w[k] * x) + math.exp(-w[k] * x * x) + math.sqrt(1.0 + w[k] * w[k])
    return s


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_against_the_oracle(target, coarse):
    check_value_and_grad(chain, lambda: (0.7, np.array([0.3, -1.1, 0.8])), None, target,
                         coarse, f"chain-{target}-{coarse}")


def test_reverse_reads_the_result():
    g = coarsen.differentiate(chain, coarsen=False, target="python")
    g(0.7, np.array([0.3, -1.1, 0.8]))
    rev = g.source[g.source.index("# reverse sweep"):]
    assert "math.tanh(" not in rev and "math.exp(" not in rev and "math.sqrt(" not in rev, rev
