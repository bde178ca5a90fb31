"""NumPy's in-place semantics: ``a op= e`` on an array updates the array itself.

Every alias of the array, and the caller of a helper that updates its parameter, sees the
update, in the value and in the gradient; scalars and ``a = a + e`` keep rebinding semantics.
Each case is checked against the function itself (plain Python/NumPy, for the value) and the
extended-precision finite-difference oracle (``tests.oracle``, for the gradient), which both run
the user's code unchanged.  The python target is used for most cases; the cpu target (Numba)
compiles a handful.
"""
import math

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.oracle import assert_grad_close, check_against_oracle, fd_grad

R = np.random.default_rng(7)


def vec(n, lo=0.5, hi=1.5):
    return R.uniform(lo, hi, n)


def mat(n, m, lo=0.5, hi=1.5):
    return R.uniform(lo, hi, (n, m))


# ------------------------------------------------------------------ aliases
def alias_iadd_1d(w, x):
    v = w
    w += x
    return np.sum(v * v) + np.sum(np.sin(w))


def alias_isub_2d(A, B):
    V = A
    A -= 0.5 * B
    return np.sum(V * V * B)


def alias_imul_1d(w, x):
    v = w
    w *= x
    return np.sum(v * v)


def alias_idiv_2d(A, b):
    V = A
    A /= b                      # b (1-D) broadcast along the rows
    return np.sum(V * V)


def alias_ipow_1d(w, x):
    v = w
    w **= 2.0
    return np.sum(v * x)


def alias_imod_1d(w, x):
    v = w
    w %= 4.0                    # w in (0.5, 1.5) * 3: away from multiples of 4
    return np.sum(v * x)


def write_through_alias(w, x):
    v = w
    v *= 2.0                    # w sees it
    v -= x
    return np.sum(w * x) + np.sum(v)


def alias_chain(w, x):
    v = w
    u = v
    u += x
    u *= x
    return np.sum(v * v) + np.sum(w)


def self_update(w, A):
    w += w                      # the right-hand side is the array itself
    A += A.T                    # overlapping view: NumPy reads A before writing it
    w -= 0.25 * w
    return np.sum(w * w) + np.sum(A * A)


def alias_in_branch(w, x, s):
    v = w
    if s > 0.0:
        w += x
    else:
        w *= x
    return np.sum(v * v)


def alias_before_loop(w, x):
    v = w
    for k in range(3):
        w *= x
        w += 0.5
    return np.sum(v * v)


# ------------------------------------------------------------------ helpers
def scale_(a, s):
    a *= s


def shift(a, b):
    a -= b
    return np.sum(a)


def inner(a, b):
    a /= b


def outer_(a, b):
    inner(a, b)
    a += 1.0


def rank1(A, u, v):
    A += np.outer(u, v)


def via_helpers(w, x, A):
    scale_(w, 2.0)
    t = shift(w, x)
    outer_(w, x)
    rank1(A, w, x)
    return np.sum(w * w) + t * np.sum(A)


def helper_returns_it(a, b):
    a *= b
    return a


def via_helper_result(w, x):
    y = helper_returns_it(w, x)
    y += 1.0                    # y is w
    return np.sum(w * x) + np.sum(y)


def twice(a, b):
    a += b
    a += b


def helper_on_alias(w, x):
    v = w
    twice(v, x)
    return np.sum(w * w)


def early_exit(a, b):
    if b[0] > 0.0:
        a += b
        return 1.0
    a -= b
    return 2.0


def helper_early_return(w, x):
    r = early_exit(w, x)
    return r * np.sum(w * w)


def two_params(a, b, c):
    a += c
    b *= c


def same_array_twice(w, x):
    two_params(w, w, x)         # a and b are one array
    return np.sum(w * w)


def scale_all(a):
    a *= 1.5
    return np.sum(a)


def order_whole(w, x):
    w += scale_all(w) * x       # NumPy adds to w after the call has scaled it
    return np.sum(w * w)


