"""coarsen.ad.reverse.fuse_loops: each precondition pinned (issue 48's mutation run).

Each refusal is a program whose two loops, fused, give other numbers (or raise): the pass must
leave it alone, and the function computes what it did.  Each fusion that must happen is one a
broken guard would stop."""
import ast
import math
import textwrap
import types

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.fuse_loops import fuse_loops
from tests.helpers_passes import rewrite


def _rewrite(src):
    return rewrite(src, fuse_loops, (), {"types": types, "math": math, "fill_with": _fill_with,
                                          "_same_len": _same_len})


def _fill_with(a, v):
    a.fill(v)


def _loops(text):
    return text.count("for ")


def _same(before, after, *args):
    for a, b in zip(before(*args), after(*args)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), args


REFUSED = {
    # an inner loop's else clause stores into D, which the second loop reads
    "inner for-else": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((1,))
    for i in range(n):
        B[i] = 1.0
        for k in range(1):
            pass
        else:
            D[0] += 1.0
    for j in range(n):
        C[j] = D[0] + B[j]
    return B, C
""", (3,)),
    # a while loop is not among the fusable statements (what it reads is not looked at)
    "while": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        k = 0
        while k < 1:
            C[j] = B[n - 1 - j]
            k += 1
    return B, C
""", (3,)),
    # the second loop reads the value the first loop's variable was left with
    "reads the first variable": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = B[j] + i
    return B, C
""", (3,)),
    # the first loop reads j before the second loop binds it
    "reads the second variable": ("""
def f(n, j):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i + j * 1.0
    for j in range(n):
        C[j] = B[j] * 2.0
    return B, C
""", (3, 5)),
    # the first loop assigns its own variable
    "assigns its variable": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = 1.0
        i = i + 1
    for j in range(n):
        C[j] = 2.0 * j
    return B, C
""", (3,)),
    # the second loop assigns a scalar the first reads
    "assigns what the first reads": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    t = 0.5
    for i in range(n):
        B[i] = t * i
    for j in range(n):
        t = j * 1.0
        C[j] = t
    return B, C
""", (3,)),
    # a method call between the loops: not an allocation; it reads i, so it would move after
    # the fused loop, and it writes D, which the second loop reads
    "call between": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    w = D.fill(i)
    for j in range(n):
        C[j] = B[j] + D[j]
    return B, C
""", (3,)),
    # a tuple target is not among the fusable statements
    "tuple target": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i], t = i * 1.0, 0.0
    for j in range(n):
        C[j] = 2.0 * j
    return B, C
""", (3,)),
    # nor is an augmented assignment to an attribute
    "attribute target": ("""
def f(n):
    o = types.SimpleNamespace(x=0.0)
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        o.x += 1.0
        B[i] = i * 1.0
    for j in range(n):
        C[j] = 2.0 * j
    return B, C, o.x
""", (3,)),
    # the same through a name that is not np: not an allocation, though it is called ones
    "ones not np's": ("""
def f(n):
    h = types.SimpleNamespace(ones=lambda a, v: a.fill(v))
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    w = h.ones(D, i)
    for j in range(n):
        C[j] = B[j] + D[j]
    return B, C
""", (3,)),
    # nor is a call of a plain function that is not among the pure ones
    "impure call between": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    w = fill_with(D, i)
    for j in range(n):
        C[j] = B[j] + D[j]
    return B, C
""", (3,)),
    # the second loop reads B whole (an operand), which the first writes element by element
    "reads the array whole": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = (B + 0.0)[n - 1 - j]
    return B, C
""", (3,)),
    # range(n) and range(1, n): other trips
    "one and two arguments": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(1, n):
        C[j] = 2.0 * j + 1.0
    return B, C
""", (3,)),
    # the same text, range(n), but the first loop changes n
    "bound changed": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
        n = 2
    for j in range(n):
        C[j] = 2.0 * j + 1.0
    return B, C
""", (4,)),
    # Y.shape[k] and Y.shape[m]: axes that are not constants prove nothing
    "axes not constant": ("""
def f(Y, k, m):
    B = np.zeros((Y.shape[k],))
    C = np.zeros((Y.shape[m],))
    for i in range(Y.shape[k]):
        B[i] = i * 1.0
    for j in range(Y.shape[m]):
        C[j] = j * 2.0 + 1.0
    return B, C
""", (np.zeros((2, 3)), 0, 1)),
    # np.arange(n, n + 3) has 3 elements, not n: only np.empty/zeros/ones give their shape
    "not an allocator": ("""
def f(n):
    Y = np.arange(n, n + 3)
    B = np.zeros((3,))
    C = np.zeros((n,))
    for i in range(Y.shape[0]):
        B[i] = Y[i] * 1.0
    for j in range(n):
        C[j] = j * 2.0 + 1.0
    return B, C
""", (2,)),
    # j is read by the range of a later loop that binds it: that read sees the value the
    # second loop left (the bug issue 48's run found: the variable was renamed away)
    "read by a later loop's range": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = j * 2.0
    for j in range(j + 1):
        D[j] = 3.0
    return B, C, D
""", (3,)),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_left_alone_and_the_same_numbers(case):
    src, args = REFUSED[case]
    before, after, text = _rewrite(src)
    _same(before, after, *args)
    if case != "read by a later loop's range":      # (fused, keeping j = i)
        assert _loops(text) == _loops(ast.unparse(ast.parse(textwrap.dedent(src)))), text


