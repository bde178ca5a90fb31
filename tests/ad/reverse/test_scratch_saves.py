"""Saves of a scratch array that a loop overwrites whole (``recording.full_overwrites``).

GMM's ``qx``: each trip of the outer loop overwrites every element (``for j in range(d):
qx[j] = ...``, ``qx = np.zeros(d)``), then updates it in place (``qx[l] += ...``) and reads it.
The whole overwrite saves each element it clobbers, so the in-place updates after it need not
save theirs again.  When the overwrite misses an element (``range(d - 1)``), or the array is a
view, the updates save as before.  Every case agrees with the oracle.
"""
import math

import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def scratch(W, x):
    d = x.shape[0]
    q = np.zeros(d)
    m = np.zeros(W.shape[0])
    for k in range(W.shape[0]):
        for j in range(d):
            q[j] = math.exp(W[k, j]) * x[j]
        for j in range(d):
            for l in range(j + 1, d):  # noqa: E741 (user-style code)
                q[l] += W[k, l] * x[j]
        sq = 0.0
        for j in range(d):
            sq += q[j] * q[j]
        m[k] = sq
    # the per-trip results meet only here: the loop over k is not reversed trip by trip
    s = 0.0
    for k in range(m.shape[0]):
        s += math.sin(m[k])
    return s


def scratch_partial(W, x):
    # the last element is not overwritten: it carries over from trip to trip
    d = x.shape[0]
    q = np.zeros(d)
    m = np.zeros(W.shape[0])
    for k in range(W.shape[0]):
        for j in range(d - 1):
            q[j] = math.exp(W[k, j]) * x[j]
        for j in range(d):
            for l in range(j + 1, d):  # noqa: E741 (user-style code)
                q[l] += W[k, l] * x[j]
        sq = 0.0
        for j in range(d):
            sq += q[j] * q[j]
        m[k] = sq
    # the per-trip results meet only here: the loop over k is not reversed trip by trip
    s = 0.0
    for k in range(m.shape[0]):
        s += math.sin(m[k])
    return s


def scratch_read_in_overwrite(W, x):
    # the overwrite reads the array itself: its own reverse reads keep it pending
    d = x.shape[0]
    q = np.ones(d)
    m = np.zeros(W.shape[0])
    for k in range(W.shape[0]):
        for j in range(d):
            q[j] = math.sin(q[d - 1 - j]) * W[k, j] + x[j]
        for j in range(1, d):
            q[j] += q[j - 1] * W[k, j]
        sq = 0.0
        for j in range(d):
            sq += q[j] * q[j]
        m[k] = sq
    # the per-trip results meet only here: the loop over k is not reversed trip by trip
    s = 0.0
    for k in range(m.shape[0]):
        s += math.sin(m[k])
    return s


def _args():
    r = np.random.default_rng(8)
    return (0.3 * r.standard_normal((3, 4)), r.standard_normal(4))


CASES = [scratch, scratch_partial, scratch_read_in_overwrite]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_against_the_oracle(fn, target, coarse):
    check_value_and_grad(fn, _args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


def _saves(fn):
    g = coarsen.differentiate(fn, target="python", coarsen=False)
    g(*_args())
    return g.source.count("= q[l]"), g.tape_bytes


def test_updates_after_a_whole_overwrite_save_nothing():
    assert _saves(scratch)[0] == 0
    assert _saves(scratch_partial)[0] > 0
    assert _saves(scratch)[1] < _saves(scratch_partial)[1]
