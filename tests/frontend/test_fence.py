"""The fence: constructs outside the input language raise ``CoarsenError`` at the right line.

Each function of ``tests/zoo/unsupported.py`` marks its offending line(s) with
``# <- unsupported``.  The error may be raised by ``coarsen.differentiate(fn)`` (constructs
refused from the source alone: the preferred place for syntax) or at the first call
``g(*args)`` (constructs that depend on the argument types, such as returning an array or an
int, since types specialize at the first call): both are accepted, and nothing else is, since
both calls sit inside ``pytest.raises(CoarsenError)``: any other exception, or no exception,
fails the test.

The error must carry the file, the line of a marked construct, a column inside that line, the
source line itself, a problem statement and a hint (DESIGN.md: "file, line, column, a caret
under the construct and what to do instead"), and ``str(err)`` must show them.
"""
import inspect
import os

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.zoo.unsupported import FENCE

MARK = "# <- unsupported"


def _marked_lines(fn):
    lines, start = inspect.getsourcelines(fn)
    marked = {start + i for i, text in enumerate(lines) if MARK in text}
    assert marked, f"{fn.__name__} has no marked line"
    return marked


def test_fence_size():
    assert len(FENCE) >= 18


@pytest.mark.parametrize("fn,factory,why", FENCE, ids=[w for _, _, w in FENCE])
def test_fence(fn, factory, why):
    marked = _marked_lines(fn)
    path = inspect.getsourcefile(fn)
    with open(path) as f:
        file_lines = f.read().splitlines()
    with pytest.raises(CoarsenError) as info:
        g = coarsen.differentiate(fn)
        g(*factory())
    err = info.value
    assert err.lineno in marked, \
        f"{why}: error at line {err.lineno}, expected one of {sorted(marked)}:\n{err}"
    assert err.filename is not None and os.path.exists(err.filename) \
        and os.path.samefile(err.filename, path), f"{why}: filename {err.filename!r}"
    line = file_lines[err.lineno - 1]
    assert err.source_line is not None and err.source_line.strip() == line.strip(), \
        f"{why}: source_line {err.source_line!r}"
    assert isinstance(err.col_offset, int) and 0 <= err.col_offset < len(line.rstrip()), \
        f"{why}: col_offset {err.col_offset!r}"
    assert isinstance(err.problem, str) and err.problem.strip(), f"{why}: empty problem"
    assert isinstance(err.hint, str) and err.hint.strip(), f"{why}: no hint"
    text = str(err)
    assert f"line {err.lineno}" in text and err.problem in text and line.strip() in text
    assert "^" in text


# ---------------------------------------------------------------- API misuse is refused too

def test_wrt_int_parameter_is_refused():
    """Int parameters are never differentiated: asking for one is an error, not a zero."""
    from tests.zoo.scalar import sum_closed_form
    with pytest.raises(CoarsenError) as info:
        g = coarsen.differentiate(sum_closed_form, wrt="n")
        g(1.3, 6)
    assert info.value.problem.strip()


def test_wrt_unknown_name_is_refused():
    from tests.zoo.scalar import sum_closed_form
    with pytest.raises(CoarsenError) as info:
        g = coarsen.differentiate(sum_closed_form, wrt="zzz")
        g(1.3, 6)
    assert info.value.problem.strip()


def test_int_array_is_never_differentiated():
    from tests.zoo.loops import gather_int_array
    import numpy as np
    with pytest.raises(CoarsenError):
        g = coarsen.differentiate(gather_int_array, wrt="idx")
        g(np.ones(5), np.array([3, 0, 3, 4, 1]))


HELPER_TWINS = '''\
def hw(arr, i, w):
    arr[i] = w
    return arr[i]


def f(x, a):
    {body}
'''


def test_twin_helpers_in_two_files_are_reported_in_their_own_file(tmp_path, monkeypatch):
    """Two modules with the same helper at the same line: CPython's code objects compare equal
    across files, and a source cache keyed by them reported modF's error in modE.py."""
    import importlib
    (tmp_path / "twin_e.py").write_text(HELPER_TWINS.format(body="return hw(a, 0, x) * 2.0"))
    (tmp_path / "twin_f.py").write_text(
        HELPER_TWINS.format(body="v = a[1:]\n    return hw(v, 0, x) * 2.0 + a[0]"))
    monkeypatch.syspath_prepend(str(tmp_path))
    e, f = importlib.import_module("twin_e"), importlib.import_module("twin_f")
    assert e.hw.__code__ == f.hw.__code__          # what made the cache mix them up
    a = np.ones(3)
    assert coarsen.differentiate(e.f, target="python")(1.0, a)[0] == 2.0
    with pytest.raises(CoarsenError) as err:
        coarsen.differentiate(f.f, target="python")(1.0, a)
    assert err.value.filename == str(tmp_path / "twin_f.py") and err.value.lineno == 2


def float_index_deep(x, a, n):
    s = 0.0
    for i in range(n):
        if i > 0:
            s += a[x] * 2.0
    return s


def test_the_caret_of_an_error_found_by_type_inference_is_under_its_construct():
    """The IR keeps a statement's text without its indentation: the caret was placed by the
    file's column in the stripped line, past the end of a nested line."""
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(float_index_deep, wrt="x", target="python")(0.5, np.ones(3), 3)
    lines = str(e.value).splitlines()
    shown, caret = lines[1], lines[2]
    assert shown.strip() == "s += a[x] * 2.0"
    assert shown[caret.index("^"):].startswith("a[x]"), str(e.value)


def uses_round(x):
    return round(x) * x


def uses_sum(a, x):
    return sum(a) * x


def test_an_unsupported_builtin_is_named_as_one_with_what_to_write():
    """"name 'round' is not defined" read as a typo."""
    for fn, args, hint in ((uses_round, (1.2,), "math.floor"), (uses_sum, (np.ones(3), 1.5), "np.sum")):
        with pytest.raises(CoarsenError) as e:
            coarsen.differentiate(fn, target="python")(*args)
        assert f"the builtin {fn.__name__[5:]}() is not supported" in e.value.problem
        assert hint in e.value.hint and e.value.lineno is not None


def zip_of_range(a, n):
    s = 0.0
    for i, v in zip(range(n), a):
        s += v * i
    return s


def test_messages_that_can_be_followed():
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(zip_of_range)
    assert "zip takes named arrays here, not a call" in e.value.problem
    assert "for i in range(min(n, len(a)))" in e.value.hint      # it said "assign the array to a variable"


def cond_rank(A, flag):
    return np.sum((A[0] if flag else A) ** 2)


def enumerate_from_one(a):
    s = 0.0
    for i, v in enumerate(a, 1):
        s += i * v
    return s


def test_messages_name_what_the_user_wrote():
    A = np.ones((2, 3))
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(cond_rank, target="python")(A, True)
    assert "_t" not in str(e.value) and "a 1-D f64 array on one path and a 2-D f64 array" in str(e.value)
    with pytest.raises(CoarsenError, match="enumerate\\(\\) with a start is not supported"):
        coarsen.differentiate(enumerate_from_one)
