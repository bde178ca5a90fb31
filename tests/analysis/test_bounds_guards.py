"""``coarsen.analysis.bounds``: the preconditions the mutation run
(``python -m tests.mutation coarsen/analysis/bounds.py``) checks, pinned fast.

Each program (python target) is checked three ways: where its index checks are (``placed``:
for each checked access, the number of loops around its check in the forward sweep, so a
hoisted check sits outside the loop of its access and a proven access has none), the
gradient of in-range calls (that of ``boundscheck=False``), and the ``IndexError`` naming the
line for out-of-range calls.
"""
import math
import re

import numpy as np
import pytest

import coarsen


def placed(g, tests=False):
    """``{(what, line): [loop depth of each check]}`` of the forward sweep of ``g.source``;
    ``tests``: ``(depth, the check's test)`` instead of the depth."""
    src = g.source
    fwd = src[:src.index("# reverse sweep")]
    out, loops, last = {}, [], ""
    for line in fwd.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while loops and indent <= loops[-1]:
            loops.pop()
        if line.lstrip().startswith(("for ", "while ")):
            loops.append(indent)
        m = re.search(r"IndexError\('index out of range \((.*?)\) at [^:]+:\d+: (.*)'\)", line)
        if m:
            out.setdefault((m.group(1), m.group(2)), []).append((len(loops), last) if tests else len(loops))
        last = line.strip()
    return out


def check(fn, wrt, ok, bad, where, tests=False):
    """The gradient of ``fn`` (checks placed as ``where`` says), right on each of ``ok``,
    an IndexError naming the line on each of ``bad``."""
    g = coarsen.differentiate(fn, wrt=wrt, target="python")
    ref = coarsen.differentiate(fn, wrt=wrt, target="python", boundscheck=False)
    for args in ok:
        got, want = g(*args), ref(*args)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_array_equal(a, b)
    assert placed(g, tests) == where, placed(g, tests)
    for args in bad:
        with pytest.raises(IndexError, match="index out of range"):
            g(*args)
    return g


W = np.linspace(0.5, 1.5, 5)


def by_length(w):
    n = len(w)
    s = 0.0
    for i in range(n):
        s += w[i] * w[n - 1 - i]
    for i in range(1, w.shape[0] - 1):
        s += w[i - 1] * w[i + 1]
    for i in range(n - 1, -1, -1):
        s += w[i] * 0.5
    return s


def test_proven_by_the_loops_bounds():
    check(by_length, "w", [(W,)], [], {("axis 0 of w", "s += w[i] * w[n - 1 - i]"): [1]})


def like_shapes(w, k):
    v = w * 2.0
    z = np.zeros(w.shape[0])
    u = np.sin(w) + 1.0
    s = 0.0
    for i in range(w.shape[0]):
        z[i] = v[i] * u[i]
        s += z[i] * w[k]
    return s


def test_new_arrays_shaped_like_the_old():
    check(like_shapes, "w", [(W, 4), (W, -5)], [(W, 5), (W, -6)],
          {("axis 0 of w", "s += z[i] * w[k]"): [0]})


def gram(A):
    G = np.einsum("ki,kj->ij", A, A)
    s = 0.0
    for i in range(A.shape[0]):
        s += G[i, 0] * A[i, 0]
    return s


def test_a_product_of_an_array_with_itself_is_not_shaped_like_it():
    """``G = A^T A`` of a (3, 2) ``A`` is (2, 2): a primitive of two operands gives a new array
    ``A``'s shape only when it broadcasts (element-wise), so ``G[i, 0]`` over ``A``'s rows is
    checked.  Unchecked, the cpu target read past ``G``'s rows instead of raising."""
    A = np.linspace(0.5, 1.5, 6).reshape(3, 2)
    line = "s += G[i, 0] * A[i, 0]"
    g = check(gram, "A", [(A[:2],)], [(A,)],
              {("axis 0 of G", line): [0], ("axis 1 of G", line): [0], ("axis 1 of A", line): [0]})
    cpu = coarsen.differentiate(gram, wrt="A", target="cpu")
    np.testing.assert_array_equal(cpu(A[:2]), g(A[:2]))
    with pytest.raises(IndexError, match="index out of range"):
        cpu(A)


