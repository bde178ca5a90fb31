"""``coarsen.analysis.recording``: the preconditions the mutation run
(``python -m tests.mutation coarsen/analysis/recording.py``) checks, pinned fast.

The analysis decides what the reverse sweep reads again from an array instead of taping it.
Either way the gradient is right (each program is checked against the oracle, python target),
so the tests also pin what the decision saves: the tape's size (``g.tape_bytes``) or the
reverse sweep's re-read in the generated source.
"""
import numpy as np
import pytest

from tests.analysis.test_history_rows import _args as _heat_rows_args
from tests.analysis.test_history_rows import heat_rows
from tests.oracle import check_against_oracle
from tests.zoo.realistic import _heat_args, heat_loops


def test_a_read_after_a_time_stepping_nest_is_taped_not_reread():
    """The loss loop after the heat equation's time steps reads ``u`` inside fewer loops than
    the steps write it: re-reading it in the reverse sweep would make every step's writes save
    and restore ``u`` (``rereads_for_steps``); taped, the loss costs ``n`` floats."""
    args = _heat_args()
    u0, nsteps = args[0], args[4]
    g, _, _ = check_against_oracle(heat_loops, args, wrt=("u0", "kappa"))
    assert g.tape_bytes <= 8 * (nsteps * u0.shape[0] + 2 * u0.shape[0]), g.tape_bytes


def reread_then_step(a, x):
    s = 0.0
    k = 0
    for it in range(a.shape[0]):
        t = a[k]
        if x > 0.0:
            s = s + np.sin(t) * x
            k = k + 1
    return s


def test_an_index_reassigned_after_the_use_in_a_branch_still_rereads():
    """``t = a[k]`` is used, then ``k`` reassigned, both inside one ``if``: the use comes first,
    so the reverse sweep re-reads ``a[k]`` (``k`` restored) and tapes no ``t``
    (``_written_before_use``: only a loop, not any compound statement, that writes and uses
    counts whatever the order)."""
    a = np.array([0.3, 0.5, -0.2, 0.9])
    g, _, _ = check_against_oracle(reread_then_step, (a, 0.7), coarse=False)
    assert "math.cos(a[k])" in g.source, g.source
    assert g.tape_bytes == 8 * a.shape[0], g.tape_bytes       # sin(t) only


def user_local(X, w):
    z = 0.0
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            xij = X[i, j]
            z += np.sin(xij * w[j]) * xij
    return z


def test_a_user_variable_read_only_after_its_element_read():
    """``xij = X[i, j]`` is the user's variable, read only after it in the same block: it
    lives like a temporary (``_block_local``) and nothing is taped."""
    X = np.linspace(0.1, 1.2, 12).reshape(3, 4)
    g, _, _ = check_against_oracle(user_local, (X, np.linspace(-1.0, 1.0, 4)), coarse=False)
    assert g.tape_bytes == 0, g.tape_bytes


def view_reads(X, w):
    V = X.T
    out = np.zeros(V.shape[0])
    z = 0.0
    for i in range(V.shape[0]):
        for j in range(V.shape[1]):
            t = V[i, j]
            z = np.sin(z * t) + w[j] * t
        out[i] = z
    return np.sum(out * out)


def test_an_element_of_a_view_of_an_unwritten_parameter_is_reread():
    """``V = X.T`` is a view of a parameter nothing writes (``_unwritten_view``; ``out`` is
    written, but it is no view of ``X``): the reverse sweep re-reads ``V[i, j]`` instead of
    taping ``t``; two floats a trip remain (``z`` and ``sin``'s operand)."""
    X = np.linspace(0.1, 1.2, 12).reshape(4, 3)
    g, _, _ = check_against_oracle(view_reads, (X, np.linspace(-1.0, 1.0, 4)), coarse=False)
    assert g.tape_bytes == 8 * 2 * X.size, g.tape_bytes


def inactive_rebound(x, c):
    C = c * 1.0
    z = x
    for k in range(3):
        t = C[k]
        z = np.sin(z * t) + t
        C = C * 0.5 + 0.1
    return z


def test_an_inactive_array_rebound_in_a_loop_is_not_recorded():
    """``C`` (not differentiated) is rebound on every trip: the reverse sweep tapes the one
    element each trip reads, and does not record ``C``'s bindings to re-read it
    (``recorded_rebound``: only differentiated arrays), which would save all of ``C`` a trip."""
    c = np.linspace(0.5, 1.5, 50)
    for coarse in (False, True):
        g, _, _ = check_against_oracle(inactive_rebound, (0.7, c), wrt="x", coarse=coarse)
        assert "_push_array" not in g.source, g.source
        assert g.tape_bytes < 8 * c.size, g.tape_bytes


