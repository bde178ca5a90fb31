"""coarsen.ad.reverse.rematerialize: each precondition pinned (issue 48's mutation run).

Each program is a hand-written function in the generated code's shape: ``G`` allocated empty, a
writer nest storing ``G[r, k] = v`` and a reader nest (or one fused nest).  A refused program is
one the rewrite would get wrong (other numbers, or a name read before it is bound): the pass
must leave it alone, and the function computes what it did.  An accepted one is one a broken
guard would refuse: the element is recomputed, with the same bits."""
import textwrap

import gast
import numpy as np
import pytest

from coarsen.ad.reverse.rematerialize import rematerialize
from tests.helpers_passes import rewrite

RANKS = {"G": 2, "B0": 2, "res": 2, "y": 1, "v": 1, "y2": 1}
FLOATS = {"h", "a", "b", "d", "z"}
MADE = {"G", "res"}


def _rewrite(src, made=MADE, ranks=RANKS):
    return rewrite(textwrap.dedent(src), lambda body, m: rematerialize(body, m, ranks, FLOATS)[0], made)


def _args(n=4, m=3, seed=7):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, m)), r.standard_normal(m), r.standard_normal(n), n, m, 0.25


def _same_bits(before, after, n=4, m=3):
    """The same result, each function called on its own copy of the arguments."""
    want, got = before(*_args(n, m)), after(*_args(n, m))
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (n, m)


#: the writer's outer loop, its inner loop, the reader: edited per case below
BASE = """
def g(B0, y, v, n, m, a):
    G = np.empty((n, m))
    res = np.zeros((n, m))
    for r in range(n):
        h = v[r] + a
        for k in range(m):
            G[r, k] = h * y[k]
    for e in range(n):
        for f in range(m):
            G[e, f] -= B0[e, f]
            res[e, f] = G[e, f] + a
    return res
"""


def _edit(*pairs, src=BASE):
    for old, new in pairs:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src


READER = """    for e in range(n):
        for f in range(m):
            G[e, f] -= B0[e, f]
            res[e, f] = G[e, f] + a
"""

# ---------------------------------------------------------------- rewritten