def order_element(w, x):
    w[0] += scale_all(w) * x[0]     # Python reads w[0] before the call scales w
    w[1] *= scale_all(w) * x[1]
    return np.sum(w * w)


def order_row(A, x):
    A[1] *= scale_all(A) * x[0]     # a row is a view: it sees what the call wrote
    A[0, 2] -= scale_all(A) * x[1]  # an element does not
    return np.sum(A * A)


def iterate_while_updating(w, x):
    t = 0.0
    for v in w:                 # each element is read after the updates before it
        w += 0.1 * v * x
        t += v
    return t + np.sum(w * w)


def while_with_break(w, x):
    k = 0
    while k < 10:
        w *= 0.9
        w += x
        if np.sum(w) > 4.0:
            break
        k += 1
    return np.sum(w * w)


def alias_in_loop(w, x):
    for i in range(3):
        v = w
        v[i] += x[i] * w[i]
        v *= 0.9
    return np.sum(w * w)


def param_rebound_to_alias(a, b):
    a = b
    a += 1.0
    return np.sum(b * b)


# ------------------------------------------------------------------ slices
def slice_updates(w, x, A):
    v = w
    w[1:3] += x[0:2]
    w[0:2] *= x[1:3]
    w[2:] /= 2.0
    for i in range(A.shape[0]):
        A[i, :] *= x[i]
    A[:, 1] -= w[0:4]
    B = A
    B[0, :] /= 3.0
    return np.sum(v * v) + np.sum(A * A)


# ------------------------------------------------------------------ polybench (gemver)
def gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * y @ A + z
    w += alpha * A @ x


def gemver_loss(A, u1, v1, u2, v2, w, x, y, z):
    gemver(A, u1, v1, u2, v2, w, x, y, z, 0.7, 0.3)
    return np.sum(w * w) + np.sum(np.tanh(x))


def gemver_args():
    rng = np.random.default_rng(3)
    n = 4
    return (rng.uniform(-0.5, 0.5, (n, n)),) + tuple(rng.uniform(-0.5, 0.5, n) for _ in range(8))


# ------------------------------------------------------------------ rebinding semantics
def scalar_rebinds(w, s):
    t = s
    s += 1.0
    s *= 2.0
    s /= 3.0
    s -= 0.25
    return t * np.sum(w) + s * s


def bump(s):
    s += 1.0
    s *= 3.0
    return s


def scalar_helper(w, s):
    r = bump(s)                 # the caller's s is unchanged
    return s * np.sum(w) + r * r


def rebind_not_inplace(w, x):
    v = w
    w = w + x                   # a new array: v keeps the old values
    w += x                      # updates the new array only
    w = w * 2.0
    w -= x
    return np.sum(v * v) + np.sum(w * w)


def rebind_in_helper(a, b):
    a = a + b
    a *= 2.0
    return np.sum(a)


def rebind_helper_caller(w, x):
    t = rebind_in_helper(w, x)  # w unchanged
    return t * np.sum(w * w)


def copy_then_update(w, x):
    v = w.copy()
    w += x
    return np.sum(v * w)


# ------------------------------------------------------------------ the checks
def _copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def check(fn, args, target="python", wrt=None):
    """Value against the function itself, gradient against the oracle, arguments unchanged."""
    return check_against_oracle(fn, args, target, wrt)