def test_rows_of_a_history_array_filled_once_save_nothing():
    """The heat equation's history ``u[t + 1, i] = ...`` fills each row once and reads only
    rows already written: its row stores find ``u`` pending at no visit of their loop
    (``tape_sites``' row stores) and save nothing."""
    g, _, _ = check_against_oracle(heat_rows, _heat_rows_args(), wrt=("u0", "kappa"))
    assert g.tape_bytes == 0, g.tape_bytes


def last_positive(w):
    s = 0.0
    for i in range(w.shape[0]):
        if w[i] > 0.5:
            k = i + 1
        s = s + w[i] * w[i]
    for j in range(3):
        s = np.sin(s) * w[k - 1]
    return s


def test_an_index_read_after_its_loop_is_not_evaluated_again():
    """``k = i + 1`` is read after the loop that assigns it, by another loop: evaluating it
    again in the reverse sweep would take ``i``'s last value, not the one of the trip that
    assigned ``k`` (``find_int_recomputable``: every read later in the same block)."""
    w = np.array([0.3, 0.8, 0.9, -0.4, 0.2])
    check_against_oracle(last_positive, (w,), coarse=False)
    check_against_oracle(last_positive, (w,), target="cpu")


def reread_loop_after(a, x):
    s = 0.0
    k = 0
    for it in range(2):
        t = a[k]
        for j in range(3):
            s = np.sin(s * t) + x
            k = k + 1
    return s


def test_a_loop_that_uses_the_read_and_moves_its_index_tapes_it():
    """After ``t = a[k]`` a loop uses ``t`` and advances ``k``: a later trip's use follows an
    earlier trip's ``k = k + 1``, whatever their order in the body, so ``a[k]`` read again in
    the reverse sweep would be another element (``_written_before_use``'s loop rule)."""
    a = np.linspace(0.2, 1.2, 7)
    for coarse in (False, True):
        check_against_oracle(reread_loop_after, (a, 0.3), coarse=coarse)


def chase(w, nxt):
    s = 0.0
    k = 0
    for it in range(w.shape[0]):
        t = nxt[k]
        k = t
        s = np.sin(s + w[k]) * w[t]
    return s


def test_a_read_whose_index_is_moved_by_its_own_use_is_taped():
    """``k = t`` both uses ``t = nxt[k]`` and moves ``k``, and ``w[t]`` is read after it:
    ``nxt[k]`` read again there would follow the chain one step further."""
    w = np.array([0.3, 0.8, 0.9, -0.4, 0.2])
    nxt = np.array([2, 4, 1, 0, 3])
    for coarse in (False, True):
        check_against_oracle(chase, (w, nxt), wrt="w", coarse=coarse)


def rebound_param(w, c):
    s = 0.0
    for k in range(3):
        s = s + np.sum(w * c)
        c = c * 0.5 + 0.1
    return s


def test_a_parameter_rebound_in_a_loop_is_recorded():
    """``c``, a parameter not differentiated, is rebound on every trip after ``w``'s adjoint
    reads it: only a parameter never assigned keeps its value (``to_be_recorded``), so each
    rebinding saves ``c`` and the reverse sweep reads the trip's own ``c``."""
    check_against_oracle(rebound_param, (np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5)),
                         wrt="w", coarse=False)


def branch_rebound(w, c):
    s = np.sum(w * c)
    if s > 0.0:
        c = c * 0.5
    return s * 2.0 + c[0]


def loop_then_read(w, c):
    for k in range(3):
        c = c * 0.5 + 0.1
    return np.sum(w * c)


def test_an_array_is_recorded_where_a_later_assignment_rebinds_it():
    """``to_be_recorded``: the branch rebinds ``c`` after the reverse-read ``np.sum(w * c)``
    (later in program order, no loop around both): ``c`` is saved there.  Read after the loop
    that rebinds it, only its last value is read: nothing is saved."""
    w, c = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 1.5, 5)
    check_against_oracle(branch_rebound, (w, c), wrt="w", coarse=False)
    g, _, _ = check_against_oracle(loop_then_read, (w, c), wrt="w", coarse=False)
    assert g.tape_bytes == 0, g.tape_bytes