ACCEPTED = {
    # a negation in the element's value (the writer's store of ``-h * y[k]``)
    "negated": _edit(("G[r, k] = h * y[k]", "G[r, k] = -(h * y[k])")),
    # a pure builtin between writer and reader and in the reader: no write behind its back
    "pure calls": _edit(("    for e in range(n):", "    b = abs(a) + max(a, 0.5)\n    for e in range(n):"),
                        ("res[e, f] = G[e, f] + a", "res[e, f] = min(G[e, f], b)")),
    # a branch in the reader's block that does not read G: the block still holds every mention
    "branch beside": _edit(("            res[e, f] = G[e, f] + a\n",
                            "            res[e, f] = G[e, f] + a\n            if a > 0.0:\n"
                            "                res[e, f] += 1.0\n")),
    # the reader only reads G, inside a third loop: each trip reads the element it reads
    "read in three loops": _edit((READER, """    for e in range(n):
        for t in range(3):
            for f in range(m):
                res[e, f] += G[e, f] * t
""")),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted(name):
    before, after, text = _rewrite(ACCEPTED[name])
    assert "_rm1 = " in text and "G" not in text.replace("G[r, k]", ""), text
    for n, m in ((4, 3), (1, 2), (0, 2)):
        _same_bits(before, after, n, m)


def test_the_allocation_comment_goes_to_the_first_row_array_or_with_the_allocation():
    """A comment on ``G``'s allocation moves to the row values' array (one row value here);
    with no row value (the element reads ``v[r]`` itself) the allocation and its comment go."""
    for src, rows in ((BASE, True), (_edit(("G[r, k] = h * y[k]", "G[r, k] = v[r] * y[k]")), False)):
        fn = gast.parse(textwrap.dedent(src)).body[0]
        fn.body[0].coarsen_comment = "the adjoint of W"
        out, new = rematerialize(fn.body, MADE, RANKS, FLOATS)
        assert new == ({"_row1", "_rm1"} if rows else {"_rm1"})
        commented = [st for st in out if getattr(st, "coarsen_comment", None)]
        if rows:
            assert commented == [out[0]] and out[0].targets[0].id == "_row1"
            assert out[0].coarsen_comment == "the adjoint of W"
        else:
            assert not commented and not any(_mentions_g(st) for st in out)


def _mentions_g(node):
    return any(isinstance(n, gast.Name) and n.id == "G" for n in gast.walk(node))


# ---------------------------------------------------------------- left alone

FUSED = """
def g(B0, y, v, n, m, a):
    G = np.empty((n, m))
    res = np.zeros((n, m))
    for e in range(n):
        for f in range(m):
            FIRST
            G[e, f] = v[e] * y[f] + a
            res[e, f] = G[e, f] * B0[e, f]
    return res
"""

REFUSED = {
    # the fused nest's first mention reads the element (dead): not written before it is read
    "fused, read first": FUSED.replace("FIRST", "d = G[e, f]"),
    # ... adds into it before the assignment overwrites it
    "fused, added into first": FUSED.replace("FIRST", "G[e, f] += a"),
    # ... stores it in a tuple assignment: not the ``G[e, f] = value`` the local replaces
    "fused, tuple store first": FUSED.replace("FIRST", "G[e, f], d = a, 1.0"),
    # the reader reads a fixed column besides its own element
    "a fixed column read": _edit(("res[e, f] = G[e, f] + a", "res[e, f] = G[e, f] + G[e, 0]")),
    # the reader's test reads the element
    "read in a test": _edit(("            res[e, f] = G[e, f] + a\n",
                             "            if G[e, f] > 0.0:\n                res[e, f] = a\n")),
    # the reader's column index changes within the block: the second read is another element
    "column index moved": _edit(("            res[e, f] = G[e, f] + a\n",
                                 "            f = m - 1 - f\n            res[e, f] += G[e, f]\n")),
    # the temporary ``d`` reads ``z``, assigned after it: the previous trip's value
    "temporary reads a later one": _edit(("    for r in range(n):", "    z = 0.5\n    for r in range(n):"),
                                         ("            G[r, k] = h * y[k]",
                                          "            d = z * h\n            z = y[k] + a\n"
                                          "            G[r, k] = d")),
    # the row value changes after the store, within the row: no one value per row
    "row value moves in the row": _edit(("            G[r, k] = h * y[k]",
                                         "            G[r, k] = h * y[k]\n            h = h + y[k]")),
    # the writer's inner range reads G itself
    "inner range reads G": _edit(("for k in range(m):", "for k in range(G.shape[1]):")),
    # ... its outer range (the rewrite removed G's allocation under it: NameError)
    "outer range reads G": _edit(("for r in range(n):", "for r in range(G.shape[0]):")),
    # the writer's row index moves within the row: the row value saved belongs to another row
    "row index moves in the row": _edit(("            G[r, k] = h * y[k]",
                                         "            G[r, k] = h * y[k]\n            r = (r + 1) % n")),
    # an alias of ``y`` is stored into between the writer and the reader
    "store into an alias": _edit(("    res = np.zeros((n, m))", "    res = np.zeros((n, m))\n    y2 = y"),
                                 ("    for e in range(n):", "    y2[0] = 5.0\n    for e in range(n):")),
    # ``y`` subtracted from between the writer and the reader (an augmented store)
    "y subtracted from": _edit(("    for e in range(n):", "    y[0] -= a\n    for e in range(n):")),
    # a 3-D ``G``: ``G[e, f]`` is a row of two, no scalar
    "three axes": _edit(("np.empty((n, m))", "np.empty((n, m, 2))"),
                        ("res[e, f] = G[e, f] + a", "res[e, f] = G[e, f][0] - G[e, f][1]")),
    # zeros, not empty, and the writer skips the last row: the reader reads its zeros
    "zeros, a row unwritten": _edit(("G = np.empty((n, m))", "G = np.zeros((n, m))"),
                                    ("for r in range(n):", "for r in range(n - 1):")),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    src = REFUSED[name]
    ranks = dict(RANKS, G=3) if name == "three axes" else RANKS
    before, after, text = _rewrite(src, ranks=ranks)
    assert "_rm" not in text and "_row" not in text, text
    for n, m in ((4, 3), (3, 1)):
        _same_bits(before, after, n, m)


def test_an_array_the_compiler_did_not_make_is_left_alone():
    _, _, text = _rewrite(BASE, made=MADE - {"G"})
    assert "_rm" not in text, text


def test_at_most_max_rows_row_values():
    """Two row values are saved (``MAX_ROWS``); a third and the array stays."""
    two = _edit(("            G[r, k] = h * y[k]", "            G[r, k] = h * y[k] + b"),
                ("        h = v[r] + a", "        h = v[r] + a\n        b = h * h"))
    three = _edit(("            G[r, k] = h * y[k]", "            G[r, k] = (h * y[k] + b) * d"),
                  ("        h = v[r] + a", "        h = v[r] + a\n        b = h * h\n        d = b - a"))
    before, after, text = _rewrite(two)
    assert "_row2[r] = " in text and "_row3" not in text, text
    _same_bits(before, after)
    _, _, text = _rewrite(three)
    assert "_row" not in text, text


# ---------------------------------------------------------------- the diagonal


DIAGONAL = """
def g(B0, y, v, n, m, a):
    G = np.empty((n, n))
    res = np.zeros((n, m))
    for r in range(n):
        for k in range(n):
            G[r, k] = v[r] * y[k]
    for ee in range(n):
        for t in range(m):
            G[ee, ee] += a
            res[ee, t] = G[ee, ee]
    return res
"""


def _deinterned(fn):
    """``fn`` with every name's text a string of its own (as the compiler's f-strings are)."""
    for n in gast.walk(fn):
        if isinstance(n, gast.Name):
            n.id = "".join(list(n.id))
    return fn


@pytest.mark.parametrize("deintern", [False, True], ids=["parsed", "made names"])
def test_the_diagonal_read_is_left_alone(deintern):
    """``G[ee, ee]`` is added into once per trip of ``t``: a local recomputed per trip would
    lose the earlier additions.  Names compare by their text, not by identity."""
    fn = gast.parse(textwrap.dedent(DIAGONAL)).body[0]
    if deintern:
        fn = _deinterned(fn)
    before = gast.dump(fn)
    out, new = rematerialize(fn.body, MADE, RANKS, FLOATS)
    assert not new and [gast.dump(s) for s in out] == [gast.dump(s) for s in fn.body]
    assert gast.dump(fn) == before
    before_fn, after_fn, _ = _rewrite(DIAGONAL)
    _same_bits(before_fn, after_fn, 3, 4)


# ---------------------------------------------------------------- the expansion's depth


def _chain(use):
    """The element through a chain of 16 copies ``c16 = c15 ... c1 = y[k]``, used as ``use``."""
    copies = ["c1 = y[k]"] + [f"c{k} = c{k - 1}" for k in range(2, 17)]
    body = "".join(f"            {c}\n" for c in copies)
    return _edit(("            G[r, k] = h * y[k]", body + f"            G[r, k] = {use}"))


@pytest.mark.parametrize("use", ["-c16", "c16 * h", "h * c16", "c16"])
def test_the_expansion_stops_at_depth_16(use):
    """Every operation and copy is a level: the element sits at depth 17 under an operation
    (refused), at 16 as the stored value itself (rewritten)."""
    before, after, text = _rewrite(_chain(use))
    assert ("_rm1" in text) is (use == "c16"), text
    _same_bits(before, after)
