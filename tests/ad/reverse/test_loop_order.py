"""Loop order (coarsen.ad.reverse.loop_order): a reverse loop counts up only where its trips
commute.  Each refused case below is one where counting up would change the result, and the
test runs both orders to show it; each accepted one gives the same numbers."""
import ast

import gast
import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.loop_order import REVERSE_MARK, forward_order

from tests.oracle import check_against_oracle


def _marked(src):
    body = gast.parse(src).body
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.For) and isinstance(n.iter, gast.Call) and len(n.iter.args) == 3:
                setattr(n, REVERSE_MARK, True)
    return body


def _text(body):
    return ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


def _ranks(src):
    """The rank of each array the statements leave or read (as the driver's types give it)."""
    return {k: v.ndim for k, v in _run(src).items() if isinstance(v, np.ndarray)}


def _rewrite(src, made=None, ranks=None):
    body = _marked(src)
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    names = {n.id for st in body for n in gast.walk(st) if isinstance(n, gast.Name)}
    out = forward_order(body, made if made is not None else {v for v in names if v != "x"},
                        _ranks(src) if ranks is None else ranks)
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before      # input unchanged
    return _text(out)


def _run(text, n=5):
    """Run the statements with integer-valued inputs (sums exact in any order) and return the
    variables they leave."""
    r = np.random.default_rng(0)
    scope = {"np": np, "math": np, "n": n, "m": n + 1,
             "x": r.integers(-4, 5, size=(n + 1, n + 1)).astype(float),
             "w": r.integers(-4, 5, size=n + 1).astype(float)}
    exec(compile(text, "<loop order>", "exec"), scope)
    return {k: v for k, v in scope.items() if k not in ("np", "math", "__builtins__")}


def _same(a, b, dead=("i", "j", "xi", "t_bar")):
    """The same values left, but in the loops' own dead variables."""
    assert a.keys() == b.keys()
    for k in set(a) - set(dead):
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


# the reverse of a scalarized outer product: trip-locals, an accumulator reset per trip, a
# plain store indexed by the loop variable, augmented stores anywhere
OUTER = """
s_bar = 0.0
g_bar = np.zeros(n)
h_bar = np.zeros(m)
y_bar = np.empty(n)
tot = 0.0
for i in range(n - 1, -1, -1):
    xi = w[i]
    for j in range(m - 1, -1, -1):
        t_bar = x[i, j] * xi
        s_bar += t_bar * w[j]
        h_bar[j] += t_bar
    g_bar[i] += s_bar
    y_bar[i] = 2.0 * s_bar
    tot += s_bar
    s_bar = 0.0
"""


def test_commuting_trips_count_up_with_the_same_results():
    out = _rewrite(OUTER)
    assert "for i in range(n):" in out and "for j in range(m):" in out
    _same(_run(OUTER), _run(out))


# the reverse of one step of a stencil: reads row t + 1 (and clears it), adds into row t
STENCIL = """
t = 2
k_bar = 0.0
u_bar = np.zeros((4, m))
u_bar[3] = w
for i in range(n - 1, 0, -1):
    g = u_bar[t + 1, i]
    u_bar[t + 1, i] = 0.0
    k_bar += g * x[t, i]
    u_bar[t, i + 1] += g
    u_bar[t, i] += -2.0 * g
    u_bar[t, i - 1] += g
"""


def test_a_stencil_step_counts_up_with_the_same_results():
    out = _rewrite(STENCIL)
    assert "for i in range(1, n):" in out
    _same(_run(STENCIL), _run(out), dead=("i", "g"))


def test_two_reads_of_other_trips_elements_still_count_up():
    """Reads commute with each other, whatever elements they read: only a read and a store
    (of another trip's element) keep the order."""
    src = ("u_bar = np.zeros((2, n + 1))\nu_bar[1] = w\nfor i in range(n - 1, -1, -1):\n"
           "    u_bar[0, i] += u_bar[1, i] * u_bar[1, i + 1]\n")
    out = _rewrite(src)
    assert "for i in range(n):" in out, out
    _same(_run(src), _run(out))


