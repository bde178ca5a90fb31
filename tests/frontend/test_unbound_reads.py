"""Reads of a variable that may be unbound raise Python's ``UnboundLocalError`` on every target.

The cpu target read 0.0 where Python raises (a variable assigned only in one branch, a loop
index read after ``for i in range(n)`` with ``n == 0``, a variable assigned only in a loop that
may run no trip, in a ``for`` or a ``while``), and returned a value and a gradient; the python
target raised, but named the variable as the generated code spells it (``u_y`` for ``_y``,
``h1_y`` for a helper's ``y``), and a closed form could compute a value where the loop ran no
trip.  ``coarsen.frontend.unbound`` checks each such read with a flag; where the variable is
definitely bound (a loop that always runs) nothing is added.
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

import coarsen
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import Assign, walk


# ----------------------------------------------------------------------------- the cases
def branch(x, c):
    if c > 0.0:
        y = x * x
    return y + x


def index_after_loop(x, n):
    s = x
    for i in range(n):
        s = s * x
    return s + i


def loop_local(x, n):
    for i in range(n):
        y = math.sin(x) * i
    return y * x


def while_local(x, n):
    k = 0
    while k < n:
        z = x * k
        k += 1
    return z * x


def closed_form_local(a, n):
    # the loop has a closed form: its last trip's t must not be computed where it ran none
    s = 0.0
    for i in range(n):
        s = s + a * i
        t = s * 2.0
    return t + a


# metamorphic variants: the same programs with other names, and the read in a helper
def branch_renamed(x, c):
    if c > 0.0:
        _y = x * x
    return _y + x


def branch_bar(x, c):
    if c > 0.0:
        x_bar = x * x
    return x_bar + x


def _branch_helper(c, x):
    if c > 0.0:
        y = x * x
    return y + x


def branch_in_helper(x, c):
    return _branch_helper(c, x) * 1.0


def _loop_helper(x, m):
    for j in range(m):
        w = math.sin(x) * j
    return w * x


def loop_in_helper(x, n):
    return _loop_helper(x, n) + 0.0


def while_renamed(x, n):
    count = 0
    while count < n:
        acc_ = x * count
        count += 1
    return acc_ * x


def array_branch(x, c):
    if c > 0.0:
        A = np.ones(3) * x
    return np.sum(A) * x


def early_return_partial(x, c):
    # an early return on one path only: y stays unbound where c <= -2
    if c > 0.0:
        y = x * x
    elif c > -2.0:
        return x
    return y * 2.0


def _early_helper(x, c):
    if c > 0.0:
        z = x * 3.0
    else:
        return x
    return z


def helper_then_unbound(x, c):
    # the helper's early return says nothing of the caller's y
    if c > 0.0:
        y = x * x
    t = _early_helper(x, c)
    return y + t


#: fn -> (arguments where the read finds the variable unbound, arguments where it is bound)
CASES = {
    branch: ((2.0, -1.0), (2.0, 1.0)),
    index_after_loop: ((2.0, 0), (2.0, 3)),
    loop_local: ((2.0, 0), (2.0, 3)),
    while_local: ((2.0, 0), (2.0, 3)),
    closed_form_local: ((1.5, 0), (1.5, 5)),
    branch_renamed: ((2.0, -1.0), (2.0, 1.0)),
    branch_bar: ((2.0, -1.0), (2.0, 1.0)),
    branch_in_helper: ((2.0, -1.0), (2.0, 1.0)),
    loop_in_helper: ((2.0, 0), (2.0, 3)),
    while_renamed: ((2.0, 0), (2.0, 3)),
    array_branch: ((2.0, -1.0), (2.0, 1.0)),
    early_return_partial: ((2.0, -3.0), (2.0, 1.0)),
    helper_then_unbound: ((2.0, -1.0), (2.0, 1.0)),
}
BASE = [branch, index_after_loop, loop_local, while_local]


def python_message(fn, args):
    """What Python itself says."""
    with pytest.raises(UnboundLocalError) as info:
        fn(*args)
    return str(info.value)


def derivative(fn, args, h=1e-6):
    """The central difference in the first argument (the programs are smooth there)."""
    a = list(args)
    hi, lo = a.copy(), a.copy()
    hi[0] += h
    lo[0] -= h
    return (fn(*hi) - fn(*lo)) / (2 * h)


def test_python_says_what_the_tests_expect():
    assert python_message(branch, (2.0, -1.0)) == \
        "cannot access local variable 'y' where it is not associated with a value"
    assert "'_y'" in python_message(branch_renamed, (2.0, -1.0))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_gradient_raises_as_python_does(fn, coarse, target):
    unbound, bound = CASES[fn]
    g = coarsen.differentiate(fn, wrt=0, coarsen=coarse, target=target)
    # bound: the value and the gradient, as before
    value, grad = g.value_and_grad(*bound)
    assert value == pytest.approx(fn(*bound), rel=1e-12)
    assert grad == pytest.approx(derivative(fn, bound), rel=1e-6)
    # unbound: Python's error, Python's message, and no gradient
    for call in (g, g.value_and_grad):
        with pytest.raises(UnboundLocalError) as info:
            call(*unbound)
        assert str(info.value) == python_message(fn, unbound)


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", BASE + [branch_in_helper, branch_renamed],
                         ids=lambda f: f.__name__)
def test_jvp_raises_as_python_does(fn, coarse, target):
    unbound, bound = CASES[fn]
    j = coarsen.jvp(fn, wrt=0, coarsen=coarse, target=target)
    value, tangent = j(*bound, tangents=1.0)
    assert value == pytest.approx(fn(*bound), rel=1e-12)
    assert tangent == pytest.approx(derivative(fn, bound), rel=1e-6)
    with pytest.raises(UnboundLocalError) as info:
        j(*unbound, tangents=1.0)
    assert str(info.value) == python_message(fn, unbound)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_batch_raises_for_a_set_where_the_variable_is_unbound(target):
    g = coarsen.differentiate(loop_local, wrt=0, target=target)
    bg = g.batch((0, 0))
    xs = np.array([1.0, 2.0])
    values, grads = bg(xs, np.array([3, 2]))
    for k, n in enumerate((3, 2)):
        v, d = g.value_and_grad(xs[k], n)
        assert values[k] == v and grads[k] == d
    with pytest.raises(UnboundLocalError, match="local variable 'y'"):
        bg(xs, np.array([3, 0]))


def test_hot_direct_calls_still_raise():
    g = coarsen.differentiate(branch, wrt=0)
    for _ in range(300):            # past the calls counted before direct mode
        g(2.0, 1.0)
    with pytest.raises(UnboundLocalError, match="local variable 'y'"):
        g(2.0, -1.0)


def test_hessian_raises_and_is_right_where_bound():
    def f2(x, y, c):
        if c > 0.0:
            z = x * x * y
        return z + x * y
    h = coarsen.hessian(f2, wrt=(0, 1), target="python")
    assert h(2.0, 3.0, 1.0) == ((6.0, 5.0), (5.0, 0.0))
    with pytest.raises(UnboundLocalError, match="local variable 'z'"):
        h(2.0, 3.0, -1.0)


# --------------------------------------------------------------- the common case is free
def always_runs_for(x):
    for i in range(3):
        y = x * i
    return y + x


def always_runs_index(x):
    s = x
    for i in range(4):
        s = s * x
    return s + i


def always_runs_while(x):
    k = 0
    while k < 2:
        z = x * k
        k += 1
    return z * x


def both_branches(x, c):
    if c > 0.0:
        y = x * x
    else:
        y = x
    return y + x


def early_return_else(x, c):
    # y is bound wherever the read runs: the other path has returned
    if c > 0.0:
        y = x * x
    else:
        return x
    return y * 2.0


def helper_early_return(x, c):
    return _early_helper(x, c) + 1.0


def loop_with_break(x):
    for i in range(5):
        y = x * i
        if y > 3.0:
            break
    return y + i


def while_true(x):
    k = 0
    while True:
        z = x * k
        k += 1
        if k > 3:
            break
    return z


def checks_in(fn):
    fn_ir = lower(fn)[0]
    return [s for s in walk(fn_ir.body) if isinstance(s, Assign) and s.op == "unbound_check"]


@pytest.mark.parametrize("fn, args", [
    (always_runs_for, (1.5,)), (always_runs_index, (1.5,)), (always_runs_while, (1.5,)),
    (both_branches, (1.5, 1.0)), (early_return_else, (1.5, 1.0)),
    (helper_early_return, (1.5, -1.0)), (loop_with_break, (1.3,)), (while_true, (1.5,))],
    ids=lambda a: getattr(a, "__name__", ""))
def test_definitely_bound_reads_get_no_flag(fn, args):
    assert checks_in(fn) == []
    g = coarsen.differentiate(fn, wrt=0, target="python")
    value, grad = g.value_and_grad(*args)
    assert value == fn(*args)
    assert grad == pytest.approx(derivative(fn, args), rel=1e-6)
    source = g.last_specialization.source
    assert "UnboundLocalError" not in source and "_bound_" not in source, source


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_possibly_unbound_reads_are_checked_once(fn):
    assert len(checks_in(fn)) == 1


APPS = ["ba", "gemver", "gmm", "heat", "jacobi2d", "kalman", "lennard_jones", "logreg",
        "lotka_volterra", "mc_option", "rnn", "series", "trisolve"]


@pytest.mark.parametrize("app", APPS)
def test_apps_have_no_possibly_unbound_read(app):
    # their generated code is what it was: the frontend adds nothing, not even a name
    objective = importlib.import_module(f"apps.{app}").objective
    assert checks_in(objective) == []
    assert not any(isinstance(s, Assign) and s.target.startswith("_bound_")
                   for s in walk(lower(objective)[0].body))
