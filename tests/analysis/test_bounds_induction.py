"""Index checks of induction variables (``coarsen.analysis.bounds``): an int the loop's body
assigns once, ``idx += c`` on every trip, indexing an array in that loop (ADBench's packed
triangle) is checked once before the loop over its whole run, first to last index; the
check raises where a plain run would raise (an ``IndexError`` naming the line), and gives the
same gradients where it would not: increasing and decreasing, negative indices wrapping, the
access before or after the increment, zero trips; an increment under an ``if`` keeps its
check inline, where the branch decides whether the access is reached."""
import inspect
import re

import numpy as np
import pytest

import coarsen


def packed(x, L, d):
    s = 0.0
    idx = 0
    for j in range(d):
        for m in range(j + 1, d):
            s += L[idx] * x[j] * x[m]
            idx += 1
    return s


def after_increment(x, L, n):
    s = 0.0
    idx = 3
    for m in range(n):
        idx += 2
        s += L[idx - 1] * x[m]
    return s


def backwards(x, L, n):
    s = 0.0
    idx = -1
    for m in range(n):
        s += L[idx] * x[m] * x[m]
        idx -= 1
    return s


def conditional(x, L, n):
    s = 0.0
    idx = 0
    for m in range(n):
        if x[m] > 0.0:
            idx += 1
        s += L[idx] * x[m]
    return s


def _line(fn, snippet):
    lines, first = inspect.getsourcelines(fn)
    k = next(k for k, line in enumerate(lines) if snippet in line)
    return f"test_bounds_induction.py:{first + k}"


def _check(fn, args_ok, args_bad, snippet, target="python"):
    g = coarsen.differentiate(fn, wrt=("x", "L"), target=target)
    ref = coarsen.differentiate(fn, wrt=("x", "L"), target="python", boundscheck=False)
    for a, b in zip(g(*args_ok), ref(*args_ok)):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    for bad in args_bad:
        with pytest.raises(IndexError) as info:
            fn(*bad)                  # a plain run raises too
        with pytest.raises(IndexError) as info:
            g(*bad)
        assert _line(fn, snippet) in str(info.value), str(info.value)
    return g


def _innermost_has_no_check(src, var):
    fwd = src[:src.index("# reverse sweep")]
    loop = re.search(rf"\n( +)for {var} in range\(.*\n", fwd)
    indent = len(loop.group(1))
    body = []
    for line in fwd[loop.end():].splitlines():
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "raise IndexError" not in "\n".join(body)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_packed_triangle(target):
    d = 5
    x = np.linspace(0.5, 1.5, d)
    L = np.linspace(-1.0, 1.0, d * (d - 1) // 2)
    g = _check(packed, (x, L, d), [(x, L[:-1], d), (x, L[:0], d)], "s += L[idx]", target)
    assert _innermost_has_no_check(g.source, "m")
    # no trip reads L: no check fires
    np.testing.assert_allclose(g(x, L[:0], 1)[1], np.zeros(0))


def test_after_the_increment_and_backwards_with_negative_indices():
    x = np.array([0.5, -1.0, 2.0])
    L = np.linspace(0.1, 0.9, 9)
    g = _check(after_increment, (x, L, 3), [(x, L[:8], 3)], "s += L[idx - 1]")
    assert _innermost_has_no_check(g.source, "m")
    # L[-1], L[-2], L[-3]: in range exactly while n <= len(L)
    g = _check(backwards, (x, L[:3], 3), [(x, L[:2], 3)], "s += L[idx]")
    assert _innermost_has_no_check(g.source, "m")


def test_an_increment_under_an_if_keeps_the_check_inline():
    x = np.array([0.5, -1.0, -2.0])
    L = np.array([1.0, 2.0])
    # idx reaches 1 only: in range, though n = 3 trips
    g = _check(conditional, (x, L, 3), [(np.array([0.5, 1.0, 2.0]), L, 3)], "s += L[idx]")
    assert not _innermost_has_no_check(g.source, "m")