def repeated(w, k, j):
    a = w[k] * w[k]
    b = w[j] + w[k]
    j = j + 1
    return a + b + w[j]


def test_an_index_checked_once():
    check(repeated, "w", [(W, 1, 2), (W, -5, 3)], [(W, 5, 0), (W, 0, 4), (W, 0, -6)],
          {("axis 0 of w", "a = w[k] * w[k]"): [0], ("axis 0 of w", "b = w[j] + w[k]"): [0],
           ("axis 0 of w", "return a + b + w[j]"): [0]})


def invariant(w, x, k, n):
    s = 0.0
    for i in range(n):
        s += w[k] * x[i] + w[3] * w[1] + w[-2]
    return s


def test_invariant_and_constant_indices_hoisted():
    check(invariant, ("w", "x"), [(W, W, 2, 5), (W, W, 0, 0)], [(W, W, 5, 5), (W, W, 0, 6), (W[:3], W, 0, 5)],
          {("axis 0 of w", "s += w[k] * x[i] + w[3] * w[1] + w[-2]"): [0, 0, 0],
           ("axis 0 of x", "s += w[k] * x[i] + w[3] * w[1] + w[-2]"): [0]})


def under_if(w, x, k, n):
    s = 0.0
    for i in range(n):
        if x[i] > 0.0:
            s += w[k]
    return s


def test_an_access_under_an_if_is_checked_inline():
    x = np.array([1.0, -1.0, 1.0, 1.0, 1.0])
    check(under_if, "w", [(W, x, 2, 5), (W, -np.abs(x), 9, 5)], [(W, x, 5, 5)],
          {("axis 0 of x", "if x[i] > 0.0:"): [0], ("axis 0 of w", "s += w[k]"): [1]})


def reassigned(w, k, n):
    a = w * 1.0
    s = 0.0
    for i in range(n):
        s += a[k]
        a = a[1:] * 1.5
    return s


def test_an_array_reassigned_in_the_loop_is_checked_inline():
    check(reassigned, "w", [(W, 0, 3)], [(W, 2, 4), (W, 5, 1)], {("axis 0 of a", "s += a[k]"): [1]})


def shifted(w, n):
    s = 0.0
    m = n - 1
    for i in range(m):
        s += w[i + 1] * w[i]
    j = 0
    while j < 2:
        s += w[j + 2]
        j += 1
    return s


def test_offsets_and_a_while_loop():
    check(shifted, "w", [(W, 5), (W, 0)], [(W, 6)],
          {("axis 0 of w", "s += w[i + 1] * w[i]"): [0], ("axis 0 of w", "s += w[j + 2]"): [1]})


def branches(w, c):
    if c > 0.0:
        k = 2
    else:
        k = -3
    j = 1 if c > 1.0 else 1
    return w[k] * w[j]


def test_what_both_branches_give():
    check(branches, "w", [(W, 1.0), (W, -1.0), (W[:3], 1.0)], [(W[:2], 1.0)],
          {("axis 0 of w", "return w[k] * w[j]"): [0, 0]})


# ---------------------------------------------------------------------------- facts killed, met


def shrinking(w, n):
    a = w * 1.0
    m = len(a)
    s = 0.0
    for t in range(n):
        a = a[1:] * 1.0
        for i in range(m - 1):
            s += a[i]
    return s


def merged(w, x, c):
    if c > 0.0:
        m = len(w)
        a = w * 1.0
    else:
        m = len(x)
        a = x * 1.0
    s = 0.0
    for i in range(m):
        s += w[i] * a[i]
    return s


def merged_in_loop(w, c):
    s = 0.0
    idx = 0
    for i in range(len(w) - 1):
        if c > 0.0:
            j = i
        else:
            j = i + 1
        s += w[j] + w[idx]
        idx += 1
    return s


def nested(w, m):
    s = 0.0
    for j in range(m):
        for k in range(j, m):
            s += w[k] * w[j]
        for k in range(j + 1):
            s += w[k]
    return s


