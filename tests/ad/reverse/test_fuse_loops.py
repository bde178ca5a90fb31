"""coarsen.ad.reverse.fuse_loops: adjacent loops over the same trips become one loop."""
import ast
import textwrap

import numpy as np
import pytest

import coarsen
from coarsen.ad.reverse.fuse_loops import fuse_loops
from tests.helpers_passes import rewrite
from tests.oracle import check_against_oracle


def _rewrite(src, made=frozenset()):
    """The function in ``src`` before and after the pass, compiled; and the new source."""
    return rewrite(src, fuse_loops, made, {"_same_len": _same_len})


def _loops(text):
    return text.count("for ")


# gemver's shape: a matrix written row by row, then read in the same order by a product's
# nest, a length computed between them (moved up), an accumulator per row (its own loop's)
MATVEC = """
def f(A, u, v, y):
    n = A.shape[0]
    m = A.shape[1]
    B = np.empty((n, m))
    for i in range(n):
        ui = u[i]
        for j in range(m):
            B[i, j] = A[i, j] + ui * v[j]
    p = B.shape[0]
    q = B.shape[1]
    k = _same_len(p, y.shape[0])
    s = np.zeros((q,))
    t = 0.0
    for r in range(k):
        yr = y[r]
        for c in range(q):
            s[c] += B[r, c] * yr
            t += B[r, c]
    return B, s, t, r, c
"""


def _same_len(a, b):
    if a != b:
        raise ValueError("lengths differ")
    return a


def test_matching_nests_become_one_with_the_same_bits():
    before, after, text = _rewrite(MATVEC)
    assert _loops(text) == 2, text                   # one nest of two loops
    assert text.index("q = B.shape[1]") < text.index("for i in range(n)"), text
    rng = np.random.default_rng(1)
    for n, m in ((4, 5), (1, 3), (3, 1), (0, 2), (2, 0)):
        A = rng.standard_normal((n, m)) * 1e3
        u, v, y = rng.standard_normal(n), rng.standard_normal(m), rng.standard_normal(n)
        if n == 0 or m == 0:
            # the loop variables are read after the loops: unbound where a loop had no trips
            with pytest.raises(UnboundLocalError):
                before(A, u, v, y)
            with pytest.raises(UnboundLocalError):
                after(A, u, v, y)
            continue
        got, want = after(A, u, v, y), before(A, u, v, y)
        for a, b in zip(got, want):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), (n, m)
    # r and c are read after the loops: kept, assigned from the fused loops' variables
    assert "r = i" in text and "c = j" in text, text


def test_a_length_check_between_the_loops_still_raises():
    before, after, _ = _rewrite(MATVEC)
    for f in (before, after):
        with pytest.raises(ValueError, match="lengths differ"):
            f(np.ones((3, 2)), np.ones(3), np.ones(2), np.ones(4))


LEFT_ALONE = {
    # the second loop reads the next element, which the first writes a trip later
    "neighbour": """
def f(n):
    B = np.zeros((n + 1,))
    s = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.5
    for j in range(n):
        s[j] = B[j + 1] * 2.0
    return s
""",
    # the second loop reads a sum the first is still adding to
    "scalar": """
def f(n):
    B = np.zeros((n,))
    t = 0.0
    for i in range(n):
        t += i * 0.5
    for j in range(n):
        B[j] = t * j
    return B
""",
    # other trips: no proof the lengths are equal
    "lengths": """
def f(n, m):
    B = np.zeros((n,))
    C = np.zeros((m,))
    for i in range(n):
        B[i] = i
    for j in range(m):
        C[j] = j * 2.0
    return B, C
""",
    # the arrays are the caller's: one may be a view of the other
    "parameters": """
def f(B, C):
    n = B.shape[0]
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = B[j] + 1.0
    return C
""",
    # a view of the written array exists while the loops run
    "view": """
def f(n):
    B = np.zeros((n + 1,))
    V = B[1:]
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    for j in range(n):
        C[j] = V[j]
    return C
""",
    # a statement between them needs the first loop and is needed by the second
    "between": """
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    for i in range(n):
        B[i] = i * 1.0
    w = B[n - 1] if n > 0 else 0.0
    for j in range(n):
        C[j] = B[j] + w
    return C
""",
    # the element the second loop reads is another trip's: same index name, other axis
    "transposed": """
def f(n):
    B = np.zeros((n, n))
    C = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            B[i, k] = i * 10.0 + k
    for j in range(n):
        for k2 in range(n):
            C[j, k2] = B[k2, j]
    return C
""",
}