@pytest.mark.parametrize("header, expected", [
    ("for i in range(n - 1, -1, -1):", "for i in range(n):"),
    ("for i in range(n - 1, k - 1, -1):", "for i in range(k, n):"),
    ("for i in range(n, k, -1):", "for i in range(k + 1, n + 1):"),
    ("for i in range(4, 0, -1):", "for i in range(1, 5):"),
])
def test_the_forward_range_visits_the_same_indices(header, expected):
    src = f"k = 2\nacc = 0.0\n{header}\n    acc += w[i] * (i + 1)\n"
    out = _rewrite(src)
    assert expected in out
    _same(_run(src), _run(out))
    # the same indices, in the opposite order
    orders = []
    for h in (header, expected):
        scope = {"seen": [], "n": 5, "k": 2}
        exec(f"{h}\n    seen.append(i)\n", scope)
        orders.append(scope["seen"])
    assert orders[0] == orders[1][::-1] and orders[0]


REFUSED = [
    ("carried", "c = 1.0\nfor i in range(n - 1, -1, -1):\n    c = c * 0.5 + w[i]\n"),
    ("same element, plain stores", "o_bar = np.zeros(2)\nfor i in range(n - 1, -1, -1):\n"
                                    "    o_bar[0] = w[i]\n"),
    ("stored and read", "o_bar = np.zeros(n + 1)\nfor i in range(n - 1, -1, -1):\n"
                        "    o_bar[i] += o_bar[i + 1] + w[i]\n"),
    ("trip-local live after", "for i in range(n - 1, -1, -1):\n    t = w[i]\nlast = t\n"),
    ("loop variable live after", "acc = 0.0\nfor i in range(n - 1, -1, -1):\n    acc += w[i]\nlast = i\n"),
    ("reset accumulator, nonzero on entry",
     "s_bar = 3.0\ng_bar = np.zeros(n)\nfor i in range(n - 1, -1, -1):\n    s_bar += w[i]\n"
     "    g_bar[i] += s_bar\n    s_bar = 0.0\n"),
    ("reset accumulator, not reset at the end",
     "s_bar = 0.0\ng_bar = np.zeros(n)\nfor i in range(n - 1, -1, -1):\n    s_bar += w[i]\n"
     "    g_bar[i] += s_bar\n"),
    ("a counter read before its update", "pos = 5\nv = 0.0\ng_bar = np.zeros(n)\n"
     "for i in range(n - 1, -1, -1):\n    v = w[pos] * i\n    pos -= 1\n    g_bar[i] += v\nv = 0.0\n"),
    ("a counter updated twice", "pos = 5\nv = 0.0\ng_bar = np.zeros(n)\nfor i in range(n - 1, -1, -1):\n"
     "    pos -= 1\n    v = w[pos] * i\n    g_bar[i] += v\n    if v > 0:\n        pos = pos - 1\nv = 0.0\n"),
    ("a view of the stored array", "o_bar = np.zeros(n + 1)\nv = o_bar[1:]\n"
                                   "for i in range(n - 1, -1, -1):\n    o_bar[i] += v[i] + w[i]\n"),
    ("rows carried by the loop variable", "u_bar = np.zeros((n + 1, 2))\nu_bar[n] = 1.0\n"
     "for t in range(n - 1, -1, -1):\n    g = u_bar[t + 1, 0]\n    u_bar[t, 0] += 0.5 * g + w[t]\n"
     "    u_bar[t, 1] += g * g\n"),
    ("rows of a name the loop assigns", "u_bar = np.zeros((n + 2, 2))\nr = 0\n"
     "for t in range(n - 1, -1, -1):\n    r = t % 2\n    g = u_bar[r + 1, 0]\n"
     "    u_bar[r, 0] += g + w[t]\nr = 0\n"),
    ("a read of the other trips' plain stores", "o_bar = np.zeros(n + 1)\n"
     "for i in range(n - 1, -1, -1):\n    o_bar[i] = o_bar[i + 1] + w[i]\n"),
    ("a product accumulator", "p = 1.0\nfor i in range(n - 1, -1, -1):\n    p *= w[i] + 0.5\n"
                              "    p += 1.0\n"),
    # a name the trip assigns that is also an array: here a view that each trip adds into
    # (a store no subscript shows) and reads an element of
    # a "counter" (v = v - 1 first in the trip) that is an array: counting it up is no
    # reordering of its trips (test_an_array_is_no_counter checks that no branch counts up)
    ("a counter read as an array", "q = np.zeros(2) + 5.0\nacc = 0.0\n"
     "for i in range(n - 1, -1, -1):\n    q = q - 1\n    acc += q[0] * w[i]\n"),
    ("a counter stored into as an array", "q = np.zeros(2) + 5.0\n"
     "for i in range(n - 1, -1, -1):\n    q = q - 1\n    q[1] = w[i] * i\n"),
    ("a trip's name read as an array", "o = np.zeros((2, n))\ns = 0.0\n"
     "for i in range(n - 1, -1, -1):\n    v = o[0]\n    v += w[:n]\n    s += v[i]\n"),
    # names that alias an array the loop reads or stores, through a row (an index of fewer
    # axes than the rank: a view, not an element) or whole: the writes through one name are
    # reads through the other (issue 48)
    ("a row of the stored array held by a name", "o_bar = np.zeros((2, n + 1))\no_bar[0] = 1.0\n"
     "v = o_bar[0]\nfor i in range(n - 1, -1, -1):\n    o_bar[0, i] += v[i + 1] + w[i]\n"),
    ("a trip's row added into, read by subscript", "o = np.zeros((2, n))\ns = 0.0\n"
     "for i in range(n - 1, -1, -1):\n    v = o[0]\n    v += w[:n]\n    s += o[0, i]\n"),
    ("an array added into whole, read through another name", "o = np.zeros(n)\nv = o\ns = 0.0\n"
     "for i in range(n - 1, -1, -1):\n    v += w[i]\n    s += o[i]\n"),
    ("an array the trip binds and adds into whole", "o_bar = np.zeros(n + 1)\n"
     "for i in range(n - 1, -1, -1):\n    a = w\n    a += i\n    o_bar += a\n"),
]


