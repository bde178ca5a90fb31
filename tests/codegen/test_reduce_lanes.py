"""The max/min along an axis in four lanes (``coarsen.codegen.runtime._reduce_source``).

The generated helper, compiled by Numba, against the one-chain loop it replaces, written here:
the same bits for every fiber (ties of -0.0 and 0.0, NaNs of two payloads, integers, fibers of
1 to 21 elements, every axis of 2-D and 3-D arrays).  The lanes' path gives the one-chain bits
by design, so its values cannot tell the two apart: the maximum put at every position of
fibers of 8 to 17 elements shows a lane or a tail that is dropped or combined wrongly.
"""
import numba
import numpy as np
import pytest

import coarsen
from coarsen.codegen.runtime import _reduce_source


def _compiled(op, nd, ax, jit=True):
    src = _reduce_source(op, nd, ax)
    ns = {"np": np}
    exec(compile(src, f"<_red_{op}_{nd}_{ax}>", "exec"), ns)
    f = ns[f"_red_{op}_{nd}_{ax}"]
    return numba.njit(f) if jit else f


def _one_chain(a, op, ax):
    """The loop before the lanes: one chain of comparisons per fiber."""
    moved = np.moveaxis(a, ax, -1)
    out = np.empty(moved.shape[:-1])
    for idx in np.ndindex(*moved.shape[:-1]):
        fiber = moved[idx]
        acc = fiber[0]
        for v in fiber[1:]:
            if (v > acc if op == "amax" else v < acc) or v != v:
                acc = v
        out[idx] = acc
    return out


def _fibers(rng, n, kind):
    if kind == "normal":
        return rng.standard_normal(n)
    if kind == "ties":
        return rng.integers(-2, 3, n).astype(float)
    if kind == "zeros":
        return rng.choice([-0.0, 0.0, -1.0], n)
    if kind == "nan":
        x = rng.standard_normal(n)
        quiet = np.frombuffer(np.uint64(0x7FF8000000000001).tobytes(), np.float64)[0]
        x[rng.integers(0, n)] = np.nan
        x[rng.integers(0, n)] = quiet          # another payload: the last NaN's bits win
        return x
    return np.full(n, 3.0)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("kind", ["normal", "ties", "zeros", "nan", "equal"])
def test_every_fiber_has_the_one_chain_bits(op, kind):
    rng = np.random.default_rng(len(kind))
    f = _compiled(op, 2, 1)
    for n in range(1, 22):
        a = np.stack([_fibers(rng, n, kind) for _ in range(6)])
        assert f(a).tobytes() == _one_chain(a, op, 1).tobytes(), (n, a)


@pytest.mark.parametrize("nd, ax", [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)])
def test_every_axis_and_rank_and_integers(nd, ax):
    rng = np.random.default_rng(nd * 10 + ax)
    shape = [3, 4, 5][:nd]
    shape[ax] = 13
    a = rng.standard_normal(shape)
    for op in ("amax", "amin"):
        f = _compiled(op, nd, ax)
        assert f(a).tobytes() == _one_chain(a, op, ax).tobytes()
        ints = rng.integers(-5, 5, shape)
        assert np.array_equal(f(ints), _one_chain(ints, op, ax))
        # the helper's text runs as plain Python too (the python target)
        assert _compiled(op, nd, ax, jit=False)(a).tobytes() == _one_chain(a, op, ax).tobytes()


def test_an_empty_fiber_raises_as_numpy_does():
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        _compiled("amax", 2, 1)(np.empty((3, 0)))


def test_the_lanes_decide_where_they_may():
    # the maximum in each lane and in the tail (a nonzero maximum: the lanes alone give it)
    src = _reduce_source("amax", 2, 1)
    assert src.count("if n >= 8:") == 1 and "if n < 8 or acc == 0.0 or acc != acc:" in src
    f = _compiled("amax", 2, 1)
    for n in (8, 9, 11, 12, 13, 17):
        for at in range(n):
            x = -np.arange(1.0, n + 1.0)
            x[at] = 5.0
            assert f(x[None, :])[0] == 5.0, (n, at)


def softmax_rows(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    return np.sum(W * e / np.sum(e, axis=1)[:, None])


def test_a_program_with_a_max_along_an_axis_matches_the_oracle():
    from tests.oracle import check_against_oracle

    rng = np.random.default_rng(4)
    for shape in ((2, 3), (3, 9), (4, 17)):
        X = rng.standard_normal(shape)
        X[0, -1] = 0.0
        X[0, :-1] = -np.abs(X[0, :-1]) - 1.0       # a row whose maximum is 0.0
        for target in ("python", "cpu"):
            check_against_oracle(softmax_rows, (X, rng.standard_normal(shape)), target=target,
                                 wrt=("X",))
    g = coarsen.differentiate(softmax_rows, wrt=("X",))
    assert "if n >= 8:" in g.source_for(X, X)
