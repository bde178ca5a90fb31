"""A store refused by scalarization keeps its value's nest (``coarsen.ir.scalarize``,
``_Scalarizer.unstored``).

A store whose tree reads the stored array otherwise than element for element where it writes
(``y[:k] = y[:k] + a * y[:k][::-1]``, ``x[1:] = x[1:] + x[:-1]``) cannot be one nest writing
the array in place: a later element would read an earlier one's new value.  Its value, a
temporary used once, is then a nest of its own into a new array, which the store copies as
NumPy does (a region store).  Checked: gradients against the extended-precision oracle on both
targets (the python target keeps NumPy's statements) for shifted, reversed and 2-D overlaps,
an augmented store and a loop; the IR (the nest writes a new array, the store reads it); a
renamed variant giving the same bits.
"""
import numpy as np
import pytest

import coarsen
from tests.helpers_passes import scalarized_ir
from tests.oracle import check_against_oracle


def shifted(x, c):
    y = x * 1.0
    y[1:] = y[1:] + c * y[:-1]
    y[:-1] += y[1:] * c
    return np.sum(y * y * x)


def reversed_self(x):
    y = np.sin(x)
    y[::-1] = y * 2.0 + y[::-1]
    return np.sum(y * x)


def rows(A, w):
    B = A * w
    B[1:, :] = B[:-1, :] * 0.5 + B[1:, ::-1]
    return np.sum(B * B)


def durbin_like(r):
    n = r.shape[0]
    y = np.zeros(n)
    y[0] = -r[0]
    alpha = -r[0]
    for k in range(1, n):
        alpha = -(r[k] + r[:k][::-1] @ y[:k]) * 0.5
        y[:k] = y[:k] + alpha * y[:k][::-1]
        y[k] = alpha
    return np.sum(y * r)


def durbin_like_renamed(_t1):
    k = _t1.shape[0]
    y_bar = np.zeros(k)
    y_bar[0] = -_t1[0]
    r = -_t1[0]
    for n in range(1, k):
        r = -(_t1[n] + _t1[:n][::-1] @ y_bar[:n]) * 0.5
        y_bar[:n] = y_bar[:n] + r * y_bar[:n][::-1]
        y_bar[n] = r
    return np.sum(y_bar * _t1)


def _cases():
    r = np.random.default_rng(8)
    return {
        shifted: [[r.normal(size=n), 0.7] for n in (1, 2, 7)],
        reversed_self: [[r.normal(size=n)] for n in (1, 6)],
        rows: [[r.normal(size=(4, 3)), r.normal(size=3)], [r.normal(size=(1, 2)), r.normal(size=2)]],
        durbin_like: [[0.5 ** np.arange(1, n + 1)] for n in (1, 3, 9)],
    }


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_overlapping_stores_match_the_oracle(target):
    for fn, arg_sets in _cases().items():
        for args in arg_sets:
            check_against_oracle(fn, args, target=target)


def test_the_value_is_a_nest_into_a_new_array_that_the_store_copies():
    text = scalarized_ir(shifted, [np.ones(5), 0.5])
    # two nests (one per refused store), each into an empty array, each then stored
    assert text.count("empty(") >= 2 and text.count("for _i") >= 2, text
    lines = [ln.strip() for ln in text.splitlines()]
    stores = [ln for ln in lines if ln.startswith("y[1:]") or ln.startswith("y[:-1]")]
    assert len(stores) == 2 and all(ln.split("= ")[-1].startswith("_t") for ln in stores), stores


def test_a_renamed_variant_gives_the_same_bits():
    args = [0.5 ** np.arange(1, 12) * 1.01]
    want = coarsen.differentiate(durbin_like).value_and_grad(*args)
    got = coarsen.differentiate(durbin_like_renamed).value_and_grad(*args)
    assert got[0] == want[0] and np.array_equal(got[1], want[1])