FUSED = {
    # an if in a loop's body is fusable
    "if in the body": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        if i > 0:
            B[i] = i * 1.0
    for j in range(n):
        C[j] = B[j] + 1.0
    return B, C
""", (3,)),
    # pass, and math's functions, in a loop's body are fusable
    "pass and math": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        pass
        B[i] = math.sin(i * 1.0)
    for j in range(n):
        C[j] = B[j] + 1.0
    return B, C
""", (3,)),
    # a parameter's extent and a name assigned it: the same trips
    "parameter's extent": ("""
def f(Y):
    n = Y.shape[0]
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(Y.shape[0]):
        B[i] = Y[i] * 2.0
    for j in range(n):
        C[j] = B[j] + 1.0
    return B, C
""", (np.array([0.5, -1.5, 2.0]),)),
    # the same expression, nothing it reads assigned between: the same trips
    "same expression": ("""
def f(n):
    B = np.zeros((n + 1,))
    C = np.zeros((n + 1,))
    for i in range(n + 1):
        B[i] = i * 1.0
    for j in range(n + 1):
        C[j] = B[j] + 1.0
    return B, C
""", (3,)),
}


@pytest.mark.parametrize("case", sorted(FUSED))
def test_fused_with_the_same_bits(case):
    src, args = FUSED[case]
    before, after, text = _rewrite(src)
    assert _loops(text) == _loops(ast.unparse(ast.parse(textwrap.dedent(src)))) - 1, text
    _same(before, after, *args)


@pytest.mark.parametrize("own", [True, False], ids=["own comment", "none"])
def test_the_second_loop_s_comment_goes_to_its_first_statement_unless_it_has_one(own):
    fn = gast.parse(textwrap.dedent("""
    def f(n):
        B = np.zeros((n,))
        C = np.zeros((n,))
        for i in range(n):
            B[i] = i * 1.0
        for j in range(n):
            C[j] = B[j] + 1.0
        return B, C
    """)).body[0]
    l2 = fn.body[3]
    l2.coarsen_comment = "for j in range(n):"
    if own:
        l2.body[0].coarsen_comment = "C[j] = B[j] + 1.0"
    out = fuse_loops(fn.body, set())
    fused = out[2]
    assert isinstance(fused, gast.For) and len(fused.body) == 2
    want = "C[j] = B[j] + 1.0" if own else "for j in range(n):"
    assert fused.body[1].coarsen_comment == want


def _same_len(a, b):
    if a != b:
        raise ValueError("lengths differ")
    return a


# the sampled mutants of issue 48's run (seed 1): each program is one the mutated pass gets
# wrong, or a fusion it would no longer make
SAMPLED_REFUSED = {
    # a method called ones on a name that sorts after np (l.82's `>= "np"`): still not an
    # allocation; it reads i, so it would move after the fused loop, and it writes D
    "ones of a name after np": ("""
def f(n):
    q = types.SimpleNamespace(ones=lambda a, v: a.fill(v))
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    w = q.ones(D, i)
    for j in range(n):
        C[j] = B[j] + D[j]
    return B, C
""", (3,)),
    # Y is assigned again inside an if (l.217's `<` for `!=`): Y.shape[0] is not n's
    "shape of an array assigned in an if": ("""
def f(n, m, c):
    Y = np.zeros((n,))
    if c:
        Y = np.zeros((m,))
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(Y.shape[0]):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = B[j] + 1.0
    return B, C
""", (3, 2, True)),
}


@pytest.mark.parametrize("case", sorted(SAMPLED_REFUSED))
def test_sampled_left_alone_and_the_same_numbers(case):
    src, args = SAMPLED_REFUSED[case]
    before, after, text = _rewrite(src)
    _same(before, after, *args)
    assert _loops(text) == _loops(ast.unparse(ast.parse(textwrap.dedent(src)))), text


SAMPLED_FUSED = {
    # five links of _same_len from the first range to the second's parameter: the keys follow
    # them all (l.208's depth + 2 gives up after four)
    "a chain of five _same_len": ("""
def f(a, b):
    n1 = _same_len(a, b)
    n2 = _same_len(n1, n1)
    n3 = _same_len(n2, n2)
    n4 = _same_len(n3, n3)
    n5 = _same_len(n4, n4)
    B = np.zeros((a,))
    C = np.zeros((a,))
    for i in range(n5):
        B[i] = i * 1.0
    for j in range(a):
        C[j] = B[j] + 1.0
    return B, C
""", (3, 3)),
    # the first loop reads another element of B than the one it writes, the second reads
    # B[j]: two reads need not be of one element (l.276's reads counted as writes)
    "the first loop reads another element": ("""
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = B[n - 1 - i] + i * 1.0
    for j in range(n):
        C[j] = B[j] + 1.0
    return B, C
""", (4,)),
}


@pytest.mark.parametrize("case", sorted(SAMPLED_FUSED))
def test_sampled_fused_with_the_same_bits(case):
    src, args = SAMPLED_FUSED[case]
    before, after, text = _rewrite(src)
    assert _loops(text) == _loops(ast.unparse(ast.parse(textwrap.dedent(src)))) - 1, text
    _same(before, after, *args)


def test_a_read_of_the_second_variable_in_a_later_loop_keeps_its_value():
    # j is read in a later loop whose own variable (a) sorts before j: that loop does not bind
    # j, so the fused loop must leave j as the second loop did (l.311's `<=` renamed it away)
    src = """
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    D = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = j * 2.0
    for a in range(n):
        D[a] = j * 1.0
    return B, C, D
"""
    before, after, text = _rewrite(src)
    assert "j = i" in text, text
    _same(before, after, 3)
