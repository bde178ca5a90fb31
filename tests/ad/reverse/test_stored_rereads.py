"""Stored rereads (coarsen.ad.reverse.stored_rereads): a taped scalar stored into its own
element of a fresh array is re-read from the element in the reverse sweep.

The rewrite on statements: what push, pop and reads become, and each condition that leaves
them alone.  Then programs through the compiler: the oracle on both targets, the same bits as
without the pass, the tape it no longer writes, the programs it must refuse (the array written
again, one element per several trips) and metamorphic variants (renamed, reordered, through a
helper, other shapes and dtypes).
"""
import ast
import math
import re

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.stored_rereads import stored_rereads
from coarsen.ir.nodes import Array

from tests.oracle import check_against_oracle

#: the emitter's code for ``e = np.exp(x)`` and the reverse of it, with a read of the
#: loop's last value in between
BASE = """
t = 0.0
e = np.empty((0, 0))
e = np.empty((n, m))
_ftape = _reserve(_ftape, _fpos + n * m)
for i in range(n):
    for j in range(m):
        u = x[i, j]
        _ftape[_fpos] = t
        _fpos += 1
        t = math.exp(u)
        e[i, j] = t
s = e[0, 0] + t
for i in range(n - 1, -1, -1):
    for j in range(m - 1, -1, -1):
        t_bar = e_bar[i, j]
        c = t
        _fpos -= 1
        t = _ftape[_fpos]
        x_bar[i, j] = t_bar * c
"""

AFTER = """t = 0.0
e = np.empty((0, 0))
e = np.empty((n, m))
for i in range(n):
    for j in range(m):
        u = x[i, j]
        t = math.exp(u)
        e[i, j] = t
s = e[0, 0] + t
for i in range(n - 1, -1, -1):
    for j in range(m - 1, -1, -1):
        t_bar = e_bar[i, j]
        c = e[i, j]
        x_bar[i, j] = t_bar * c"""


def _parse(src):
    return gast.parse(src).body


def _text(body):
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


TYPES = {"e": Array("f64", 2), "f": Array("f64", 2), "x": Array("f64", 2)}


def _run(src, params=("x",), types=TYPES):
    body = _parse(src)
    before = _text(body)
    out, changed = stored_rereads(body, params, types)
    assert _text(body) == before                    # the input is not modified
    return _text(out), changed


def test_push_and_pop_go_and_the_reverse_reads_the_element():
    out, changed = _run(BASE)
    assert changed
    assert out == AFTER


def test_the_reservation_stays_where_the_nest_pushes_something_else():
    src = BASE.replace("        e[i, j] = t\n", "        e[i, j] = t\n        _ftape[_fpos] = u\n"
                       "        _fpos += 1\n")
    out, changed = _run(src)
    assert changed
    assert "_ftape = _reserve(_ftape, _fpos + n * m)" in out
    assert "_ftape[_fpos] = t" not in out and "_ftape[_fpos] = u" in out


def test_the_tape_lines_count_of_the_push_goes_with_it():
    src = BASE.replace("        _fpos += 1\n        t = math", "        _fpos += 1\n        _tlf[3] += 1\n"
                       "        t = math")
    out, changed = _run(src)
    assert changed and "_tlf" not in out


def test_a_one_dimensional_nest():
    src = """
t = 0.0
e = np.zeros(n)
for i in range(n):
    _ftape[_fpos] = t
    _fpos += 1
    t = math.exp(x[i])
    e[i] = t
for i in range(n - 1, -1, -1):
    c = t * 2.0
    _fpos -= 1
    t = _ftape[_fpos]
    x_bar[i] = c
"""
    out, changed = _run(src, types={"e": Array("f64", 1)})
    assert changed
    assert "c = e[i] * 2.0" in out and "_ftape" not in out


