"""lowering.shared_helpers: cpu-target modules import the helpers they carry in common.

Every module built for the cpu target with the same helper text gets the same compiled
helper (one Numba dispatcher per process); the text keeps its line numbers; helpers that
could mean something else in a module of their own (a module constant, another binding of
``np``, a nested scope, a cycle, other text under the same name) stay where they are.
"""
import numpy as np

from coarsen.lowering import build, module_path
from coarsen.lowering.shared_helpers import split

HELPERS = '''\
import math

import numba
import numpy as np


@numba.njit(cache=True, error_model='numpy')
def _twice(x):
    return 2.0 * x


@numba.njit(cache=True, error_model='numpy')
def _fill(out, v):
    for i in range(out.shape[0]):
        out[i] = _twice(v) + math.sqrt(abs(v))
    return out
'''

ENTRY_A = '''

@numba.njit(cache=True, error_model='numpy')
def entry_a(n, v):
    return _fill(np.empty(n), v).sum()
'''

ENTRY_B = '''

@numba.njit(cache=True, error_model='numpy')
def entry_b(n, v):
    return _fill(np.empty(n), v)[0] + _twice(1.0)
'''


def test_modules_share_one_compiled_helper(own_cache):
    a = build(HELPERS + ENTRY_A, name="shared_a", target="cpu")
    b = build(HELPERS + ENTRY_B, name="shared_b", target="cpu")
    assert a._fill is b._fill and a._twice is b._twice
    assert a._fill.__module__ != a.__name__          # defined in a module of its own
    assert a.entry_a(3, 4.0) == 3 * (8.0 + 2.0) and b.entry_b(2, 4.0) == 12.0
    assert a.__file__ == str(module_path(HELPERS + ENTRY_A, name="shared_a", target="cpu"))
    # the python target builds the text as given
    p = build(HELPERS + ENTRY_A, name="shared_a", target="python")
    assert p._fill is not a._fill and p.entry_a(3, 4.0) == a.entry_a(3, 4.0)


def test_the_text_keeps_its_line_numbers():
    source = HELPERS + ENTRY_A
    text, helpers = split(source)
    assert [h.function for h in helpers] == ["_twice", "_fill"]      # callees first
    old, new = source.splitlines(), text.splitlines()
    assert len(old) == len(new)
    changed = [k for k, (x, y) in enumerate(zip(old, new)) if x != y]
    assert all(new[k] == "" or new[k].startswith("from _coarsen_gen_rt_") for k in changed)
    assert new[-2:] == old[-2:] and "def entry_a(n, v):" in new
    assert split(text) == (text, ())                  # nothing left to share
    assert split(source) == (text, helpers)           # deterministic
    # a helper's module is named by its text and its callees' modules
    fill = helpers[1]
    assert f"from {helpers[0].module} import _twice" in fill.source


def _shared(source):
    return {h.function for h in split(source)[1]}


def test_helpers_that_could_mean_something_else_stay():
    const = HELPERS.replace("2.0 * x", "_K * x") + "_K = 2.0\n" + ENTRY_A
    assert _shared(const) == set()                   # reads a module constant (and _fill calls it)
    rebound = HELPERS.replace("import math\n", "import math\nmath = None\n") + ENTRY_A
    assert _shared(rebound) == {"_twice"}            # math is not the math module there
    renamed = HELPERS.replace("import math\n", "import cmath as math\n") + ENTRY_A
    assert _shared(renamed) == {"_twice"}
    shadow = HELPERS + "abs = None\n" + ENTRY_A
    assert _shared(shadow) == {"_twice"}             # a builtin rebound
    nested = HELPERS.replace("return 2.0 * x", "return (lambda y: 2.0 * y)(x)") + ENTRY_A
    assert _shared(nested) == set()
    twice_defined = HELPERS + HELPERS.split("\n\n\n", 1)[1] + ENTRY_A
    assert _shared(twice_defined) == set()
    cycle = HELPERS.replace("return 2.0 * x", "return _fill(np.empty(1), x)[0]") + ENTRY_A
    assert _shared(cycle) == set()
    public = HELPERS.replace("_twice", "twice") + ENTRY_A
    assert _shared(public) == set()                  # only underscore names (never the entries)


def test_other_text_under_the_same_name_gets_its_own_module(own_cache):
    a = build(HELPERS + ENTRY_A, name="text_a", target="cpu")
    other = HELPERS.replace("2.0 * x", "3.0 * x")
    b = build(other + ENTRY_A, name="text_b", target="cpu")
    assert a._twice is not b._twice and a._fill is not b._fill
    assert b.entry_a(1, 4.0) == 12.0 + 2.0 and a.entry_a(1, 4.0) == 8.0 + 2.0
    assert np.isclose(a.entry_a(2, 1.0), 2 * 3.0)