@pytest.mark.parametrize("case", sorted(LEFT_ALONE))
def test_left_alone(case):
    src = LEFT_ALONE[case]
    before, after, text = _rewrite(src)
    assert _loops(text) == _loops(ast.unparse(ast.parse(textwrap.dedent(src)))), text


def test_left_alone_cases_would_change_if_fused():
    # the refusals matter: fused by hand, the neighbour and transposed cases give other numbers
    for case in ("neighbour", "transposed"):
        src = textwrap.dedent(LEFT_ALONE[case])
        tree = ast.parse(src)
        body = tree.body[0].body
        loops = [k for k, st in enumerate(body) if isinstance(st, ast.For)]
        a, b = loops[:2]
        l1, l2 = body[a], body[b]
        l2_body = ast.parse(ast.unparse(l2).replace(l2.target.id, l1.target.id)).body[0].body
        l1.body = l1.body + l2_body
        del body[b]
        scope = {"np": np}
        exec(compile(ast.fix_missing_locations(tree), "<fused>", "exec"), scope)
        scope0 = {"np": np}
        exec(src, scope0)
        assert not np.array_equal(scope["f"](4), scope0["f"](4)), case


def gemver_like(A, u1, v1, y, x, alpha, beta):
    A = A + np.outer(u1, v1)
    x = x + beta * A.T @ y
    w = alpha * A @ x
    return 0.5 * np.sum(w * w)


def _gemver_args(n=5, seed=3):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, n)), r.standard_normal(n), r.standard_normal(n),
            r.standard_normal(n), r.standard_normal(n), 0.7, -1.3)


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
def test_gemver_nests_fused_and_right(coarse):
    wrt = ("A", "u1", "v1", "y", "alpha", "beta")
    args = _gemver_args()
    g = coarsen.differentiate(gemver_like, wrt, coarsen=coarse, target="cpu")
    src = g.source_for(*args)
    # the reverse of A.T @ y and of the outer product: one nest that updates the matrix
    # adjoint's element and reads it back in the same trip (the element is the local _rm1:
    # coarsen.ad.reverse.rematerialize computes it there instead of storing the matrix)
    lines = src.splitlines()
    assert "A_2_bar" not in src, src
    upd = next(k for k, ln in enumerate(lines) if "_rm1 +=" in ln)
    read = next(k for k, ln in enumerate(lines) if "= _rm1" in ln and k > upd)
    assert not any(ln.lstrip().startswith("for ") for ln in lines[upd:read]), src
    # (the python target runs NumPy's own products, so its bits differ: compare with the oracle)
    for n in (5, 2, 1):
        check_against_oracle(gemver_like, _gemver_args(n, seed=n), target="cpu", wrt=wrt,
                             coarse=coarse)


def test_a_variable_read_after_the_loop_inside_an_outer_loop_that_binds_it_is_kept():
    # the outer loop binds j too, but reads j after the inner loops: the value they left
    src = """
def f(n):
    B = np.zeros((n,))
    C = np.zeros((n,))
    out = np.zeros((n,))
    for j in range(n):
        for i in range(n):
            B[i] = i * 1.0
        for j in range(n):
            C[j] = B[j] * 2.0
        out[0] += j
    return out, C
"""
    before, after, text = _rewrite(src)
    assert "j = i" in text, text
    for n in (3, 1, 0):
        for a, b in zip(before(n), after(n)):
            assert a.tobytes() == b.tobytes(), n