@pytest.mark.parametrize("why, src", REFUSED, ids=[w for w, _ in REFUSED])
def test_refused_where_the_order_matters(why, src):
    out = _rewrite(src)
    assert "-1)" in out, why


@pytest.mark.parametrize("why, src", REFUSED, ids=[w for w, _ in REFUSED])
def test_the_refused_cases_would_change_the_result(why, src):
    """The check is not vacuous: counting up gives other numbers (or other leftovers)."""
    flipped = src.replace("range(n - 1, -1, -1)", "range(n)")
    a, b = _run(src), _run(flipped)
    assert any(not np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a), why


@pytest.mark.parametrize("why", ["a counter read as an array", "a counter stored into as an array"])
def test_an_array_is_no_counter(why):
    """The counted rewrite keeps the loop as it was in its ``else`` branch: the check that the
    loop is left alone is that nothing counts up."""
    src = dict(REFUSED)[why]
    out = _rewrite(src)
    assert "range(n)" not in out and "_iv" not in out, (why, out)


def test_user_arrays_and_unmarked_loops_are_left_alone():
    src = "for i in range(n - 1, -1, -1):\n    x[i, 0] += w[i]\n"
    assert "-1)" in _rewrite(src, made=set())            # x is the user's: may alias w
    body = gast.parse("acc = 0.0\nfor i in range(n - 1, -1, -1):\n    acc += w[i]\n").body
    assert "-1)" in _text(forward_order(body, {"acc"}, {"w": 1}))  # not emitted by reverse_range


