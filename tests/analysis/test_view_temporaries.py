"""A compiler temporary that views an array (``d.T``) is copied only where the array may be
written while the view sees it (``coarsen.analysis.activity``, ``materialize``): the rule a
user's named view is refused by.  Covariance's ``d.T @ d`` of a ``d`` its scalarized nest wrote
before is strides, not a transposing copy; a view of an array written after it is still a copy
(the reverse sweep reads the view's values as they were).  Checked: the cpu source, gradients
against the extended-precision oracle on both targets, a renamed variant's bits.
"""
import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle


def gram(X, W):
    mu = np.sum(X, axis=0) / X.shape[0]
    d = X - mu
    return np.sum(W * (d.T @ d))


def gram_renamed(data, weights):
    centre = np.sum(data, axis=0) / data.shape[0]
    dev = data - centre
    return np.sum(weights * (dev.T @ dev))


def written_after(X, w):
    d = X * 2.0
    r = d.T @ w          # the temporary d.T, read by the reverse sweep (w's adjoint)
    d[0, 0] = 5.0        # d written after the view was made
    return np.sum(r * r) + np.sum(d * X)


def _args(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((6, 4)), rng.standard_normal((4, 4))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_no_copy_of_a_transpose_of_an_array_written_before(target):
    src = coarsen.differentiate(gram, wrt=0, target=target).source_for(*_args())
    assert "np.copy(" not in src and ".T" in src


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_gram_against_oracle(target):
    check_against_oracle(gram, _args(1), target=target, wrt=(0,))


def test_renamed_variant_same_bits():
    args = _args(2)
    v1, g1 = coarsen.differentiate(gram, wrt=0, target="python").value_and_grad(*args)
    v2, g2 = coarsen.differentiate(gram_renamed, wrt=0, target="python").value_and_grad(*args)
    assert v1 == v2 and np.array_equal(g1, g2)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_written_after_is_copied_and_right(target):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((5, 3)), rng.standard_normal(5))
    g, _, _ = check_against_oracle(written_after, args, target=target, wrt=(0, 1))
    if target == "python":          # (cpu: ``transposed_products`` makes it ``w @ d``, no view)
        assert "_t1 = np.copy(d.T)" in g.source_for(*args)