def backward(w, m):
    s = 0.0
    for i in range(m - 1, 0, -1):
        s += w[i] * w[i - 1]
    for i in range(4, -1, -1):
        s += w[i]
    return s


def shapes_of(w, x, n):
    a = np.zeros(n)
    b = w + x
    c = 2.0 * w
    d = w * w
    e = np.sin(w)
    s = 0.0
    for i in range(n):
        s += a[i]
    for i in range(w.shape[0]):
        s += b[i] + c[i] + d[i] + e[i]
    return s


def offsets(w, k, n):
    s = 0.0
    for i in range(n):
        s += w[k + 1] * w[k - 2] * w[i + 2] * w[i - 1] + w[2] + w[-3] + w[1]
    for i in range(2, n):
        s += w[i - 2]
    for i in range(0, n):
        s += w[i + 1]
    return s


def starts_and_steps(w, k, st, n):
    s = 0.0
    for i in range(0, n, st):
        s += w[i]
    for i in range(k, len(w)):
        s += w[i]
    for i in range(len(w) - 2):
        s += w[1 + i] * w[i * 2]
    return s


def increments(L, x, n):
    s = 0.0
    a = 0
    b = 0
    c = 0
    for m in range(n):
        s += L[a] * x[m] + L[b] + L[c]
        a = 1 + a
        b += 1
        b += 1
        c = c * 1 + 1
    return s


def rebound_in_loop(w, idx, k):
    s = 0.0
    a = w * 1.0
    for i in range(len(w)):
        j = i
        s += w[j] + a[k]
        j = idx[i]
        a = w * 2.0
        s += w[j] + a[k]
        k = k + 1
        s += w[k]
    return s


def inner_rebound(w, idx):
    s = 0.0
    for i in range(len(w)):
        j = i
        for t in range(len(idx)):
            s += w[j]
            j = idx[t]
    return s


def shrinking_like(w, n):
    a = w * 1.0
    s = 0.0
    for t in range(n):
        for i in range(len(w)):
            s += a[i]
        a = a[1:] * 1.0
    return s


def checked_then_moved(w, k, n):
    s = 0.0
    for i in range(n):
        s += w[k]
        k = (k + 1) % 7
        s += w[k]
    return s


def merged_shapes(w, x, c, n):
    s = 0.0
    for t in range(n):
        if c > 0.0:
            a = w * 2.0
        else:
            a = x * 2.0
        for i in range(len(w)):
            s += a[i]
    return s


def nested_increments(L, x, n):
    s = 0.0
    b = 0
    for m in range(n):
        s += L[b] * x[m]
        b = b + 1
        for t in range(2):
            b = b + 1
    return s


def mixed_offsets(w):
    s = 0.0
    for i in range(len(w)):
        s += w[i + 1] * w[i - 2]
        s += w[i - 1] * w[i - 3]
    return s


def constant_range(w, k):
    s = 0.0
    for i in range(3):
        s += w[k] * w[i + 2]
    return s


def lifted_passengers(w, x, k, n):
    s = x
    for i in range(n):
        s = math.sin(s) * x + w[k] * s
        k = k + 1
        s = s * math.cos(x) + w[k]
    return s


def one_passenger(w, x, k, n):
    out = np.zeros(len(w))
    s = x
    for i in range(n):
        s = math.sin(s) * x + s * 0.5
        k = k + 1
        s = s * math.cos(x)
        out[k] = s
    return np.sum(out * w)