def test_calls_other_than_pure_ones_refuse():
    src = "acc = 0.0\nfor i in range(n - 1, -1, -1):\n    acc += float(np.sum(w)) + math.exp(w[i])\n"
    assert "-1)" in _rewrite(src)
    assert "range(n)" in _rewrite(src.replace("float(np.sum(w)) + ", ""))


def gemver_like(A, u, v, y):
    B = A + np.outer(u, v)
    t = B.T @ y
    return 0.5 * np.sum(t * t) + np.sum(B @ t)


def test_gradients_through_counted_up_loops_match_the_oracle():
    r = np.random.default_rng(5)
    args = (r.normal(size=(4, 3)), r.normal(size=4), r.normal(size=3), r.normal(size=4))
    g = coarsen.differentiate(gemver_like)
    src = g.source_for(*args)
    assert "range(_" in src and src.count("-1, -1)") < src.count("for ")
    for target in ("cpu", "python"):
        check_against_oracle(gemver_like, args, target)


# a reverse loop that counts down a counter first in each trip (the reverse of GMM's ``idx += 1``
# at the end of each trip of its triangular loop), reading an element with it
COUNTED = """
pos = {start}
v = 0.0
g_bar = np.zeros(n)
for i in range(n - 1, -1, -1):
    pos = pos - 1
    v = w[pos] * i
    g_bar[i] += v
    q_bar[pos] += v
v = 0.0
"""


@pytest.mark.parametrize("start", [5, 3, 6], ids=["ends_at_0", "ends_below_0", "ends_above_0"])
def test_a_counter_counts_up_from_where_the_reverse_loop_leaves_it(start):
    src = COUNTED.format(start=start)
    out = _rewrite("q_bar = np.zeros(n + 1)\n" + src)
    assert "pos = pos - max(n, 0)\nif pos >= 0:\n    _iv1 = pos\n    for i in range(n):" in out, out
    assert "g_bar[i] += v\n        q_bar[_iv1] += v\n        _iv1 += 1\nelse:\n" in out, out
    # where pos starts below 0 (Python's negative indices) the loop runs as before
    a = _run("q_bar = np.zeros(n + 1)\n" + src)
    b = _run(out)
    assert set(b) - set(a) == {"_iv1"} or start < 5
    _same(a, {k: v for k, v in b.items() if k != "_iv1"})
    assert a["pos"] == b["pos"] == start - 5


def test_a_counter_is_not_a_reason_to_count_up_a_loop_whose_trips_do_not_commute():
    src = COUNTED.format(start=5).replace("    g_bar[i] += v\n", "    g_bar[i] += v\n    v_s = v\n")
    src = src.replace("v = 0.0\n", "", 1).replace("\nv = 0.0\n", "\nlast = v_s\n")
    assert "-1)" in _rewrite("q_bar = np.zeros(n + 1)\n" + src)


def tri_counter(mu, L, x, start):
    """GMM's triangular product with its counter from ``start``: 0, or ``-len(L)`` (Python's
    negative indices name the same elements)."""
    n, d = x.shape
    q = np.zeros(d)
    s = 0.0
    for i in range(n):
        for j in range(d):
            q[j] = mu[j] * x[i, j]
        idx = start
        for j in range(d):
            for c in range(j + 1, d):
                q[c] += L[idx] * (x[i, j] - mu[j])
                idx += 1
        for j in range(d):
            s += q[j] * q[j]
    return s