#: each a change of BASE (old, new) after which the pass must leave the code alone
REFUSED = {
    "index out of order": ("e[i, j] = t", "e[j, i] = t"),
    "index not a counter": ("e[i, j] = t", "e[i, 0] = t"),
    "index an expression": ("e[i, j] = t", "e[i, j - 0] = t"),
    "array written after the nest": ("s = e[0, 0] + t", "e[0, 0] = 1.0"),
    "array updated in place": ("s = e[0, 0] + t", "e[0, 0] += 1.0"),
    "array viewed": ("s = e[0, 0] + t", "f = e[0]\nf[1] = 2.0"),
    "array sliced": ("s = e[0, 0] + t", "f = e[0:1, 0]"),
    "array passed to a call": ("s = e[0, 0] + t", "h(e)"),
    "array rebound after the nest": ("s = e[0, 0] + t", "e = np.empty((n, m))"),
    "array not fresh": ("e = np.empty((n, m))", "e = x.copy()"),
    "array a view": ("e = np.empty((n, m))", "e = x[1:]"),
    "array from another call": ("e = np.empty((n, m))", "e = np.exp(x)"),
    "array bound inside a loop": ("e = np.empty((n, m))\n", "for k in range(1):\n    e = np.empty((n, m))\n"),
    "value reassigned after the store": ("        e[i, j] = t\n", "        e[i, j] = t\n        t = t + 1.0\n"),
    "another value stored": ("e[i, j] = t", "e[i, j] = u"),
    "store before the assignment": ("        t = math.exp(u)\n        e[i, j] = t\n",
                                    "        e[i, j] = t\n        t = math.exp(u)\n"),
    "statement between push and assignment": ("        _fpos += 1\n        t = math",
                                              "        _fpos += 1\n        u = u + 0.0\n        t = math"),
    "read after the reverse nest": ("        x_bar[i, j] = t_bar * c\n", "        x_bar[i, j] = t_bar * c\ny = t\n"),
    "read after the pop": ("        x_bar[i, j] = t_bar * c\n", "        x_bar[i, j] = t_bar * c * t\n"),
    "read in the reverse nest outside the pop's block": ("        x_bar[i, j] = t_bar * c\n",
                                                        "        x_bar[i, j] = t_bar * c\n    y = t\n"),
    "break in the nest": ("        e[i, j] = t\n", "        e[i, j] = t\n        if u > 9.0:\n            break\n"),
    "reverse loop counters renamed": ("    for j in range(m - 1, -1, -1):", "    for k in range(m - 1, -1, -1):"),
    "reverse loops in another order": ("for i in range(n - 1, -1, -1):\n    for j in range(m - 1, -1, -1):",
                                       "for j in range(m - 1, -1, -1):\n    for i in range(n - 1, -1, -1):"),
    "pop under an if": ("        _fpos -= 1\n        t = _ftape[_fpos]\n",
                        "        if n > 0:\n            _fpos -= 1\n            t = _ftape[_fpos]\n"),
    "counter assigned in the nest": ("        u = x[i, j]\n", "        u = x[i, j]\n        j = j + 0\n"),
    "counter assigned in the reverse nest": ("        t_bar = e_bar[i, j]\n", "        t_bar = e_bar[i, j]\n        j = j + 0\n"),
    "loop with else": ("        e[i, j] = t\n", "        e[i, j] = t\n    else:\n        pass\n"),
    "loop not over a range": ("for i in range(n):", "for i in rows:"),
    "reverse loop not over a range": ("for i in range(n - 1, -1, -1):", "for i in rows:"),
    "value assigned elsewhere": ("s = e[0, 0] + t", "t = s"),
    "value set from a non-constant first": ("t = 0.0", "t = x[0, 0]"),
    "two pops": ("        x_bar[i, j] = t_bar * c\n", "        x_bar[i, j] = t_bar * c\n        _fpos -= 1\n"
                 "        t = _ftape[_fpos]\n"),
    "a push that steps by two": ("        _fpos += 1\n        t = math", "        _fpos += 2\n        t = math"),
    "a store into an attribute's element": ("e[i, j] = t", "q.e[i, j] = t"),
    "pop before the push's nest": ("t = 0.0\n", "t = 0.0\n_fpos -= 1\nt = _ftape[_fpos]\n"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    old, new = REFUSED[case]
    assert old in BASE, case
    _, changed = _run(BASE.replace(old, new, 1))
    assert not changed, case


@pytest.mark.parametrize("t", [Array("f32", 2), Array("i64", 2), Array("f64", 3), None])
def test_an_array_of_another_dtype_or_rank_is_refused(t):
    # a float32 element rounds the stored value, an int64 one truncates it
    _, changed = _run(BASE, types={"x": Array("f64", 2)} if t is None else {"e": t})
    assert not changed


def test_a_parameter_array_is_refused():
    _, changed = _run(BASE, params=("x", "e"))
    assert not changed


def test_copies_after_the_nest_are_aliases():
    # an inlined helper's result: ``f = e`` after the nest, then reads of ``f``
    out, changed = _run(BASE.replace("s = e[0, 0] + t", "f = e\ns = f[0, 0] + f.shape[0]"))
    assert changed and "c = e[i, j]" in out
    for old, new in (("s = e[0, 0] + t", "f = e\nf[0, 0] = 1.0"),          # written through it
                     ("s = e[0, 0] + t", "f = e\nh(f)"),                   # passed whole
                     ("s = e[0, 0] + t", "f = e\nf = x"),                  # rebound
                     ("t = 0.0", "t = 0.0\nf = e")):                       # bound before the nest
        _, changed = _run(BASE.replace(old, new, 1))
        assert not changed, new
    _, changed = _run(BASE.replace("s = e[0, 0] + t", "f = e"), params=("x", "f"))
    assert not changed


# ---------------------------------------------------------------- through the compiler

def softmax(X, W):
    m = np.max(X, axis=1)
    e = np.exp(X - m[:, None])
    p = e / np.sum(e, axis=1)[:, None]
    return np.sum(W * p)


def softmax_renamed(Q, R):
    top = np.max(Q, axis=1)
    z = np.exp(Q - top[:, None])
    prob = z / np.sum(z, axis=1)[:, None]
    return np.sum(R * prob)


def _shifted_exp(X, m):
    return np.exp(X - m[:, None])


def softmax_helper(X, W):
    e = _shifted_exp(X, np.max(X, axis=1))
    s = np.sum(e, axis=1)
    return np.sum(W * (e / s[:, None]))


def tanh_loop(x, w):
    n = x.shape[0]
    y = np.empty(n)
    for i in range(n):
        t = math.tanh(w * x[i])
        y[i] = t
    s = 0.0
    for i in range(n):
        s += y[i] * y[i]
    return s


def exp_written_again(x, w):
    # the array the exps are stored into is changed after the loop: its elements no longer
    # hold the values the reverse sweep needs
    n = x.shape[0]
    y = np.empty(n)
    for i in range(n):
        y[i] = math.exp(w * x[i])
    for i in range(n):
        y[i] = y[i] * y[i]
    return np.sum(y)


def exp_one_element_per_row(x, w):
    # every trip of the inner loop stores into the same element of its row
    n, m = x.shape
    y = np.empty(n)
    s = 0.0
    for i in range(n):
        for j in range(m):
            t = math.exp(w * x[i, j])
            y[i] = t
            s += t * x[i, j]
    return s + np.sum(y)


def _args(shape=(5, 7), seed=0):
    r = np.random.default_rng(seed)
    return 2.0 * r.standard_normal(shape), r.standard_normal(shape)


def _taped(fn, args, wrt, disable=()):
    g = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable=set(disable))
    out = g.value_and_grad(*args)
    return g, out


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", [softmax, softmax_renamed, softmax_helper])
def test_softmax_programs_against_the_oracle(fn, target):
    check_against_oracle(fn, _args(), target=target, wrt=(0,))


@pytest.mark.parametrize("fn", [softmax, softmax_renamed, softmax_helper])
def test_the_exp_loop_tapes_nothing(fn):
    args = _args((6, 9))
    g, _ = _taped(fn, args, (0,))
    off, _ = _taped(fn, args, (0,), disable={"stored_rereads"})
    src, off_src = g.source_for(*args), off.source_for(*args)
    # the exp's result is not taped (softmax_helper's fused loop still tapes a read of e)
    assert "_exp(" in src and not any("_exp(" in line and "_ftape" in line for line in src.splitlines())
    # (a push is ``_ftape[_fpos] = t``, or through an unsigned cursor: tape_cursors)
    push = re.compile(r"_ftape\[(?:_fpos|_tc\d+)\] =")
    assert len(push.findall(src)) == len(push.findall(off_src)) - 1, src
    assert g.tape_bytes < off.tape_bytes


def test_the_same_bits_as_without_the_pass():
    # lane_sums, loop_order and vector_exp off on both sides: re-reading the element changes
    # no value, but a reverse loop without pops may count up (loop_order), lane_sums then sums
    # its adjoint in lanes (other orders of the same sums), and a forward loop without a push
    # takes its exps with the vector helper
    for fn in (softmax, softmax_renamed, softmax_helper, tanh_loop):
        args = _args() if fn is not tanh_loop else (np.linspace(-1.0, 2.0, 11), 0.7)
        wrt = (0,) if fn is not tanh_loop else (0, 1)
        _, (v1, g1) = _taped(fn, args, wrt, disable={"lane_sums", "loop_order", "vector_exp"})
        _, (v2, g2) = _taped(fn, args, wrt, disable={"lane_sums", "loop_order", "stored_rereads",
                                                      "vector_exp"})
        assert v1 == v2, fn.__name__
        for a, b in zip(g1 if isinstance(g1, tuple) else (g1,), g2 if isinstance(g2, tuple) else (g2,)):
            assert np.array_equal(a, b), fn.__name__


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("fn", [tanh_loop, exp_written_again, exp_one_element_per_row])
def test_loops_against_the_oracle(fn, target):
    r = np.random.default_rng(3)
    x = r.standard_normal((4, 6)) if fn is exp_one_element_per_row else r.standard_normal(9)
    check_against_oracle(fn, (x, 0.6), target=target, wrt=(0, 1))


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (3, 2), (12, 40)])
def test_other_shapes_and_float32(shape):
    X, W = _args(shape, seed=5)
    check_against_oracle(softmax, (X, W), target="cpu", wrt=(0,))
    g = coarsen.differentiate(softmax, wrt=(0,), target="cpu")
    v64, g64 = g.value_and_grad(X.astype(np.float32).astype(np.float64), W)
    v32, g32 = g.value_and_grad(X.astype(np.float32), W)
    # float32 inputs: the float64 gradient of their values, given back in float32
    assert v32 == v64 and g32[0].dtype == np.float32
    assert np.array_equal(g32[0], g64[0].astype(np.float32))
