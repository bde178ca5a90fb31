"""Loop order (coarsen.ad.reverse.loop_order): the guards the mutation run
(``python -m tests.mutation coarsen/ad/reverse/loop_order.py``) found unpinned.

Each program is a function whose loops over ``range(a, b, -1)`` are marked as the emitter's
reverse loops.  Where the pass must keep a loop's order, the program shows why: running its
trips the other way computes something else.  Where it may count up, it must, and the function
must compute what it computed before.  All inputs are small integers: sums are exact in any
order, so "the same" is equality."""
import re

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.loop_order import REVERSE_MARK, forward_order

from tests.helpers_passes import rewrite

# every array the programs index, with its rank (what the driver's types give the pass)
RANKS = {"w": 1, "g": 1, "u": 2}
MADE = {"g", "u", "t", "s", "acc", "k", "pos", "c", "v", "a", "b", "step", "bounds"}


def _marked(body):
    for st in body:
        for node in gast.walk(st):
            if isinstance(node, gast.For) and isinstance(node.iter, gast.Call) and \
                    len(node.iter.args) == 3:
                setattr(node, REVERSE_MARK, True)
    return body


def _order(src):
    def reverse_pass(body, made):
        return forward_order(_marked(body), made, RANKS)
    return rewrite(src, reverse_pass, MADE)


def _inputs(n=5):
    w = np.array([3.0, -2.0, 4.0, 1.0, -1.0, 2.0, -3.0])[:n + 1]
    return w, n, 3.0


def _results(fn):
    out = fn(*_inputs())
    return [np.asarray(v) for v in (out if isinstance(out, tuple) else (out,))]


