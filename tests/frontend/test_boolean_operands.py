"""``and``/``or``: truth tests in branch and loop tests, refused as values.

Python's ``a or b`` is one of its operands; the IR's connectives compute truth values, so
``(s or 1.0) * a`` was differentiated as ``bool(s) * a`` (value 2.0 for 0.5, found by a probe
of user-style programs).  Now a non-boolean operand of a connective used as a value is refused
(``tests/zoo/unsupported.py``: ``or_as_value``, ``and_as_value``), and in the test of an
``if``, ``while`` or conditional expression (through ``not`` and nested connectives) it is a
truth test, as in Python.  Checked against the program's own values and hand derivatives, on
both targets.
"""
import pytest

import coarsen


def int_and(a, n):
    if n and a > 0:
        return a * a
    return a


def while_int(a, n):
    s = a
    while n and s < 100.0:
        s = s * a + 1.0
        n -= 1
    return s


def ifexp_and(a, b):
    return a * b if a and b > 0.0 else a - b


def not_or(a, b):
    if not (a or b):
        return a + b
    return a * b


def bool_value(a, b):
    t = a > 0.0 and (b > 0.0 or not a < 1.0)
    return a * b if t else a


CASES = [
    (int_and, (0.5, 3), (1.0,)),
    (int_and, (0.5, 0), (1.0,)),
    (while_int, (1.5, 3), (17.5,)),
    (ifexp_and, (1.5, 3.0), (3.0, 1.5)),
    (ifexp_and, (0.0, 3.0), (1.0, -1.0)),
    (not_or, (1.5, 3.0), (3.0, 1.5)),
    (not_or, (0.0, 0.0), (1.0, 1.0)),
    (bool_value, (1.5, -3.0), (-3.0, 1.5)),
    (bool_value, (0.5, -3.0), (1.0, 0.0)),
]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_connectives_in_tests_are_truth_tests(target):
    for fn, args, want in CASES:
        g = coarsen.differentiate(fn, target=target)
        value, grad = g.value_and_grad(*args)
        assert value == fn(*args), fn.__name__
        assert tuple(grad) == want, (fn.__name__, args, grad)