def test_the_counted_reverse_loop_end_to_end_with_negative_indices_too():
    r = np.random.default_rng(4)
    d = 5
    mu, L, x = r.standard_normal(d), r.standard_normal(d * (d - 1) // 2), r.standard_normal((3, d))
    g = coarsen.differentiate(tri_counter, wrt=(0, 1))
    up = g.value_and_grad(mu, L, x, 0)
    assert "if idx >= 0:" in g.source and "_iv1 += 1" in g.source, g.source
    down = g.value_and_grad(mu, L, x, -L.shape[0])
    assert up[0] == pytest.approx(down[0], rel=1e-14)
    for a, b in zip(up[1], down[1]):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    for start in (0, -L.shape[0]):
        check_against_oracle(tri_counter, (mu, L, x, start), wrt=(0, 1))


# the reverse of an in-place update of a user's array (jacobi2d: ``A[i, j] = ...`` restored from
# the tape, one element per trip), reading the tape counting up
RESTORE = """
_fpos = 6
A = {alloc}
A_bar = np.zeros((2, n))
A_bar[1, 2] = 2.0
c_bar = 0.0
for i in range(n - 1, -1, -1):
    _fpos -= 1
    A[1, i] = w[_fpos]
    a = A_bar[1, i]
    A_bar[1, i] = 0.0
    c_bar += a * x[2, i]
"""


def test_a_restore_into_a_fresh_array_of_the_user_reads_the_tape_counting_up():
    src = RESTORE.format(alloc="x[:2].copy()")
    out = _rewrite(src, made={"A_bar", "c_bar", "a"})
    assert "_fpos = _fpos - max(n, 0)\n_iv1 = max(_fpos, 0)\nfor i in range(n):" in out, out
    assert "A[1, i] = w[_iv1]" in out and "else" not in out, out
    a, b = _run(src), _run(out)
    assert b.pop("_iv1") == 6 and a["_fpos"] == b["_fpos"] == 1
    _same(a, b, dead=("i", "a"))


@pytest.mark.parametrize("alloc, extra, why", [
    ("x[:2]", "", "a view of x"),
    ("x[:2].copy()", "V = A[0:1]\n", "a view of A exists"),
    ("x[:2].copy()", "s = np.sum(A)\n", "A is taken whole"),
])
def test_a_restore_into_an_array_other_names_may_reach_keeps_its_order(alloc, extra, why):
    src = RESTORE.format(alloc=alloc).replace("A_bar = np.zeros", extra + "A_bar = np.zeros")
    out = _rewrite(src, made={"A_bar", "c_bar", "a"})
    assert "range(n - 1, -1, -1)" in out, (why, out)


def test_a_restore_into_an_array_a_row_of_which_is_read_keeps_its_order():
    """``V = A[1]`` indexes fewer axes than ``A`` has: a row, a view of the elements the loop
    restores, which it reads through ``V``; counting up would read them restored (issue 48)."""
    src = RESTORE.format(alloc="x[:2].copy()").replace("A_bar = np.zeros", "V = A[1]\nA_bar = np.zeros")
    src = src.replace("    c_bar += a * x[2, i]\n", "    c_bar += a * x[2, i] + V[i + 1]\n")
    out = _rewrite(src, made={"A_bar", "c_bar", "a"})
    assert "range(n - 1, -1, -1)" in out, out
    # the trips counted up, each reading the tape where the reverse loop reads it
    up = src.replace("for i in range(n - 1, -1, -1):\n    _fpos -= 1\n    A[1, i] = w[_fpos]\n",
                     "_fpos -= n\nfor i in range(n):\n    A[1, i] = w[_fpos + i]\n")
    assert up != src
    a, b = _run(src), _run(up)
    assert np.array_equal(a["A"], b["A"]) and a["c_bar"] != b["c_bar"]


def jacobi_1d(u0, c, nt):
    """jacobi2d's sweeps in one dimension: two copies, each step reads one and writes the other."""
    a = u0.copy()
    b = u0.copy()
    n = u0.shape[0]
    for t in range(nt):
        for i in range(1, n - 1):
            b[i] = c * (a[i - 1] + a[i] + a[i + 1])
        for i in range(1, n - 1):
            a[i] = c * (b[i - 1] + b[i] + b[i + 1])
    return np.sum(a * a)


def jacobi_1d_named_like_the_compiler(_fpos, _iv1, _ftape):
    """``jacobi_1d`` with the compiler's tape names as the user's."""
    _ipos = _fpos.copy()
    _iv2 = _fpos.copy()
    n = _fpos.shape[0]
    for t in range(_ftape):
        for i in range(1, n - 1):
            _iv2[i] = _iv1 * (_ipos[i - 1] + _ipos[i] + _ipos[i + 1])
        for i in range(1, n - 1):
            _ipos[i] = _iv1 * (_iv2[i - 1] + _iv2[i] + _iv2[i + 1])
    return np.sum(_ipos * _ipos)


def gauss_seidel_1d(u0, c, nt):
    """In place in one array: each trip reads what the trip before wrote."""
    u = u0.copy()
    for t in range(nt):
        for i in range(1, u.shape[0] - 1):
            u[i] = c * (u[i - 1] + u[i] + u[i + 1])
    return np.sum(u * u)


def test_the_sweeps_read_their_tape_counting_up_end_to_end():
    r = np.random.default_rng(6)
    u0 = r.standard_normal(9)
    g = coarsen.differentiate(jacobi_1d, wrt=(0, 1))
    got = g.value_and_grad(u0, 0.3, 4)
    assert g.source.count("reading the tape from _fpos up") == 2, g.source
    other = coarsen.differentiate(jacobi_1d_named_like_the_compiler, wrt=(0, 1)).value_and_grad(u0, 0.3, 4)
    assert got[0] == other[0]
    np.testing.assert_allclose(got[1][0], other[1][0], rtol=1e-14, atol=0)
    assert got[1][1] == pytest.approx(other[1][1], rel=1e-14)
    check_against_oracle(jacobi_1d, (u0, 0.3, 4), wrt=(0, 1))


def test_an_in_place_sweep_that_reads_its_own_writes_keeps_its_order_end_to_end():
    r = np.random.default_rng(7)
    u0 = r.standard_normal(9)
    g = coarsen.differentiate(gauss_seidel_1d, wrt=(0, 1))
    g(u0, 0.3, 4)
    assert "reading the tape from _fpos up" not in g.source and "0, -1):" in g.source
    check_against_oracle(gauss_seidel_1d, (u0, 0.3, 4), wrt=(0, 1))


def tri_counter_by_two(mu, L, x, start):
    """The counter raised by 2 per trip; and a second counter, raised by 1 in the loop after, whose
    reverse loop keeps its order (the counter's update is not the first statement there)."""
    n, d = x.shape
    q = np.zeros(d)
    s = 0.0
    for i in range(n):
        for j in range(d):
            q[j] = mu[j] * x[i, j]
        idx = start
        for j in range(d):
            for c in range(j + 1, d):
                q[c] += L[idx] * (x[i, j] - mu[j])
                idx += 2
        k = 0
        for j in range(d):
            s += q[j] * q[j] * L[k]
            k += 1
    return s


@pytest.mark.parametrize("negative", [False, True], ids=["from_0", "negative_indices"])
def test_counters_raised_by_two_and_by_one_end_to_end(negative):
    r = np.random.default_rng(8)
    d = 4
    mu, L, x = r.standard_normal(d), r.standard_normal(d * (d - 1)), r.standard_normal((3, d))
    start = -L.shape[0] if negative else 0
    g = coarsen.differentiate(tri_counter_by_two, wrt=(0, 1))
    got = g.value_and_grad(mu, L, x, start)
    assert "idx = idx - 2 * max(" in g.source, g.source
    check_against_oracle(tri_counter_by_two, (mu, L, x, start), wrt=(0, 1))
    if negative:
        ref = g.value_and_grad(mu, L, x, 0)
        assert got[0] == pytest.approx(ref[0], rel=1e-14)
        for a, b in zip(got[1], ref[1]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
