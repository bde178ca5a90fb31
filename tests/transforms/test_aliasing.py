"""Overlapping array arguments (issue 9, soundness).

The generated code copies the arrays a function writes at entry, so it cannot see one write
through another argument that shares memory, as the function itself would.  A call whose array
arguments overlap (``np.shares_memory``: the same array, or views such as ``a[1:]`` and
``a[:-1]``) is refused with a ``CoarsenError`` naming both parameters when the function writes
either of them (directly, through an inlined helper, or with ``+=``); overlapping arrays that
are only read are fine, and so are views that do not overlap.
"""
import numpy as np
import pytest

import coarsen

G = np.arange(1.0, 6.0)


def writes_second(a, b):
    b[0] = a[1] * 2.0
    return np.sum(a * b)


def reads_both(a, b):
    return np.sum(a * b) + a[0] * b[1]


def add_into(dst, src):
    dst[:] += src
    return 0.0


def via_helper(a, b):
    add_into(b, a)
    return np.sum(b * b) + np.sum(a)


def augmented(a, b):
    b += a
    return np.sum(b * b)


def local_writes(a, b):
    c = np.zeros(a.shape[0])
    c[0] = a[0] * b[0]
    return np.sum(c) + np.sum(a * b)


def writes_with_module_array(b):
    b[0] = G[1] * b[0]
    return np.sum(b * G)


def refuse(g, *args):
    with pytest.raises(coarsen.CoarsenError) as info:
        g(*args)
    return str(info.value)


@pytest.mark.parametrize("fn", [writes_second, via_helper, augmented], ids=lambda f: f.__name__)
def test_refused_when_written(fn):
    g = coarsen.differentiate(fn, target="python")
    a = np.arange(1.0, 6.0)
    # separate arrays work (and fill the fast call path) ...
    ref = g(a, a.copy() + 1.0)
    assert all(np.all(np.isfinite(r)) for r in ref)
    # ... the same array twice, and overlapping views, are refused on every path
    for args in [(a, a), (a[1:], a[:-1]), (a[:-1], a[1:]), (a[::2], a[:3])]:
        msg = refuse(g, *args)
        assert "'a'" in msg and "'b'" in msg and "overlap" in msg
        with pytest.raises(coarsen.CoarsenError, match="overlap"):
            g.value_and_grad(*args)
        with pytest.raises(coarsen.CoarsenError, match="overlap"):
            g(b=args[1], a=args[0])
    assert np.all(a == np.arange(1.0, 6.0))           # nothing ran into the caller's array


def test_refused_on_the_cpu_target_and_from_the_fast_path():
    g = coarsen.differentiate(writes_second, target="cpu")
    a = np.arange(1.0, 6.0)
    for _ in range(2):                                 # slow path, then the cached fast path
        g(a, a.copy())
        with pytest.raises(coarsen.CoarsenError, match="writes 'b'"):
            g(a[1:], a[:-1])


def test_views_that_do_not_overlap_are_fine():
    g = coarsen.differentiate(writes_second, target="python")
    a = np.arange(1.0, 7.0)
    got = g(a[:3], a[3:])                              # one buffer, disjoint halves
    want = g(a[:3].copy(), a[3:].copy())
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    got = g(a[::2], a[1::2])                           # interleaved: no element shared
    want = g(a[::2].copy(), a[1::2].copy())
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("fn", [reads_both, local_writes], ids=lambda f: f.__name__)
def test_overlapping_arrays_only_read_are_fine(fn):
    g = coarsen.differentiate(fn, target="python")
    a = np.arange(1.0, 6.0)
    for x, y in [(a, a), (a[1:], a[:-1])]:
        got = g.value_and_grad(x, y)
        want = g.value_and_grad(x.copy(), y.copy())
        assert got[0] == want[0]
        for p, q in zip(got[1], want[1]):
            np.testing.assert_array_equal(p, q)


def test_a_written_argument_overlapping_a_module_level_array_is_refused():
    g = coarsen.differentiate(writes_with_module_array, target="python")
    msg = refuse(g, G)
    assert "module-level array" in msg and "'b'" in msg
    refuse(g, G[::-1])
    (got,) = g(G.copy())                               # a copy is fine
    np.testing.assert_allclose(got, [G[1] * G[0]] + list(G[1:]))


def test_second_order_transforms_refuse_them_too():
    """The Hessian's gradient program copies what it writes, so its own positions were empty:
    hvp and hessian computed as if the arrays were separate, a Hessian of another function."""
    a = np.arange(1.0, 6.0)
    S = np.stack([a, a + 1.0])
    for make in (lambda: coarsen.hvp(writes_second, wrt="a", target="python")(a, a, np.ones(5)),
                 lambda: coarsen.hessian(writes_second, wrt="a", target="python")(a, a),
                 lambda: coarsen.hessian(writes_second, wrt="a", target="python").batch((0, 0))(
                     S, S)):
        with pytest.raises(coarsen.CoarsenError, match="overlap"):
            make()
    h = coarsen.hvp(writes_second, wrt="a", target="python")(a, a.copy(), np.ones(5))
    assert np.all(np.isfinite(h)) and np.all(a == np.arange(1.0, 6.0))
