"""Unroll and jam (``coarsen.ad.forward.jam``): the preconditions the mutation run
(``python -m tests.mutation coarsen/ad/forward/jam.py``, issue 48) found unpinned.

Each program is run as written and after the pass, on the same data, and the two must agree
bit for bit (or raise the same exception).  A loop that breaks a precondition must be left as
written: were it jammed, its trips would read a carried value, an alias or a trip-dependent
bound out of order, and the bits (or the run) would differ.  A loop that meets them must be
jammed, with the plan the module docstring promises (which inner loops run once per group,
which index checks run once, which statements run trip after trip)."""
import ast
import math
import pickle
import textwrap

import gast
import numpy as np
import pytest

from coarsen.ad.forward import jam


def _lanes_at(a, idx, k):
    """The SIMD form's lane helpers, one lane wide, so the pass's output runs as Python."""
    return a[idx]


def _lanes_put(a, idx, v):
    a[idx] = v


def _space():
    return {"np": np, "math": math, "_lanes_at": _lanes_at, "_lanes_put": _lanes_put}


def _parse(src):
    fdef = gast.parse(textwrap.dedent(src)).body[0]
    taken = {n.id for n in gast.walk(fdef) if isinstance(n, gast.Name)}
    return fdef, taken | {a.id for a in fdef.args.args}


def _compile(fdef):
    mod = gast.Module(body=[fdef], type_ignores=[])
    code = ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(mod)))
    space = _space()
    exec(compile(code, "<jam-guards>", "exec"), space)
    return space[fdef.name], code


def _pass(src, factor=jam.JAM):
    """(the function as written, the function after ``jam_loops``, the plans, the code)."""
    fdef, taken = _parse(src)
    plain, _ = _compile(fdef)
    fdef.body, plans = jam.jam_loops(fdef.body, taken, factor)
    jammed, code = _compile(fdef)
    return plain, jammed, plans, code


def _outcome(f, X, w):
    try:
        got = f(X.copy(), w.copy())
    except Exception as e:      # the same exception on both sides
        return type(e).__name__
    return [np.asarray(v).tobytes() for v in (got if isinstance(got, tuple) else (got,))]


def _agree(plain, jammed, code, trips=(0, 1, 3, 4, 5, 8, 9, 13), d=6):
    for n in trips:
        r = np.random.default_rng(100 + n)
        X, w = r.standard_normal((n, d)) * 2.0, r.standard_normal(d)
        assert _outcome(jammed, X, w) == _outcome(plain, X, w), (n, code)


