"""Loop nests versioned on their broadcast strides (coarsen.ad.reverse.stride_versions).

The rewrite itself, on statements: which loops are versioned, what the fast version reads, and
what is left alone.  Then programs whose operands broadcast in some calls and not in others
(the same compiled code takes both versions): the oracle on both targets, and on the cpu
target the bits of the code without the pass.
"""
import ast
import re

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.stride_versions import stride_names, stride_versions

from tests.oracle import check_against_oracle


def _parse(src):
    return gast.parse(src).body


def _text(body):
    return ast.unparse(gast.gast_to_ast(gast.Module(body=body, type_ignores=[])))


NEST = """
s0 = _bcast_stride(n, m)
s1 = _bcast_stride(k, m)
for i in range(m):
    for j in range(q):
        x[i, j] = y[s0 * i, j] + z[i * s1, j]
"""


def test_a_nest_reading_strides_is_versioned_on_them():
    body = _parse(NEST)
    before = _text(body)
    out = stride_versions(body)
    assert _text(body) == before                         # the input is not modified
    text = _text(out)
    assert "if s0 == 1 and s1 == 1:" in text
    fast, slow = out[2].body, out[2].orelse
    assert "x[i, j] = y[i, j] + z[i, j]" in _text(fast)
    assert _text(slow) == _text(body[2:])                # the loop as it was


def test_only_products_by_the_stride_are_simplified():
    body = _parse("s = _bcast_stride(n, m)\nfor i in range(m):\n"
                  "    x[i] = y[s * i + 2 * i] * 1.0 + z[i * 1] + s * s\n")
    fast = _text(stride_versions(body)[1].body)
    assert "x[i] = y[i + 2 * i] * 1.0 + z[i * 1] + 1 * 1" in fast, fast


def test_only_names_every_assignment_makes_a_stride_are_strides():
    body = _parse("a = _bcast_stride(n, m)\nb = _bcast_stride(n, m)\nb = 2\n"
                  "c = _bcast_stride(n, m)\nfor c in range(3):\n    pass\n"
                  "d = other(n, m)\n")
    assert stride_names(body) == {"a"}


def test_a_loop_assigning_a_stride_it_reads_is_not_versioned_but_its_inner_loops_are():
    body = _parse("""
s0 = _bcast_stride(n, m)
for t in range(4):
    s1 = _bcast_stride(k, m)
    for i in range(m):
        x[i] = y[s0 * i] + z[s1 * i]
""")
    out = stride_versions(body)
    outer = out[1]
    assert isinstance(outer, gast.For)                   # not versioned: it assigns s1
    inner = outer.body[1]
    assert isinstance(inner, gast.If)
    assert _text([inner.test]) == "s0 == 1 and s1 == 1"
    assert "x[i] = y[i] + z[i]" in _text(inner.body)


@pytest.mark.parametrize("body, versioned", [
    # a map: versioned
    ("x[i] = y[s * i] * 2.0", True),
    # a tape position stepped by a constant is an induction, no chain
    ("tape[pos] = y[s * i]\n        pos += 1", True),
    # an adjoint added into, then reset within the trip: the next trip starts from 0.0
    ("t_bar += y[s * i]\n        x[i] += t_bar\n        t_bar = 0.0", True),
    # a sum carried from trip to trip: a chain of additions that does not vectorize
    ("acc = acc + y[s * i]", False),
    ("acc += y[s * i] * 2.0", False),
    # assigned before it is added into: no chain
    ("acc = y[s * i]\n        acc += 1.5\n        x[i] = acc", True),
])
def test_only_loops_that_can_vectorize_are_versioned(body, versioned):
    src = f"s = _bcast_stride(n, m)\nfor i in range(m):\n    if True:\n        {body}\n"
    out = stride_versions(_parse(src))
    assert isinstance(out[1], gast.If) is versioned, _text(out)


def test_code_without_strides_is_left_alone():
    body = _parse("for i in range(3):\n    x[i] = 2 * y[i]\n")
    assert _text(stride_versions(body)) == _text(body)


def field(A, R, w):
    Z = A * R + np.sin(R)
    Z[1:, :] -= 0.5 * (Z[1:, :] - Z[:-1, :])
    return np.sum(w * Z * Z)


def field_renamed(w, P, M):
    # ``field`` renamed and its arguments permuted: the same operations, the same bits
    Y = M * P + np.sin(P)
    Y[1:, :] -= 0.5 * (Y[1:, :] - Y[:-1, :])
    return np.sum(w * Y * Y)


def field_reordered(w, P, M):
    # the sum's operands swapped: other roundings, the same function
    Y = np.sin(P) + P * M
    Y[1:, :] -= 0.5 * (Y[1:, :] - Y[:-1, :])
    return np.sum(Y * Y * w)


SHAPES = [(4, 5), (1, 5), (4, 1), (1, 1)]


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(11)
    A = rng.standard_normal((4, 5))
    w = rng.standard_normal((4, 5))
    return A, w, {s: rng.standard_normal(s) for s in SHAPES}


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_broadcast_and_plain_operands_match_the_oracle(target, inputs):
    A, w, Rs = inputs
    for shape in SHAPES:
        check_against_oracle(field, (A, Rs[shape], w), target=target, wrt=("A", "R"))
        check_against_oracle(field_reordered, (w, Rs[shape], A), target=target, wrt=("P",))


def test_the_versions_give_the_bits_of_the_code_without_them(inputs):
    A, w, Rs = inputs
    versioned = coarsen.differentiate(field, wrt=("A", "R"), target="cpu")
    plain = coarsen.differentiate(field, wrt=("A", "R"), target="cpu", disable={"stride_versions"})
    renamed = coarsen.differentiate(field_renamed, wrt=("M", "P"), target="cpu")
    for shape in SHAPES:
        R = Rs[shape]
        v1, (a1, r1) = versioned.value_and_grad(A, R, w)
        v2, (a2, r2) = plain.value_and_grad(A, R, w)
        assert v1 == v2 and np.array_equal(a1, a2) and np.array_equal(r1, r2), shape
        v3, (a3, r3) = renamed.value_and_grad(w, R, A)
        assert v3 == v1 and np.array_equal(a3, a1) and np.array_equal(r3, r1), shape
    tests = re.compile(r"^\s*if _\w+ == 1( and|:)", re.M)
    # forward and reverse nests versioned; none without the pass
    assert len(tests.findall(versioned.source_for(A, Rs[(1, 5)], w))) >= 2
    assert not tests.findall(plain.source_for(A, Rs[(1, 5)], w))


def slab(T, M, r):
    # a 3-D nest: M broadcast along the first axis, r along the last two
    U = T * M[None, :, :] + r[:, None, None]
    U[:, 1:, :] += 0.25 * (U[:, :-1, :] - U[:, 1:, :])
    return np.sum(np.exp(-U * U))


def test_a_three_dimensional_nest_keeps_its_bits():
    rng = np.random.default_rng(5)
    T = rng.standard_normal((3, 4, 5))
    on = coarsen.differentiate(slab, wrt=("T", "M", "r"), target="cpu")
    off = coarsen.differentiate(slab, wrt=("T", "M", "r"), target="cpu",
                                disable={"stride_versions"})
    for ms, rs in (((4, 5), (3,)), ((1, 5), (1,)), ((4, 1), (3,))):
        args = (T, rng.standard_normal(ms), rng.standard_normal(rs))
        v1, g1 = on.value_and_grad(*args)
        v0, g0 = off.value_and_grad(*args)
        assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0)), (ms, rs)
        check_against_oracle(slab, args, target="cpu", wrt=("T", "M", "r"))