def _equal(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _counted_up_by_hand(src):
    """``src`` with its reverse loop's trips run upwards (``range(e - 1, -1, -1)`` as ``range(e)``)."""
    flipped = re.sub(r"range\((.+?) - 1, -1, -1\)", r"range(\1)", src, count=1)
    assert flipped != src
    return flipped


KEPT = {
    # a name a trip assigns, read after the loop that holds the reverse loop (_live_out: the
    # owner's liveness, not the end of the function)
    "a trip's value read after the enclosing loop": """
def f(w, n, s0):
    g = np.zeros(n)
    t = 0.0
    for k in range(2):
        for i in range(n - 1, -1, -1):
            t = w[i] * (k + 1)
            g[i] += t
    return g, t
""",
    "a trip's value read after the if holding the loop": """
def f(w, n, s0):
    g = np.zeros(n)
    t = s0
    if n > 2:
        for i in range(n - 1, -1, -1):
            t = w[i] - 2.0
            g[i] -= t
    return g, t
""",
    # a for-else inside the trip: its else is statements the trips run too
    "a scalar carried by the else of an inner loop": """
def f(w, n, s0):
    c = s0
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        for j in range(1):
            g[i] += w[j]
        else:
            c = c * 0.5 + w[i]
    return g, c
""",
    "a pair carried from trip to trip by a tuple assignment": """
def f(w, n, s0):
    a, b = s0, 1.0
    for i in range(n - 1, -1, -1):
        a, b = b, 2.0 * a + w[i]
    return a, b
""",
    # _defined_first: an if's test, an if's branch, an inner loop's bound reading what the
    # trip before left
    "an if's test reads what the trip before assigned": """
def f(w, n, s0):
    t = 0.0
    acc = 0.0
    for i in range(n - 1, -1, -1):
        if t > 0.0:
            acc += w[i]
        t = w[i] - 1.0
    return acc
""",
    "an if's branch reads what the trip before assigned": """
def f(w, n, s0):
    t = 0.0
    acc = 0.0
    for i in range(n - 1, -1, -1):
        if w[i] > 0.0:
            acc += t
        t = w[i] * 2.0
    return acc
""",
    "an inner loop's bound reads what the trip before assigned": """
def f(w, n, s0):
    k = 0
    acc = 0.0
    for i in range(n - 1, -1, -1):
        for j in range(k):
            acc += w[j] * i
        k = i % 3 + 1
    return acc
""",
    # a reset accumulator (``s += ..``, read, ``s = 0.0`` last) must be 0.0 when the loop starts
    "a reset accumulator of a nested loop, nonzero when it first starts": """
def f(w, n, s0):
    s = s0
    g = np.zeros(n)
    for k in range(2):
        for i in range(n - 1, -1, -1):
            s += w[i]
            g[i] += s
            s = 0.0
    return g
""",
    "a reset accumulator that is a parameter (no assignment before the loop)": """
def f(w, n, s0):
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        s0 += w[i]
        g[i] += s0 * (i + 1)
        s0 = 0.0
    return g
""",
    # ``u[0]`` indexes one axis of a matrix: a row, which the trip binds and adds into whole
    # (a store that no subscript shows), and reads an element of through ``u``
    "a row of a matrix held by a trip's name and added into": """
def f(w, n, s0):
    u = np.zeros((2, n))
    acc = 0.0
    for i in range(n - 1, -1, -1):
        v = u[0]
        v += w[i]
        acc += u[0, i] * (i + 1)
    return acc, u
""",
    # a trip that raises ends the loop: which trips ran before it is the order's
    "a loop in a try block whose last trips raise": """
def f(w, n, s0):
    g = np.zeros(n)
    try:
        for i in range(n - 1, -1, -1):
            g[i] += w[i + n - 2]
    except IndexError:
        pass
    return g
""",
    # the counted rewrite evaluates the bounds again: they must have no effect
    "a counter in a loop whose bound has an effect": """
def f(w, n, s0):
    bounds = [n]
    pos = n
    g = np.zeros(n)
    for i in range(bounds.pop() - 1, -1, -1):
        pos = pos - 1
        g[i] += w[pos] * (i + 1)
    return g, pos
""",
    # the counted rewrite moves the counter before the loop and evaluates the bounds again
    # (_induction: bounds that read the counter; the emitter copies such a bound first)
    "a counter the loop's bounds read": """
def f(w, n, s0):
    pos = n
    g = np.zeros(n)
    for i in range(pos - 1, -1, -1):
        pos = pos - 1
        g[i] += w[pos] * (i + 1)
    return g, pos
""",
    "a counter lowered by a name, not a constant": """
def f(w, n, s0):
    step = 1
    pos = n
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        pos = pos - step
        g[i] += w[pos] * (i + 2)
    return g, pos
""",
}


@pytest.mark.parametrize("why", KEPT)
def test_the_loop_keeps_its_order(why):
    before, after, text = _order(KEPT[why])
    assert "-1, -1)" in text and "_iv" not in text, (why, text)
    assert _equal(_results(before), _results(after)), why


@pytest.mark.parametrize("why", KEPT)
def test_counting_those_up_would_change_the_result(why):
    """Not vacuous: the same trips upwards give other results."""
    src = KEPT[why]
    up = _counted_up_by_hand(src)
    before, _, _ = _order(src)
    scope = {"np": np}
    exec(compile(up, "<counted up>", "exec"), scope)    # noqa: S102 - the test's own text
    assert not _equal(_results(before), _results(scope["f"])), why


COUNTED_UP = {
    # the outer loop assigns its variable at each trip: the inner loop's is dead after it
    "an inner loop reusing the outer loop's variable": """
def f(w, n, s0):
    g = np.zeros(n)
    for i in range(2):
        g[i] += 1.0
        for i in range(n - 1, -1, -1):
            g[i] += w[i] * s0
    return g
""",
    # the same after a later loop reusing the variable
    "a later loop assigns the variable again": """
def f(w, n, s0):
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        g[i] += w[i] - s0
    i = 0
    for i in range(2):
        g[i] += 1.0
    return g
""",
    "a trip's name tested by an if after the trip assigned it": """
def f(w, n, s0):
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        t = w[i] * 2.0
        if t > 0.0:
            g[i] += t
        else:
            g[i] -= t * s0
    return g
""",
    "an inner loop bounded by what the trip assigned": """
def f(w, n, s0):
    acc = 0.0
    for i in range(n - 1, -1, -1):
        k = i % 3 + 1
        for j in range(k):
            acc += w[j] * i
    return acc
""",
    "an array read for its shape": """
def f(w, n, s0):
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        g[i] += w[i] * w.shape[0]
    return g
""",
    "a reverse loop in a while loop": """
def f(w, n, s0):
    g = np.zeros(n)
    k = 0
    while k < 2:
        for i in range(n - 1, -1, -1):
            g[i] += w[i] * (k + 1)
        k += 1
    return g
""",
}


@pytest.mark.parametrize("why", COUNTED_UP)
def test_the_loop_counts_up_with_the_same_results(why):
    before, after, text = _order(COUNTED_UP[why])
    assert "-1, -1)" not in text and "for i in range(n):" in text, (why, text)
    assert _equal(_results(before), _results(after)), why


COUNTER = """
def f(w, n, s0):
    pos = n + 1
    g = np.zeros(n)
    for i in range(n - 1, -1, -1):
        pos -= 1
        g[i] += w[pos] * (i + 1)
    return g, pos
"""


def test_the_counter_copy_takes_a_name_the_function_does_not_use():
    """``_iv1`` is the function's own here: the copy of the counter is ``_iv2``."""
    src = COUNTER.replace("    pos = n + 1\n", "    pos = n + 1\n    _iv1 = s0 * 2.0\n")
    src = src.replace("return g, pos", "return g, pos, _iv1")
    before, after, text = _order(src)
    assert "_iv2 = pos" in text and "_iv2 += 1" in text, text
    assert _equal(_results(before), _results(after))


def test_a_counted_loop_compiles_runs_the_same_and_keeps_its_comment():
    """The counter's rewrite is code ``compile`` takes (each name's context right), and the
    loop's comment goes with its first statement."""
    before, after, text = _order(COUNTER)
    assert "pos = pos - max(n, 0)\n    if pos >= 0:\n        _iv1 = pos\n        for i in range(n):" in text, text
    assert _equal(_results(before), _results(after))
    fn = gast.parse(COUNTER).body[0]
    _marked(fn.body)
    fn.body[2].coarsen_comment = "the reverse of: for i in range(n)"
    out = forward_order(fn.body, MADE, RANKS)
    shift = out[2]
    assert isinstance(shift, gast.Assign) and shift.targets[0].id == "pos", gast.dump(shift)
    assert getattr(shift, "coarsen_comment", None) == "the reverse of: for i in range(n)"