LEFT = {
    # the else clause of a for runs after the last trip: the pass does not copy it
    "a for with an else clause": """
def f(X, w):
    g = np.zeros(3)
    s = 1.0
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j] * w[j]
    else:
        s = 2.0
    return g, s
""",
    "a loop over reversed(range(n))": """
def f(X, w):
    g = np.zeros(3)
    for i in reversed(range(X.shape[0])):
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
""",
    "a range with a step": """
def f(X, w):
    g = np.zeros(3)
    for i in range(0, X.shape[0], 2):
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
""",
    "an expression statement that calls nothing": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        X[i, 0]
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
""",
    # np.copyto writes w, which the next trip's inner loop reads
    "a call that writes an input, its result assigned": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j] * w[j]
        t = np.copyto(w, X[i])
    return g, w
""",
    # tmp is w: each trip writes w[0], which the next trip reads
    "a private array bound to an input": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        tmp = w
        tmp[0] = X[i, 0] + tmp[1]
        for j in range(3):
            g[j] += tmp[j] * X[i, j]
    return g, w
""",
    "an accumulation that reads another element of its array": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            g[j] += X[i, j] * w[j] + 0.5 * g[(j + 1) % 3]
    return g
""",
    "an accumulator's element read by another statement of the inner loop": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for k in range(3):
            r = 0.5 * g[(k + 2) % 3]
            g[k] = g[k] + (r + w[k]) * X[i, k]
    return g
""",
    # every iteration of the inner loop updates s[0]: a jam would reorder its adds
    "an accumulation at an index without the inner loop's variable": """
def f(X, w):
    s = np.zeros(2)
    for i in range(X.shape[0]):
        for j in range(5):
            s[0] += X[i, j] * w[j]
    return s
""",
    # G[1, 0] is updated in iteration 0 (second update) and in iteration 1 (first one)
    "an accumulator whose updates have the inner variable at two positions": """
def f(X, w):
    G = np.zeros((4, 4))
    for i in range(X.shape[0]):
        for j in range(4):
            G[j, 0] += X[i, j]
            G[1, j] -= w[j] * X[i, j + 1]
    return G
""",
    "a value assigned in the else branch only": """
def f(X, w):
    g = np.zeros(3)
    p = 0.25
    for i in range(X.shape[0]):
        if X[i, 0] > 0.0:
            q = 1.0
        else:
            p = X[i, 1]
        for j in range(3):
            g[j] += p * w[j] * X[i, j]
    return g
""",
    # z is read after the loop: only a branch that may not run assigns it before
    "a value read after the loop, reassigned there in a branch only": """
def f(X, w):
    g = np.zeros(3)
    z = 0.0
    for i in range(X.shape[0]):
        z = X[i, 0] * 2.0
        for j in range(3):
            g[j] += z * w[j]
    if X.shape[0] > 100:
        z = 0.0
    return g, z
""",
    "an inner bound computed by a call": """
def f(X, w):
    g = np.zeros(4)
    for i in range(X.shape[0]):
        for j in range(min(i, 4)):
            g[j] += X[i, j] * w[j]
    return g
""",
    "an inner bound read from an array the trips share": """
def f(X, w):
    h = np.zeros(1, np.int64)
    g = np.zeros(4)
    for i in range(X.shape[0]):
        h[0] += 1
        m = h[0] % 4
        for j in range(m):
            g[j] += X[i, j] * w[j]
    return g
""",
    "an inner bound assigned twice in the trip": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        m = 3
        if X[i, 0] > 0.0:
            m = 2
        for j in range(m):
            g[j] += X[i, j] * w[j]
    return g
""",
    # g[0] is updated in iterations 0 and 1 of the inner loop
    "an inner loop that reassigns its variable": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(4):
            j = j // 2
            g[j] += X[i, j] * w[j]
    return g
""",
    "an inner loop starting at a trip-dependent index": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(i % 2, 3):
            g[j] += X[i, j] * w[j]
    return g
""",
    # g[-1] is g[2]: updated in two iterations of the inner loop
    "an inner loop starting at a negative index": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(-1, 3):
            g[j] += X[i, j + 1] * w[j]
    return g
""",
    # _lanes_at reads h, not g: each trip overwrites g[j], no accumulation
    "a lane store of another array's element plus a value": """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        for j in range(3):
            _lanes_put(g, j, _lanes_at(w, j, 1) + X[i, j])
    return g
""",
}


@pytest.mark.parametrize("why", sorted(LEFT))
def test_a_loop_that_breaks_a_precondition_is_left_as_written(why):
    plain, jammed, plans, code = _pass(LEFT[why])
    assert not plans and "_mid_j" not in code, (why, code)
    _agree(plain, jammed, code)


#: (program, what its plan must say)
JAMMED = {
    # the SIMD form's accumulations: g's updates chained, G's at a (j, 1) index too
    "accumulations through the lane helpers": ("""
def f(X, w):
    g = np.zeros(3)
    G = np.zeros((4, 2))
    for i in range(X.shape[0]):
        for j in range(3):
            _lanes_put(g, j, _lanes_at(g, j, 1) + X[i, j] * w[j])
        for k in range(4):
            _lanes_put(G, (k, 1), _lanes_at(G, (k, 1), 1) + X[i, k + 1])
    return g, G
""", lambda p: p.jammed == (0, 1) and p.chained == ((0, {"g"}), (1, {"G"}))),
    # the updates sit in the branches: jammed, each trip's copy updating in place (unchained)
    "a branch inside the inner loop": ("""
def f(X, w):
    g = np.zeros(4)
    for i in range(X.shape[0]):
        for j in range(4):
            if X[i, j] > 0.0:
                g[j] += X[i, j] * w[j]
            else:
                g[j] -= 0.5 * w[j]
    return g
""", lambda p: p.jammed == (0,) and p.chained == ((0, set()),)),
    # m is private and the same in every trip: a bound the trips share
    "an inner bound assigned from names the loop does not write": ("""
def f(X, w):
    d = X.shape[1]
    g = np.zeros(6)
    for i in range(X.shape[0]):
        m = d - 1
        for j in range(m):
            g[j] += X[i, j + 1] * w[j]
    return g
""", lambda p: p.jammed == (1,) and "m" in p.privates and not p.units),
    "an inner loop from 1": ("""
def f(X, w):
    g = np.zeros(6)
    for i in range(X.shape[0]):
        for j in range(1, X.shape[1]):
            g[j] -= X[i, j] * w[j - 1]
    return g
""", lambda p: p.jammed == (0,)),
    # g's shape is no use of its elements: the accumulating loop alone touches it
    "a shape read of the accumulator outside its loop": ("""
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        c = X[i, g.shape[0]] * 0.5
        for j in range(3):
            g[j] += c * X[i, j]
    return g
""", lambda p: p.jammed == (1,) and not p.units),
    # s spans statements 0-2, t 1-3: one unit 0-3, else statement 3 would be lost
    "two carried values whose statements interleave": ("""
def f(X, w):
    g = np.zeros(3)
    s = 0.0
    t = 1.0
    for i in range(X.shape[0]):
        s = s + X[i, 0]
        t = t * 0.5 + X[i, 1]
        s = s * 0.75
        t = t - X[i, 2]
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return s, t, g
""", lambda p: p.units == ((0, 3),) and p.jammed == (4,)),
    # spans 0-0, 2-3 and 3-4: two units, the loop between them jammed
    "three carried values, two of them sharing a statement": ("""
def f(X, w):
    g = np.zeros(3)
    s = 0.0
    t = 1.0
    u = 2.0
    for i in range(X.shape[0]):
        s = s + X[i, 0]
        for j in range(3):
            g[j] += X[i, j] * w[j]
        t = t * 0.5 + X[i, 1]
        u = u * 0.25 + t
        u = u - X[i, 3]
    return s, t, u, g
""", lambda p: p.units == ((0, 0), (2, 4)) and p.jammed == (1,)),
    # a trip-invariant index check runs once per group; its test is a name assigned once
    "index checks the same in every trip": ("""
def f(X, w):
    d = 3
    g = np.zeros(3)
    for i in range(X.shape[0]):
        if d > X.shape[1]:
            raise IndexError("index out of range")
        bad = d + 1 > X.shape[1]
        if bad:
            raise IndexError("index out of range")
        for j in range(d):
            g[j] += X[i, j] * w[j]
    return g
""", lambda p: p.once == {0, 2} and p.jammed == (3,)),
    # the same test, but the check has an else branch that assigns c: every trip runs it
    "an index check with an else branch": ("""
def f(X, w):
    d = 3
    g = np.zeros(3)
    for i in range(X.shape[0]):
        if d > X.shape[1]:
            raise IndexError("index out of range")
        else:
            c = X[i, 0] * 2.0
        for j in range(d):
            g[j] += c * X[i, j] * w[j]
    return g
""", lambda p: not p.once and p.jammed == (1,)),
    # c is reassigned between its two branches: the first tells the second nothing, so p is
    # carried, and the statements from the first branch to the second run trip after trip
    "a branch test reassigned between two branches on it": ("""
def f(X, w):
    g = np.zeros(3)
    p = 0.5
    for i in range(X.shape[0]):
        c = X[i, 0] > 0.0
        if c:
            p = X[i, 1]
        c = X[i, 2] > 0.0
        if c:
            q = p
        else:
            q = 1.0
        for j in range(3):
            g[j] += q * w[j] * X[i, j]
    return g
""", lambda p: p.units == ((1, 3),) and p.jammed == (4,)),
    # two tests that are no names: what the first branch assigns, the second may not take
    "a value assigned under one test and read under another": ("""
def f(X, w):
    acc = np.zeros(3)
    last = -1.0
    for r in range(X.shape[0]):
        if X[r, 3] < 0.5:
            last = X[r, 4]
        if X[r, 5] < 0.0:
            v = last * 2.0
        else:
            v = X[r, 1]
        for c in range(3):
            acc[c] = acc[c] + v * X[r, c]
    return acc
""", lambda p: p.units == ((0, 1),) and p.jammed == (2,)),
    # nothing after a pass is skipped: p is read before its assignment, so carried
    "a carried value read after a pass statement": ("""
def f(X, w):
    g = np.zeros(3)
    p = 0.5
    for i in range(X.shape[0]):
        pass
        t = p * X[i, 0]
        p = X[i, 1]
        for j in range(3):
            g[j] += t * w[j]
    return g
""", lambda p: p.units == ((1, 2),) and p.jammed == (3,)),
}


# a row with X[i, 0] > 2.5 raises: the check's test depends on the trip
RAISES_IN_ITS_TRIP = """
def f(X, w):
    g = np.zeros(3)
    for i in range(X.shape[0]):
        if X[i, 0] > 2.5:
            raise IndexError("row out of range")
        for j in range(3):
            g[j] += X[i, j] * w[j]
    return g
"""


def test_a_check_whose_test_depends_on_the_trip_runs_in_every_trip():
    plain, jammed, plans, code = _pass(RAISES_IN_ITS_TRIP)
    assert plans[0].jammed == (1,) and not plans[0].once, code
    w = np.arange(6.0)
    for bad in range(7):        # the row that raises: each position in a group of 4, the rest
        X = np.ones((7, 6))
        X[bad, 0] = 3.0
        assert _outcome(jammed, X, w) == _outcome(plain, X, w) == "IndexError", (bad, code)
    X = np.ones((7, 6))
    assert _outcome(jammed, X, w) == _outcome(plain, X, w)


def _long_body(assignments):
    lines = "".join(f"        t{k} = X[i, {k % 6}] * {k + 1}.0\n" for k in range(assignments))
    return ("def f(X, w):\n    g = np.zeros(3)\n    for i in range(X.shape[0]):\n" + lines
            + "        for j in range(3):\n            g[j] += X[i, j] * w[j]\n    return g\n")


def test_a_body_of_more_than_300_statements_is_left_as_written():
    """``MAX_STATEMENTS``: 300 statements (nested ones counted: the inner loop and its update
    are two) are copied, 301 are not."""
    plain, jammed, plans, code = _pass(_long_body(298))
    assert len(plans) == 1 and plans[0].jammed == (298,)
    _agree(plain, jammed, code, trips=(5,))
    _, _, plans, code = _pass(_long_body(299))
    assert not plans and "_mid_j" not in code


def test_names_compare_by_value_not_by_identity():
    """Statements read back from a pickle (every name a new string, not the interned one the
    parser made) are jammed as the parsed ones are."""
    src = JAMMED["accumulations through the lane helpers"][0]
    fdef, taken = _parse(src)
    _, want = jam.jam_loops(fdef.body, taken)
    _, got = jam.jam_loops(pickle.loads(pickle.dumps(fdef.body)), taken)
    assert want and got == want


@pytest.mark.parametrize("why", sorted(JAMMED))
def test_a_loop_that_meets_the_preconditions_is_jammed_as_planned(why):
    src, want = JAMMED[why]
    plain, jammed, plans, code = _pass(src)
    assert len(plans) == 1 and want(plans[0]), (why, plans, code)
    assert f"range(_lo_j1, _mid_j1, {jam.JAM})" in code
    _agree(plain, jammed, code)