FACTS = [
    (shrinking, "w", [(W, 1), (W, 0)], [(W, 2)]),
    (merged, ("w", "x"), [(W, W, 1.0), (W, W[:3], 1.0), (W, W[:3], -1.0)], [(W[:3], W, -1.0)]),
    (merged_in_loop, "w", [(W, 1.0), (W, -1.0)], []),
    (nested, "w", [(W, 5), (W, 0)], [(W, 6)]),
    (backward, "w", [(W, 5), (W, 0)], [(W, 6), (W[:4], 1)]),
    (shapes_of, ("w", "x"), [(W, W, 3), (W, W, 0)], []),
    (starts_and_steps, "w", [(W, 2, 2, 5), (W, -5, 1, 0)], [(W, 0, 1, 6), (W, -6, 1, 0), (np.ones(6), 0, 1, 0)]),
    (increments, ("L", "x"), [(W, W[:3], 3)], [(W[:4], W, 3), (W, W, 5), (W[:2], W, 3)]),
    (rebound_in_loop, "w", [(W, np.arange(5), -5), (W, -np.arange(5), -4)],
     [(W, np.arange(5), -6), (W, np.arange(1, 6), -5), (W, np.arange(4), -5), (W, np.arange(5), 0)]),
    (inner_rebound, "w", [(W, np.arange(3)), (W, np.zeros(0, np.int64))], [(W, np.array([0, 5, 1]))]),
    (shrinking_like, "w", [(W, 1), (W, 0)], [(W, 2)]),
    (checked_then_moved, "w", [(np.ones(7), 0, 9)], [(W, 3, 2), (W, 0, 6)]),
    (merged_shapes, ("w", "x"), [(W, W[:3], 1.0, 2), (W[:3], W, -1.0, 2)], [(W, W[:3], -1.0, 1)]),
    (nested_increments, ("L", "x"), [(np.ones(7), W[:3], 3), (W, W, 0)], [(np.ones(6), W[:3], 3)]),
    (mixed_offsets, "w", [(np.zeros(0),)], [(W,)]),
    (constant_range, "w", [(W, 4), (W, -5)], [(W, 5), (W, -6), (W[:4], 0)]),
    (lifted_passengers, ("w", "x"), [(W, 0.3, 0, 4), (W, 0.3, -5, 5)], [(W, 0.3, 1, 4), (W, 0.3, -6, 2)]),
    (one_passenger, ("w", "x"), [(W, 0.3, -1, 5), (W, 0.3, -6, 2)], [(W, 0.3, 0, 5), (W, 0.3, -7, 1)]),
    (offsets, "w", [(W, 2, 3), (W, 2, 0), (W, -3, 3), (W, 1, 2)], [(W, 4, 3), (W, 2, 4), (W, -4, 2), (W[:2], 0, 1)]),
]


@pytest.mark.parametrize("case", FACTS, ids=[c[0].__name__ for c in FACTS])
def test_facts(case):
    fn, wrt, ok, bad = case
    check(fn, wrt, ok, bad, PLACED[fn.__name__], tests=True)


