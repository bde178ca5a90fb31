"""Loop-invariant calls in tables (coarsen.ir.hoist): the guards the mutation run
(``python -m tests.mutation coarsen/ir/hoist.py``) found unpinned.  A table is made where its
values are those of the call (a stop the loop copies from a parameter, a constant index), and
not where the call is cheap or the inner loop's stop may change from one trip of the outer loop
to the next (``-k`` or ``m - 1`` computed in the loop, a stop set in a branch, two stops
swapped each trip) or the operand is an int element; the gradients are exact either way, on both targets."""
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle

RNG = np.random.default_rng(48)


def param_stop(a, x, n):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(n):                      # the loop copies n: the same in every trip
            s += math.exp(a[j]) * x[i]
    return s


def const_index(a, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(a.shape[0]):
            s += math.sin(a[j, 1]) * x[i]       # a constant index item
    return s


def cheap(a, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(a.shape[0]):
            s += abs(a[j]) * x[i]               # no dearer than an addition: no table
    return s


def negated_stop(a, x, k):
    s = 0.0
    for i in range(x.shape[0]):
        n = -k                                  # not a copy: the table would run to k
        for j in range(n):
            s += math.exp(a[j]) * x[i]
    return s


def shifted_stop(a, x, m):
    s = 0.0
    for i in range(x.shape[0]):
        n = m - 1                               # neither a copy nor a dimension
        for j in range(n):
            s += math.exp(a[j]) * x[i]
    return s


def branch_stop(a, x, m, k):
    s = 0.0
    for i in range(x.shape[0]):
        n = m
        if x[i] > 0.0:
            n = k                               # assigned twice in the loop
        for j in range(n):
            s += math.exp(a[j]) * x[i]
    return s


def swapped_stops(a, x, m, k):
    s = 0.0
    n = m
    p = k
    for i in range(x.shape[0]):
        n, p = p, n                             # copies of each other: m, k, m, ...
        for j in range(n):
            s += math.exp(a[j]) * x[i]
    return s


def constant_argument(a, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(a.shape[0]):
            s += math.exp(0.5) * a[j] * x[i]    # the call's operand is no array element
    return s


def int_elements(a, k, x):
    s = 0.0
    for i in range(x.shape[0]):
        for j in range(k.shape[0]):
            s += math.exp(k[j]) * a[j] * x[i]   # the call's operand is an int element
    return s


HOISTED = [
    (param_stop, (RNG.standard_normal(5), RNG.standard_normal(3), 4)),
    (const_index, (RNG.standard_normal((4, 2)), RNG.standard_normal(3))),
]

NOT_HOISTED = [
    (cheap, (RNG.standard_normal(4), RNG.standard_normal(3))),
    (negated_stop, (RNG.standard_normal(5), RNG.standard_normal(3), -4)),
    (shifted_stop, (RNG.standard_normal(5), RNG.standard_normal(3), 4)),
    (branch_stop, (RNG.standard_normal(6), np.array([-0.5, 0.7, -0.2]), 2, 5)),
    (swapped_stops, (RNG.standard_normal(6), RNG.standard_normal(3), 2, 5)),
    (constant_argument, (RNG.standard_normal(4), RNG.standard_normal(3))),
    (int_elements, (RNG.standard_normal(4), np.array([0, 1, -1, 2]), RNG.standard_normal(3))),
]


def _ids(cases):
    return [fn.__name__ for fn, _ in cases]


@pytest.mark.parametrize("fn, args", HOISTED, ids=_ids(HOISTED))
def test_hoisted(fn, args):
    assert "_tab" in coarsen.differentiate(fn).ir(*args)
    for target in ("cpu", "python"):
        check_against_oracle(fn, args, target=target)


@pytest.mark.parametrize("fn, args", NOT_HOISTED, ids=_ids(NOT_HOISTED))
def test_not_hoisted(fn, args):
    assert "_tab" not in coarsen.differentiate(fn).ir(*args)
    for target in ("cpu", "python"):
        check_against_oracle(fn, args, target=target)
