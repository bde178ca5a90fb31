"""``coarsen.analysis.recording``: the preconditions the mutation run
(``python -m tests.mutation coarsen/analysis/recording.py``) checks, pinned fast.

The analysis decides what the reverse sweep reads again from an array instead of taping it.
Either way the gradient is right (each program is checked against the oracle, python target),
so the tests also pin what the decision saves: the tape's size (``g.tape_bytes``) or the
reverse sweep's re-read in the generated source.
"""
import numpy as np

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
