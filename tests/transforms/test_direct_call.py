"""Direct mode (``coarsen.transforms.direct_call``): a hot kind of arguments' ``g(*args)`` goes straight
into a Numba dispatcher.  Its results are the general path's bit for bit, for the kind and for
the kinds Numba types alike (``np.float64``, ``np.int64``, other layouts); any other call leaves
it for the general path, which binds and refuses as before; ``tape_bytes`` and ``report`` keep
following the last call."""
import io

import numpy as np
import pytest

import coarsen
from coarsen.transforms import direct_call
from apps.series import objective as series  # the closed form whose calls are all overhead
from coarsen.transforms.tiers import GRAD_ONLY_AFTER
from tests.transforms.test_grad_only import loss


def logistic(r, x, n):
    for i in range(n):
        x = r * x * (1.0 - x)
    return x


@pytest.fixture
def soon(monkeypatch):
    """Direct mode offered right after the gradient-only tier (the tests' calls stay few)."""
    monkeypatch.setattr(direct_call, "DIRECT_AFTER", GRAD_ONLY_AFTER + 2)


def _direct(g):
    return getattr(type(g), "_direct_mode", None) is not None


def _hot(g, *args):
    """Calls of one kind until direct mode takes it, then one in direct mode."""
    for _ in range(GRAD_ONLY_AFTER + 8):
        g(*args)
        if _direct(g):
            break
    assert _direct(g)
    return g(*args)


def _reference(fn, wrt, *args):
    g = coarsen.differentiate(fn, wrt=wrt)
    direct_call.ENABLED = False
    try:
        return g(*args), g.value_and_grad(*args), g
    finally:
        direct_call.ENABLED = True


def _same(x, y):
    xs = x if isinstance(x, tuple) else (x,)
    ys = y if isinstance(y, tuple) else (y,)
    return len(xs) == len(ys) and all(
        type(p) is type(q) and np.array_equal(np.asarray(p), np.asarray(q)) for p, q in zip(xs, ys))


def test_scalar_kind_is_served_directly_bit_for_bit(soon):
    g = coarsen.differentiate(series, wrt=("a", "r", "x"))
    args = (0.5, 0.999, 1.5, 10000)
    out = _hot(g, *args)
    want, _, _ = _reference(series, ("a", "r", "x"), *args)
    assert _same(out, want)
    # the kinds Numba types alike: served directly, the same bits
    assert _same(g(np.float64(0.5), 0.999, np.float64(1.5), np.int64(10000)), want)
    assert _direct(g)
    # another point of the same kind (the singular branch, which runs the loop)
    assert _same(g(0.5, 1.0, 1.5, 7), _reference(series, ("a", "r", "x"), 0.5, 1.0, 1.5, 7)[0])
    assert _direct(g)


def entry(x, n, min=2.0):
    """Named as the direct dispatcher's helpers once were (a user probe's crash: its own
    name replaced them); a parameter named as a builtin the dispatcher's code avoids."""
    s = 0.0
    for i in range(n):
        s += x * i * min
    return s


def test_keywords_bind_and_other_calls_leave_for_the_general_path(soon):
    g = coarsen.differentiate(series, wrt=("a", "r", "x"))
    args = (0.5, 0.9, 1.5, 20)
    _hot(g, *args)
    want = _reference(series, ("a", "r", "x"), *args)[0]
    # keywords: bound by the function's parameters, served directly
    assert _same(g(0.5, 0.9, 1.5, n=20), want)
    assert _same(g(n=20, x=1.5, r=0.9, a=0.5), want)
    assert _direct(g)
    # an int past int64: never served as another Numba type (uint64 gave a number)
    with pytest.raises(OverflowError):
        g(0.5, 0.9, 1.5, 2 ** 63 + 3)
    # another kind (a float32 scalar, which Numba types apart): the general path, as before
    a32 = np.float32(0.5)
    assert _same(g(a32, 0.9, 1.5, 20), _reference(series, ("a", "r", "x"), a32, 0.9, 1.5, 20)[0])
    assert not _direct(g)
    # fewer arguments: the general path's refusal, a TypeError too
    with pytest.raises(coarsen.CoarsenError, match="missing a required argument: 'n'"):
        g(0.5, 0.9, 1.5)
    _hot(g, *args)
    # arguments that do not bind: a TypeError in either mode (Numba's message in direct mode)
    for bad in ((0.5, 0.9, 1.5), (0.5, 0.9, 1.5, 20, 1), (0.5, 0.9, 1.5, 20)):
        with pytest.raises(TypeError):
            g(*bad, **({"n": 4} if len(bad) == 4 else {}))
    with pytest.raises(TypeError):
        g(0.5, 0.9, 1.5, 20, bogus=1.0)