# full_overwrites: a range loop that writes every element of a 1-D array made by np.zeros(n)
# and the like serves the reverse reads before it with its own saves, so a store after it
# saves nothing.  Each guard keeps a partial overwrite out: there the store after the loop
# overwrites an element read before the loop and must save it.

def refill(x):
    n = x.shape[0]
    a = np.zeros(n)
    s = 0.0
    for t in range(3):
        for j in range(n):
            a[j] = x[j] * (t + 1.0)
        a[0] = x[0] * 3.0
        s = s + np.sum(np.sin(a) * x)
    return s


def refill_const(x):
    a = np.zeros(6)
    s = 0.0
    for t in range(3):
        for j in range(6):
            a[j] = x[j] * (t + 1.0)
        a[0] = x[0] * 3.0
        s = s + np.sum(np.sin(a) * x)
    return s


@pytest.mark.parametrize("fn", [refill, refill_const], ids=["n", "constant"])
def test_a_store_after_a_loop_that_overwrites_every_element_saves_nothing(fn):
    """``for j in range(n): a[j] = ...`` with ``a = np.zeros(n)`` (``n`` a dimension, or an
    int constant): ``a[0] = ...`` after it overwrites an element the loop wrote (and saved),
    so it saves nothing itself."""
    g, _, _ = check_against_oracle(fn, (np.linspace(0.2, 1.1, 6),), coarse=False)
    assert "_ftape[_fpos] = a[j]" in g.source, g.source
    assert "_ftape[_fpos] = a[0]" not in g.source, g.source


def from_one(x):
    n = x.shape[0]
    a = np.zeros(n)
    s = 0.0
    for t in range(3):
        for j in range(1, n):
            a[j] = x[j] * (t + 1.0)
        a[0] = x[0] * (t + 3.0)
        s = s + np.sum(np.sin(a) * x)
    return s


def shrink_n(x):
    m = x.shape[0]
    n = m
    a = np.zeros(n)
    for j in range(n):
        a[j] = x[j] * x[j]
    s = np.sum(np.sin(a) * x)
    if x[0] > 0.0:
        n = n - 1
    for j in range(n):
        a[j] = x[j] * 2.0
    a[m - 1] = 5.0
    return s + np.sum(a * a)


def maybe_fresh(x, a):
    n = x.shape[0]
    s = np.sum(np.sin(a)) * x[0]
    if x[0] > 5.0:
        a = np.zeros(n)
    for j in range(n):
        a[j] = x[j] * 2.0
    a[n + 1] = 3.0
    return s + np.sum(a * a)


def multi_def(x):
    n = x.shape[0]
    a = np.zeros(n)
    if x[0] > 0.0:
        a = np.ones(n + 2) * x[1]
    s = np.sum(np.sin(a)) * x[0]
    for j in range(n):
        a[j] = x[j] * 2.0
    a[n + 1] = 3.0
    return s + np.sum(a * a)


def other_length(x, w):
    n = w.shape[0]
    m = x.shape[0]
    a = np.zeros(m)
    for j in range(m):
        a[j] = x[j] * x[j]
    s = np.sum(np.sin(a)) * x[0]
    for j in range(n):
        a[j] = x[j] * 2.0
    a[m - 1] = 3.0
    return s + np.sum(a * a)


def sqrt_bound(x):
    n = x.shape[0]
    a = np.zeros(n)
    for j in range(n):
        a[j] = x[j] * x[j]
    s = np.sum(np.sin(a) * x)
    for j in range(int(np.sqrt(n))):
        a[j] = x[j] * 2.0
    a[n - 1] = 3.0
    return s + np.sum(a * a)


_x6 = np.linspace(0.2, 1.1, 6)
PARTIAL = {
    "from_one": (from_one, (_x6,), None),                   # the loop starts at 1
    "shrink_n": (shrink_n, (_x6,), None),                   # n assigned twice (fixed)
    "maybe_fresh": (maybe_fresh, (np.linspace(0.2, 1.1, 4), np.linspace(-0.5, 0.9, 6)), None),
    "multi_def": (multi_def, (_x6,), None),                 # a assigned twice
    "other_length": (other_length, (_x6, np.linspace(-0.5, 0.9, 4)), "x"),   # zeros(m), range(n)
    "sqrt_bound": (sqrt_bound, (_x6,), None),               # the bound is int(sqrt(n)), not a copy of n
}