PY_CASES = [
    (alias_iadd_1d, lambda: (vec(5), vec(5))),
    (alias_isub_2d, lambda: (mat(3, 4), mat(3, 4))),
    (alias_imul_1d, lambda: (vec(5), vec(5))),
    (alias_idiv_2d, lambda: (mat(3, 4), vec(4))),
    (alias_ipow_1d, lambda: (vec(4), vec(4))),
    (alias_imod_1d, lambda: (3.0 * vec(4), vec(4))),
    (write_through_alias, lambda: (vec(4), vec(4))),
    (alias_chain, lambda: (vec(4), vec(4))),
    (self_update, lambda: (vec(3), mat(3, 3))),
    (alias_before_loop, lambda: (vec(4), vec(4))),
    (via_helpers, lambda: (vec(3), vec(3), mat(3, 3))),
    (via_helper_result, lambda: (vec(4), vec(4))),
    (helper_on_alias, lambda: (vec(4), vec(4))),
    (slice_updates, lambda: (vec(5), vec(5), mat(4, 3))),
    (helper_early_return, lambda: (vec(3), vec(3))),
    (helper_early_return, lambda: (vec(3), -vec(3))),
    (same_array_twice, lambda: (vec(3), vec(3))),
    (order_whole, lambda: (vec(3), vec(3))),
    (order_element, lambda: (vec(3), vec(3))),
    (order_row, lambda: (mat(2, 3), vec(3))),
    (iterate_while_updating, lambda: (vec(3), vec(3))),
    (while_with_break, lambda: (vec(3), vec(3))),
    (alias_in_loop, lambda: (vec(3), vec(3))),
    (param_rebound_to_alias, lambda: (vec(3), vec(3))),
    (gemver_loss, gemver_args),
    (scalar_rebinds, lambda: (vec(3), 0.7)),
    (scalar_helper, lambda: (vec(3), 0.7)),
    (rebind_not_inplace, lambda: (vec(4), vec(4))),
    (rebind_helper_caller, lambda: (vec(4), vec(4))),
    (copy_then_update, lambda: (vec(4), vec(4))),
]


def _ids(cases):
    seen, out = {}, []
    for f, _ in cases:
        seen[f.__name__] = seen.get(f.__name__, 0) + 1
        out.append(f.__name__ + ("" if seen[f.__name__] == 1 else f"#{seen[f.__name__]}"))
    return out


@pytest.mark.parametrize("fn,factory", PY_CASES, ids=_ids(PY_CASES))
def test_python_target(fn, factory):
    check(fn, factory())


@pytest.mark.parametrize("s", [0.8, -0.8])
def test_alias_updated_in_a_branch(s):
    check(alias_in_branch, (vec(4), vec(4), s), wrt=("w", "x"))


def test_the_cases_see_the_update():
    """The cases above tell in-place from rebinding: under rebinding their values differ."""
    w, x = vec(5), vec(5)
    assert not np.isclose(alias_iadd_1d(w.copy(), x), np.sum(w * w) + np.sum(np.sin(w + x)))
    args = gemver_args()
    A, u1, v1, u2, v2, w, x, y, z = _copies(args)
    assert not np.isclose(gemver_loss(*_copies(args)), np.sum(w * w) + np.sum(np.tanh(x)))
    # scalars rebind: t keeps s's old value
    assert scalar_rebinds(np.ones(3), 0.7) == pytest.approx(3 * 0.7 + ((1.7 * 2 / 3) - 0.25) ** 2)


def test_ir_is_a_store():
    text = coarsen.ir_text(alias_iadd_1d, vec(3), vec(3))
    assert "w[:] += x" in text and "v" not in text.replace("def ", "")
    text = coarsen.ir_text(alias_idiv_2d, mat(2, 3), vec(3))
    assert "A[:, :] = _t" in text
    text = coarsen.ir_text(scalar_rebinds, vec(3), 0.5)
    assert "add(s, 1.0)" in text and "inplace" not in text
    assert not any("] =" in line or "] +=" in line or "] -=" in line for line in text.splitlines())


def test_gemver_zero_gradient_bug():
    """The issue's kernel: before, w's update was lost (wrong value, zero gradient in A)."""
    g, value, grads = check(gemver_loss, gemver_args())
    assert np.max(np.abs(grads[0])) > 1e-3


# ------------------------------------------------------------------ cpu (Numba): a handful
@pytest.mark.parametrize("fn,factory", [
    (gemver_loss, gemver_args),
    (via_helpers, lambda: (vec(3), vec(3), mat(3, 3))),
    (slice_updates, lambda: (vec(5), vec(5), mat(4, 3))),
], ids=["gemver_loss", "via_helpers", "slice_updates"])
def test_cpu_target(fn, factory):
    check(fn, factory(), target="cpu")