def test_defaults_and_the_dispatchers_own_names(soon):
    g = coarsen.differentiate(entry)
    want = _reference(entry, None, 1.5, 4)[0]
    assert _same(_hot(g, 1.5, 4), want)
    assert _same(g(1.5, 4, 2.0), _reference(entry, None, 1.5, 4, 2.0)[0])
    assert _direct(g)
    # an omitted default: bound by the general path, out of direct mode
    assert _same(g(x=1.5, n=4), want)
    assert not _direct(g)


def test_tape_bytes_and_report_follow_the_last_call(soon):
    g = coarsen.differentiate(logistic, wrt=("r", "x"))
    _hot(g, 3.7, 0.3, 5)
    ref = coarsen.differentiate(logistic, wrt=("r", "x"))
    for n in (5, 40, 3):
        assert _same(g(3.7, 0.3, n), ref(3.7, 0.3, n))
        assert g.tape_bytes == ref.tape_bytes == 8 * n
    assert _direct(g)
    # the general path's call (value_and_grad) is the last one, then the direct one again
    assert _same(g.value_and_grad(3.7, 0.3, 17), ref.value_and_grad(3.7, 0.3, 17))
    assert g.tape_bytes == 8 * 17
    assert _same(g(3.7, 0.3, 9), ref(3.7, 0.3, 9))
    assert g.tape_bytes == 8 * 9
    assert g.report(file=io.StringIO()).tape_bytes == 8 * 9
    # a report for other arguments keeps the last call's tape (it reset it to an older one)
    g(3.7, 0.3, 60)
    g.report(3.7, 0.3, 5, file=io.StringIO())
    assert g.tape_bytes == 8 * 60
    assert g.source == ref.source
    assert _direct(g)


def test_array_kinds_stay_on_the_general_path(soon):
    """Numba types an ndarray subclass as the plain array: np.matrix (whose ``*`` is a matrix
    product) would be served as one.  Kinds with arrays are not offered direct mode, and the
    general path refuses the subclass however hot the plain kind is."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 4))
    y = np.sign(rng.standard_normal(12))
    w = 0.1 * rng.standard_normal(4)
    g = coarsen.differentiate(loss, wrt="w")
    for _ in range(GRAD_ONLY_AFTER + 8):
        out = g(w, X, y)
    assert not _direct(g)
    assert _same(out, _reference(loss, "w", w, X, y)[0])
    with pytest.raises(coarsen.CoarsenError, match="subclass of np.ndarray"):
        g(w, np.asmatrix(X), y)


def test_ints_past_int64_are_refused_in_either_mode(soon):
    from numba.core.errors import TypingError
    g = coarsen.differentiate(series, wrt=("a", "r", "x"))
    with pytest.raises(coarsen.CoarsenError, match="does not fit in a 64-bit int"):
        g(0.5, 0.9, 1.5, 2 ** 70)
    _hot(g, 0.5, 0.9, 1.5, 20)
    # Numba's own refusal (direct mode: converting it; the general path: typing it)
    with pytest.raises((OverflowError, TypingError), match="too (big|large)"):
        g(0.5, 0.9, 1.5, 2 ** 70)


def test_offered_only_where_it_may_take(monkeypatch):
    monkeypatch.setattr(direct_call, "DIRECT_AFTER", GRAD_ONLY_AFTER + 2)
    monkeypatch.setattr(direct_call, "ENABLED", False)
    g = coarsen.differentiate(series, wrt=("a", "r", "x"))
    for _ in range(GRAD_ONLY_AFTER + 5):
        g(0.5, 0.9, 1.5, 20)
    assert not _direct(g)
    monkeypatch.setattr(direct_call, "ENABLED", True)
    p = coarsen.differentiate(series, wrt=("a", "r", "x"), target="python")
    for _ in range(GRAD_ONLY_AFTER + 5):
        p(0.5, 0.9, 1.5, 20)
    assert not _direct(p)
    assert direct_call.check()


def series_renamed(_t1, x_bar, u_y, n):
    """``apps.series``' objective with its variables renamed to the compiler's spellings."""
    _ret = 0.0
    s_bar = 1.0
    for _acc in range(n):
        _ret += _t1 * _acc * _acc + u_y * s_bar
        s_bar *= x_bar
    return _ret


def test_renamed_variables_give_the_same_bits_in_direct_mode(soon):
    """Metamorphic: the same function under the compiler's names, both in direct mode."""
    args = (0.5, 0.999, 1.5, 10000)
    g = coarsen.differentiate(series, wrt=("a", "r", "x"))
    h = coarsen.differentiate(series_renamed, wrt=("_t1", "x_bar", "u_y"))
    assert _same(_hot(g, *args), _hot(h, *args))
    assert _same(g(0.5, 1.0, 1.5, 7), h(0.5, 1.0, 1.5, 7))
    assert g.tape_bytes == h.tape_bytes