@pytest.mark.parametrize("name", list(PARTIAL))
def test_a_loop_that_overwrites_part_of_an_array_keeps_the_later_store_saving(name):
    """Each loop writes only part of ``a`` (it starts at 1; its ``n`` is reassigned; ``a``
    is a parameter bound to ``np.zeros(n)`` only in a branch not taken; ``a`` has a second,
    longer binding; ``a`` is ``np.zeros(m)``, the loop ``range(n)``, ``n < m``; the bound is
    ``int(np.sqrt(n))``, which ``n`` reaches through operations, not copies): the store
    after it overwrites an element the reverse sweep reads before the loop, so it saves it."""
    fn, args, wrt = PARTIAL[name]
    check_against_oracle(fn, args, wrt=wrt, coarse=False)


def refill_read(x):
    n = x.shape[0]
    a = np.zeros(n)
    s = 0.5
    for t in range(3):
        for j in range(n):
            a[j] = x[j] * (t + 1.0)
            s = np.sin(s * a[j])
        a[0] = x[0] * 3.0
        s = s + np.sum(np.sin(a) * x)
    return s


def test_a_loop_that_overwrites_every_element_and_reads_it_keeps_the_later_store_saving():
    """The loop writes every element of ``a`` but its own trips read them too (``sin(s *
    a[j])``): ``a`` stays pending after it (``tape_sites``: only the reads before the loop
    are served by its saves), and ``a[0] = ...`` after it saves the element trip 0 read."""
    g, _, _ = check_against_oracle(refill_read, (np.linspace(0.2, 1.1, 6),), coarse=False)
    assert "_ftape[_fpos] = a[0]" in g.source, g.source


# find_cheap_recomputable: only a compiler temporary assigned once qualifies, and only where
# no element under it changes before a use

def carried_user(a, x):
    s = 0.5
    for i in range(a.shape[0]):
        if i > 0:
            s = s + np.sin(u * s)
        u = x * a[i]
    return s + u


def two_arms(A, x, c):
    s = 0.5
    for i in range(A.shape[0]):
        s = s + np.sin(s * (x * A[i] if c[i] > 0.0 else 2.0 * A[i]))
    return s


def zero_at(v, k, t):
    v[k] = 0.5
    return np.sin(t * t)


def helper_arg(a, x):
    s = 0.5
    for k in range(a.shape[0]):
        s = s + zero_at(a, k, x * a[k]) * s
    return s + np.sum(a)


def test_a_user_variable_read_on_the_next_trip_is_not_evaluated_again():
    """``u = x * a[i]`` is the user's, read on the next trip: evaluated again in the reverse
    sweep it would read ``a[i]`` of the wrong trip (``is_temp``)."""
    check_against_oracle(carried_user, (np.array([0.4, -0.7, 1.1, 0.3]), 0.9), coarse=False)


def test_a_temporary_of_a_conditional_expression_is_not_evaluated_again():
    """``x * A[i] if c[i] > 0.0 else 2.0 * A[i]`` is one temporary assigned in both arms:
    evaluating one arm's operation again would be wrong for the trips of the other
    (``facts.defs != 1``)."""
    check_against_oracle(two_arms, (np.array([0.4, -0.7, 1.1, 0.3]), 0.9,
                                    np.array([1.0, -1.0, 1.0, -1.0])), wrt=("A", "x"), coarse=False)


def test_a_temporary_whose_element_a_helper_overwrites_is_not_evaluated_again():
    """The argument ``x * a[k]`` is a temporary used by the inlined helper after it writes
    ``a[k]``: evaluated again at that use it would read the new element (``leaves``: the
    element reads under a temporary are checked, not only its direct operands)."""
    check_against_oracle(helper_arg, (np.array([0.4, -0.7, 1.1, 0.3]), 0.9), coarse=False)


def inner_dim(x, w):
    s = 0.5
    for t in range(w.shape[0] - 1):
        for j in range(x.shape[0]):
            s = np.sin(s * x[j]) + w[t + 1]
    return s


def test_index_arithmetic_and_a_dimension_in_a_loop_are_evaluated_again():
    """``x.shape[0]`` (the inner bound, assigned on every outer trip: a parameter's dimension,
    ``operand_ok``) and ``t + 1`` (a loop index assigned once) are evaluated again in the
    reverse sweep: nothing goes on the int tape."""
    g, _, _ = check_against_oracle(inner_dim, (np.linspace(0.2, 1.1, 5), np.linspace(-0.5, 0.9, 3)),
                                   coarse=False)
    assert "_itape[_ipos] =" not in g.source, g.source
