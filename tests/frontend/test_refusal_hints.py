"""Refusals of natural code name what to write instead (a user probe found these refused with
no hint, a generic one, or, for a 0-d module-level array, at the first call under the name
'<module-level array>' with no location)."""
import math

import numpy as np
import pytest

import coarsen

Z0 = np.array(3.0)
PAIR = (0.5, 1.5)
C128 = np.array([1.0 + 2.0j])


def zero_d(a):
    return a * Z0


def complex_array(a):
    return np.sum(a * C128)


def clip_keywords(a):
    # NumPy 2's min=/max= spelling of the bounds (a_min=/a_max= are NumPy's parameters: those
    # are bound like any argument, tests/frontend/test_call_signatures.py)
    return np.sum(np.clip(a, min=0.5, max=2.0))


def hypot3(x, y, z):
    return math.hypot(x, y, z)


def float_inf(x):
    return min(x, float('inf'))


def module_tuple(x):
    return x * PAIR


def none_default(x, y=None):
    if y is None:
        return x
    return x * y


def tuple_index(B):
    idx = (1, 0)
    return B[idx]


def read_global(x):
    global Z0
    return x


@pytest.mark.parametrize("fn,problem,hint", [
    (zero_d, "module-level array 'Z0' is 0-d", r"Z0 = float\(...\)"),
    (complex_array, "'C128' has dtype complex128", "float64, float32"),
    (clip_keywords, "np.clip's argument 'min' is not supported", r"np.clip\(a, lo, hi\)"),
    (hypot3, "hypot takes 2 argument", r"math.hypot\(math.hypot\(x, y\), z\)"),
    (float_inf, "strings are not supported", "math.inf"),
    (module_tuple, "'PAIR' refers to something", "make it a NumPy array"),
    (none_default, "comparisons are supported", "instead of None"),
    (tuple_index, "tuples are supported only", r"B\[1, -1\]"),
    (read_global, "global declarations", "remove the `global` statement"),
])
def test_refusals_say_what_to_write_instead(fn, problem, hint):
    with pytest.raises(coarsen.CoarsenError, match=problem) as err:
        coarsen.differentiate(fn)
    e = err.value
    assert e.filename == __file__ and e.lineno is not None and e.col_offset is not None
    assert e.hint is not None
    import re
    assert re.search(hint, e.hint), e.hint