PLACED = {
    'shrinking': {
        ('axis 0 of a', 's += a[i]'):
            [(1, 'if _t3 > a.shape[0]:')],
    },
    'merged': {
        ('axis 0 of w', 's += w[i] * a[i]'):
            [(0, 'if m > w.shape[0]:')],
        ('axis 0 of a', 's += w[i] * a[i]'):
            [(0, 'if m > a.shape[0]:')],
    },
    'merged_in_loop': {
        ('axis 0 of w', 's += w[j] + w[idx]'):
            [(0, 'if 0 < _t2 and (idx + (_t2 - 0 - 1) >= w.shape[0] or idx < -w.shape[0]):'), (1, 'if j >= w.shape[0] or j < -w.shape[0]:')],
    },
    'nested': {
        ('axis 0 of w', 's += w[k] * w[j]'):
            [(1, 'if j < m and m > w.shape[0]:'), (1, 'if j < m and j >= w.shape[0]:')],
        ('axis 0 of w', 's += w[k]'):
            [(1, 'if _t7 > w.shape[0]:')],
    },
    'backward': {
        ('axis 0 of w', 's += w[i] * w[i - 1]'):
            [(0, 'if _t1 > 0 and _t1 >= w.shape[0]:')],
        ('axis 0 of w', 's += w[i]'):
            [(0, 'if w.shape[0] <= 4:')],
    },
    'shapes_of': {
        ('axis 0 of a', 's += a[i]'):
            [(0, 'if n > a.shape[0]:')],
        ('axis 0 of b', 's += b[i] + c[i] + d[i] + e[i]'):
            [(0, 'if _t3 > b.shape[0]:')],
    },
    'starts_and_steps': {
        ('axis 0 of w', 's += w[i]'):
            [(1, 'if i >= w.shape[0] or i < -w.shape[0]:'), (0, 'if k < _t4 and k < -w.shape[0]:')],
        ('axis 0 of w', 's += w[1 + i] * w[i * 2]'):
            [(1, 'if _t13 >= w.shape[0] or _t13 < -w.shape[0]:')],
    },
    'increments': {
        ('axis 0 of L', 's += L[a] * x[m] + L[b] + L[c]'):
            [(0, 'if 0 < n and (a + (n - 0 - 1) >= L.shape[0] or a < -L.shape[0]):'), (1, 'if b >= L.shape[0] or b < -L.shape[0]:'), (1, 'if c >= L.shape[0] or c < -L.shape[0]:')],
        ('axis 0 of x', 's += L[a] * x[m] + L[b] + L[c]'):
            [(0, 'if n > x.shape[0]:')],
    },
    'rebound_in_loop': {
        ('axis 0 of idx', 'j = idx[i]'):
            [(0, 'if _t1 > idx.shape[0]:')],
        ('axis 0 of w', 's += w[k]'):
            [(0, 'if 0 < _t1 and (k + 1 + (_t1 - 0 - 1) >= w.shape[0] or k + 1 < -w.shape[0]):')],
        ('axis 0 of a', 's += w[j] + a[k]'):
            [(1, 'if k >= a.shape[0] or k < -a.shape[0]:'), (1, 'if k >= a.shape[0] or k < -a.shape[0]:')],
        ('axis 0 of w', 's += w[j] + a[k]'):
            [(1, 'if j_2 >= w.shape[0] or j_2 < -w.shape[0]:')],
    },
    'inner_rebound': {
        ('axis 0 of w', 's += w[j]'):
            [(2, 'if j >= w.shape[0] or j < -w.shape[0]:')],
    },
    'shrinking_like': {
        ('axis 0 of a', 's += a[i]'):
            [(1, 'if _t2 > a.shape[0]:')],
    },
    'checked_then_moved': {
        ('axis 0 of w', 's += w[k]'):
            [(1, 'if k >= w.shape[0] or k < -w.shape[0]:'), (1, 'if k >= w.shape[0] or k < -w.shape[0]:')],
    },
    'merged_shapes': {
        ('axis 0 of a', 's += a[i]'):
            [(1, 'if _t3 > a.shape[0]:')],
    },
    'nested_increments': {
        ('axis 0 of x', 's += L[b] * x[m]'):
            [(0, 'if n > x.shape[0]:')],
        ('axis 0 of L', 's += L[b] * x[m]'):
            [(1, 'if b >= L.shape[0] or b < -L.shape[0]:')],
    },
    'mixed_offsets': {
        ('axis 0 of w', 's += w[i + 1] * w[i - 2]'):
            [(0, 'if 0 < _t1 and (_t1 >= w.shape[0] or w.shape[0] < 2):')],
        ('axis 0 of w', 's += w[i - 1] * w[i - 3]'):
            [(0, 'if 0 < _t1 and w.shape[0] < 3:')],
    },
    'constant_range': {
        ('axis 0 of w', 's += w[k] * w[i + 2]'):
            [(0, 'if k >= w.shape[0] or k < -w.shape[0]:'), (0, 'if 5 > w.shape[0]:')],
    },
    'lifted_passengers': {
        ('axis 0 of w', 's = math.sin(s) * x + w[k] * s'):
            [(0, 'if 0 < n and (k + (n - 0 - 1) >= w.shape[0] or k < -w.shape[0]):')],
        ('axis 0 of w', 's = s * math.cos(x) + w[k]'):
            [(0, 'if 0 < n and (k + 1 + (n - 0 - 1) >= w.shape[0] or k + 1 < -w.shape[0]):')],
    },
    'one_passenger': {
        ('axis 0 of out', 'out[k] = s'):
            [(0, 'if 0 < n and (k + 1 + (n - 0 - 1) >= out.shape[0] or k + 1 < -out.shape[0]):')],
    },
    'offsets': {
        ('axis 0 of w', 's += w[k + 1] * w[k - 2] * w[i + 2] * w[i - 1] + w[2] + w[-3] + w[1]'):
            [(0, 'if 0 < n and (k + 1 >= w.shape[0] or k + 1 < -w.shape[0]):'), (0, 'if 0 < n and (k - 2 >= w.shape[0] or k - 2 < -w.shape[0]):'), (0, 'if 0 < n and (n + 1 >= w.shape[0] or w.shape[0] < 1):'), (0, 'if 0 < n and w.shape[0] <= 2:'), (0, 'if 0 < n and w.shape[0] < 3:')],
        ('axis 0 of w', 's += w[i - 2]'):
            [(0, 'if n - 2 > w.shape[0]:')],
        ('axis 0 of w', 's += w[i + 1]'):
            [(0, 'if 0 < n and n + 1 > w.shape[0]:')],
    },
}


