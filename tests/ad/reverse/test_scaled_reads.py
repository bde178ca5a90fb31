"""Scaled reads (coarsen.ad.reverse.scaled_reads): an adjoint set by ``_set_scaled<N>(X, s, A)``
and then only read element by element is computed where it is read.

The rewrite on statements: the reads, the shape check kept, the scale held where the sweep
rebinds it, and each condition that leaves the call alone.  Then programs through the
compiler: the same bits as without the pass, the oracle on both targets, variants (renamed,
a helper, other shapes, float32).
"""
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.scaled_reads import scaled_reads

from tests.ad.reverse.test_stored_rereads import softmax, softmax_renamed
from tests.helpers_passes import body_text as _text, parse_body as _parse
from tests.oracle import check_against_oracle


def _run(src):
    body = _parse(src)
    before = _text(body)
    out = scaled_reads(body)
    assert _text(body) == before                    # the input is not modified
    return _text(out)


BASE = """
_ftape, P_bar, _wtop = _scratch_empty(_ftape, _wtop, P.shape, P.size)
s = 1.0
_set_scaled2(P_bar, s, A)
for i in range(n):
    for j in range(m):
        g = P_bar[i, j]
        E_bar[i, j] = g * P_bar[i, j] + A.shape[0]
"""


def test_each_read_computes_the_element():
    assert _run(BASE) == """_ftape, P_bar, _wtop = _scratch_empty(_ftape, _wtop, P.shape, P.size)
s = 1.0
if P_bar.shape != A.shape:
    raise ValueError('coarsen: an adjoint accumulator of another shape')
for i in range(n):
    for j in range(m):
        g = 0.0 + s * A[i, j]
        E_bar[i, j] = g * (0.0 + s * A[i, j]) + A.shape[0]"""


def test_a_scale_the_sweep_rebinds_is_held_as_it_was_at_the_call():
    out = _run(BASE + "s = 0.0\n")
    assert "_scale1 = s\n" in out and "g = 0.0 + _scale1 * A[i, j]" in out


@pytest.mark.parametrize("alloc", ["np.empty(n)", "np.zeros(n)"])
def test_np_allocations_and_one_dimension(alloc):
    out = _run(f"X = {alloc}\n_set_scaled1(X, c, B)\nfor i in range(n):\n    y[i] = X[i]\n")
    assert out.endswith("for i in range(n):\n    y[i] = 0.0 + c * B[i]")
    assert "0.0 + c * B[i]" in _run(BASE.replace("_scratch_empty", "_scratch_zeros").replace(
        "P_bar[i, j]", "P_bar[i]").replace("P_bar, s, A)", "P_bar, c, B)").replace("_set_scaled2", "_set_scaled1"))


#: each breaks one condition: the code is left as it was
REFUSED = {
    "another allocation": BASE.replace("_scratch_empty", "_scratch_ones"),
    "a parameter": BASE.replace("_ftape, P_bar, _wtop = _scratch_empty(_ftape, _wtop, P.shape, P.size)\n", ""),
    "read before the call": BASE.replace("s = 1.0\n", "s = P_bar[0, 0]\n"),
    "stored after": BASE + "P_bar[0, 0] = 1.0\n",
    "added into after": BASE + "P_bar[0, 0] += 1.0\n",
    "a row read": BASE + "r = P_bar[0]\n",
    "a slice read": BASE + "r = P_bar[0, :]\n",
    "whole": BASE + "r = P_bar + 1.0\n",
    "its shape": BASE + "r = P_bar.shape\n",
    "passed": BASE + "f(P_bar)\n",
    "returned": BASE + "return P_bar\n",
    "bound to another name": BASE + "Q = P_bar\n",
    "A stored into": BASE + "A[0, 0] = 2.0\n",
    "A rebound": BASE + "A = B\n",
    "A passed": BASE + "_add_scaled2(A, s, B)\n",
    "A viewed": BASE + "r = A[0]\n",
    "in a loop": "_ftape, P_bar, _wtop = _scratch_empty(_ftape, _wtop, P.shape, P.size)\n"
                 "for t in range(3):\n    _set_scaled2(P_bar, s, A)\n    y = P_bar[0, 0]\n",
    "the same name twice": "_ftape, P_bar, _wtop = _scratch_empty(_ftape, _wtop, P.shape, P.size)\n"
                           "_set_scaled2(P_bar, P_bar, A)\ny = P_bar[0, 0]\n",
    "a read inside a read's index": BASE + "y = P_bar[int(P_bar[0, 0]), 0]\n",
    "a keyword": BASE.replace("_set_scaled2(P_bar, s, A)", "_set_scaled2(P_bar, s, A, k=1)"),
    "the scale the source": BASE.replace("_set_scaled2(P_bar, s, A)", "_set_scaled2(P_bar, A, A)"),
    "an expression argument": BASE.replace("_set_scaled2(P_bar, s, A)", "_set_scaled2(P_bar, 2.0 * s, A)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    src = REFUSED[case]
    assert _run(src) == _text(_parse(src))


# programs through the compiler

def _products(A, B, C, alpha, beta):
    return alpha * A @ B + beta * C


def gemm(A, B, C, alpha, beta):
    C = alpha * A @ B + beta * C
    return 0.5 * np.sum(C * C)


def gemm_helper(A, B, C, alpha, beta):
    D = _products(A, B, C, alpha, beta)
    return 0.5 * np.sum(D * D)


def _softmax_args(shape, seed=0):
    r = np.random.default_rng(seed)
    return 2.0 * r.standard_normal(shape), r.standard_normal(shape)


def _gemm_args(n=5, k=4, m=6, seed=1):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, k)), r.standard_normal((k, m)), r.standard_normal((n, m)), 1.5, 0.7


PROGRAMS = [(softmax, _softmax_args((5, 7)), (0,)), (softmax_renamed, _softmax_args((5, 7)), (0,)),
            (gemm, _gemm_args(), (0, 1, 2, 3, 4)), (gemm_helper, _gemm_args(), (0, 1, 2, 3, 4))]


@pytest.mark.parametrize("fn, args, wrt", PROGRAMS, ids=lambda v: getattr(v, "__name__", ""))
def test_the_bits_are_those_without_the_pass(fn, args, wrt):
    on = coarsen.differentiate(fn, wrt=wrt, target="cpu")
    off = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable={"scaled_reads"})
    assert "scaled_reads" in on.source_for(*args) and "_set_scaled" in off.source_for(*args)
    v1, g1 = on.value_and_grad(*args)
    v0, g0 = off.value_and_grad(*args)
    g1 = g1 if isinstance(g1, tuple) else (g1,)
    g0 = g0 if isinstance(g0, tuple) else (g0,)
    assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0))


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn, args, wrt", PROGRAMS, ids=lambda v: getattr(v, "__name__", ""))
def test_programs_against_the_oracle(fn, args, wrt, target):
    check_against_oracle(fn, args, target=target, wrt=wrt)


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (40, 3)])
def test_other_shapes_and_float32(shape):
    X, W = _softmax_args(shape, seed=4)
    check_against_oracle(softmax, (X, W), target="cpu", wrt=(0,))
    g = coarsen.differentiate(softmax, wrt=(0,), target="cpu")
    v64, g64 = g.value_and_grad(X.astype(np.float32).astype(np.float64), W)
    v32, g32 = g.value_and_grad(X.astype(np.float32), W)
    assert v32 == v64 and g32[0].dtype == np.float32
    assert np.array_equal(g32[0], g64[0].astype(np.float32))