# ------------------------------------------------------------------ NumPy's errors
def grow_rank(w, A):
    w += A
    return np.sum(w)


def int_array_float(w):
    k = np.zeros(3, dtype=np.int64)
    k += 0.5
    return np.sum(w) + k[0]


def int_array_div(w):
    k = np.ones(3, dtype=np.int64)
    k /= 2
    return np.sum(w) + k[0]


def int_array_ok(w):
    k = np.ones(3, dtype=np.int64)
    k += 2
    k *= 3
    k //= 2
    return np.sum(w) * k[0]


def view_update(w):
    v = w[0:2]
    v += 1.0                    # updates w: writing through a view is refused
    return np.sum(w * w)


G = np.array([1.0, 2.0, 3.0])


def global_update(x):
    scale_(G, 2.0)
    return np.sum(G * x)


@pytest.mark.parametrize("fn,args,words", [
    (grow_rank, (vec(3), mat(2, 3)), "non-broadcastable"),
    (int_array_float, (vec(3),), "UFuncTypeError"),
    (int_array_div, (vec(3),), "UFuncTypeError"),
    (view_update, (vec(3),), "view"),
    (global_update, (vec(3),), "module-level"),
], ids=["grow_rank", "int_array_float", "int_array_div", "view_update", "global_update"])
def test_refused(fn, args, words):
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(fn, target="python")(*args)
    assert words in str(e.value)
    assert e.value.lineno is not None


def test_int_array_update_ok():
    check(int_array_ok, (vec(3),))


def mismatch(A, b):
    A += b
    return np.sum(A * A)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_shape_mismatch_raises_at_run_time(target):
    """A right-hand side that does not broadcast to the array's shape raises ValueError, as in
    NumPy (same rank, so only the shapes tell)."""
    with pytest.raises(ValueError):
        mismatch(np.ones((3, 1)), np.ones((3, 4)))
    g = coarsen.differentiate(mismatch, target=target)
    A, b = mat(3, 4), vec(4)
    v, _ = g.value_and_grad(A, b)
    assert np.isclose(v, mismatch(A.copy(), b))
    with pytest.raises(ValueError):
        g(np.ones((3, 1)), np.ones((3, 4)))
    with pytest.raises(ValueError):
        g(np.ones((3, 4)), np.ones(3))


# ------------------------------------------------------------------ reverse-sweep bugs that
# in-place updates exposed (they could be reached before with slice stores too)
def array_push_then_scalar_pushes(w, x):
    w[:] = w * x                # the tape saves the whole array ...
    for i in range(10):
        w[i] = w[i] * x[i]      # ... then one element per write, in room reserved ahead
    w *= x
    w[0] = w[0] * x[1]
    w[1] = w[1] * x[0]
    return np.sum(w * w)


@pytest.mark.parametrize("n", range(58, 82, 3))
def test_array_push_keeps_the_room_reserved_for_scalar_pushes(n):
    """An array push used to fill the room reserved ahead for the scalar pushes after it (an
    IndexError on the python target, heap corruption under Numba)."""
    check(array_push_then_scalar_pushes, (vec(n), vec(n, 0.9, 1.1)))


def _grow(p, c):
    p += 0.1 * math.sin(c)
    return 0.5 * p[0] + math.tanh(c)


def read_then_helper_writes(a, x):
    s = a[-1] * _grow(a, -0.7 * x)  # a[-1] is read before the helper updates a
    return 0.5 * s + np.sum(a)


@pytest.mark.parametrize("coarse", [True, False])
def test_element_read_before_a_write_outside_its_segment(coarse):
    """A scalar read from an array in one segment and used after a write outside it must not be
    re-read in the reverse sweep (it was, when coarse: a wrong gradient)."""
    args = (np.array([-1.074, -1.164, 0.516]), 0.3)
    g = coarsen.differentiate(read_then_helper_writes, coarsen=coarse, target="python")
    got = g(*_copies(args))
    assert_grad_close(got, fd_grad(read_then_helper_writes, _copies(args), [0, 1]))