# ---------------------------------------------------------------------------- sampled mutants


def before_increment(L, x, n):
    s = 0.0
    idx = 0
    for m in range(n):
        j = idx - 1
        idx = idx + 1
        s += L[j] * x[m]
    return s


def test_a_copy_of_an_induction_variable_taken_before_its_increment():
    """``j = idx - 1`` is ``idx - 1`` only until ``idx = idx + 1``: the fact dies with the
    increment (kept, the hoisted check would run over ``idx``'s values after it, 0 .. n - 1,
    and refuse the in-range ``L[-1]`` .. ``L[n - 2]`` of a length n - 1)."""
    check(before_increment, ("L", "x"), [(W[:2], W[:3], 3), (W[:1], W[:3], 1)], [(W[:1], W[:3], 3)],
          {("axis 0 of x", "s += L[j] * x[m]"): [(0, "if n > x.shape[0]:")],
           ("axis 0 of L", "s += L[j] * x[m]"): [(1, "if j >= L.shape[0] or j < -L.shape[0]:")]},
          tests=True)


def one_past(w, k):
    a = w * 1.0
    m = len(a) + 1
    s = 0.0
    for i in range(m):
        if i < k:
            s += a[i]
    return s


def test_a_length_plus_one_through_a_shape_like_another():
    """``m = len(a) + 1`` with ``a`` shaped like ``w``: ``i`` runs to ``len(w)``, one past the
    end, so ``a[i]`` is checked (the ``+ 1`` survives the step from ``a``'s length to ``w``'s)."""
    check(one_past, "w", [(W, 5), (W, 0)], [(W, 6)],
          {("axis 0 of a", "s += a[i]"): [(1, "if i >= a.shape[0]:")]}, tests=True)


def counted(w, k, n):
    s = 0.0
    for i in range(len(w)):
        s += w[i] * w[k]
    s += w[k] + w[n] * w[n]
    return s


def test_the_plans_counts():
    """``BoundsPlan.counts``: ``w[i]`` and the second ``w[n]`` proven, the loop's ``w[k]``
    hoisted, the later ``w[k]`` and the first ``w[n]`` inline."""
    from coarsen.analysis.bounds import plan_bounds
    from coarsen.frontend.lower import lower
    from coarsen.ir.typeinfer import infer
    from coarsen.transforms.artifact import arg_type

    fn, _ = lower(counted)
    infer(fn, [arg_type("a", a)[0] for a in (W, 1, 2)])
    plan = plan_bounds(fn)
    assert plan.counts == {"proven": 2, "hoisted": 1, "inline": 2}, plan.counts
    assert sorted(len(c) for c in plan.inline.values()) == [1, 1] and \
        [len(c) for c in plan.hoisted.values()] == [1]


def ranged_or_not(w, c):
    s = 0.0
    for i in range(len(w)):
        if c > 0.0:
            j = i
        else:
            j = 0
        s += w[j]
    return s


def test_a_range_known_on_one_branch_only():
    """``j`` has ``i``'s range on one branch, none on the other (a constant): after the ``if``
    it has none, and ``w[j]`` is checked (it cannot fail: ``j = 0`` runs only where ``w`` has
    entries)."""
    check(ranged_or_not, "w", [(W, 1.0), (W, -1.0)], [],
          {("axis 0 of w", "s += w[j]"): [(1, "if j >= w.shape[0] or j < -w.shape[0]:")]}, tests=True)
