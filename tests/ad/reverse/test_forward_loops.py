"""Loops preaccumulated by forward mode (``coarsen.analysis.forward_loops``): a recurrence in a
few scalar inputs runs with one tangent lane per input and tapes nothing.  Gradients against
the extended-precision oracle, on both targets; which loops qualify, and which do not."""
import io
import math

import numpy as np
import pytest

import coarsen
from tests.oracle import check_against_oracle

YS = np.array([0.3, -0.1, 0.7, 0.2, -0.4, 0.9])


def kinds(g, args):
    return [e["kind"] for e in g.report(*args, file=io.StringIO())]


def filt(phi, q, r, ys):
    m = 0.0
    P = 1.0
    nll = 0.0
    for t in range(ys.shape[0]):
        m = phi * m
        P = phi * phi * P + q
        S = P + r
        e = ys[t] - m
        nll += 0.5 * (math.log(S) + e * e / S)
        gain = P / S
        m = m + gain * e
        P = (1.0 - gain) * P
    return nll


def filt_renamed(m_dot0_, P_dot1_, q_dot2_, ys):
    # the tangents' names taken by the user's variables
    m_dot1_ = 0.0
    P = 1.0
    nll_dot0_ = 0.0
    for t in range(ys.shape[0]):
        m_dot1_ = m_dot0_ * m_dot1_
        P = m_dot0_ * m_dot0_ * P + P_dot1_
        S = P + q_dot2_
        e = ys[t] - m_dot1_
        nll_dot0_ += 0.5 * (math.log(S) + e * e / S)
        gain = P / S
        m_dot1_ = m_dot1_ + gain * e
        P = (1.0 - gain) * P
    return nll_dot0_


def _predict(phi, q, m, P):
    return phi * m, phi * phi * P + q


def _update(m, P, S, e):
    gain = P / S
    return m + gain * e, (1.0 - gain) * P


def filt_helpers(phi, q, r, ys):
    # filt split into helpers (inlined before differentiation)
    m = 0.0
    P = 1.0
    nll = 0.0
    for t in range(ys.shape[0]):
        m, P = _predict(phi, q, m, P)
        S = P + r
        e = ys[t] - m
        nll += 0.5 * (math.log(S) + e * e / S)
        m, P = _update(m, P, S, e)
    return nll


def active_entry(phi, q, r, ys):
    # the carried state starts from a differentiated value: a lane of its own
    m = 0.5 * q
    for t in range(ys.shape[0]):
        if ys[t] > 0.0:
            m = phi * m + ys[t]
        else:
            m = m - r * ys[t] * m
    return m * m


def last_trip_local(phi, q, r, ys):
    # e (a trip's local) is read after the loop: its value at the last trip
    m = r
    for t in range(ys.shape[0]):
        e = ys[t] - phi * m
        m = m + q * e
    return m + e * e


def four_inputs(phi, q, r, ys):
    # four lanes (phi, q, r and the carried m's entry): reversed as usual
    m = r * q
    for t in range(ys.shape[0]):
        m = phi * m + q * ys[t] + r
    return m


def read_before(phi, q, r, ys):
    # m is read before the loop, and the reverse of math.tanh reads its result: the values
    # the loop overwrites are put back for them
    m = math.tanh(r)
    z = m * phi
    for t in range(ys.shape[0]):
        m = phi * m + q * ys[t]
    return m + z


def branch_before(phi, q, r, ys):
    # m, carried by the loop, is assigned before it in branches (not by a statement of the
    # body: the analysis does not prove it assigned, so it keeps no copy): not preaccumulated
    if phi > 0.5:
        m = math.tanh(r)
    else:
        m = 0.3 * q
    for t in range(ys.shape[0]):
        m = phi * m + ys[t]
    return m


@pytest.mark.parametrize("fn, target", [(filt, "python"), (filt, "cpu"), (filt_renamed, "python"),
                                        (active_entry, "python"), (last_trip_local, "python"),
                                        (read_before, "python"), (read_before, "cpu")])
def test_forward_loops_against_the_oracle(fn, target):
    args = (0.8, 0.3, 0.5, YS.copy())
    g, _, _ = check_against_oracle(fn, args, target=target, wrt=(0, 1, 2))
    assert "forward loop" in kinds(g, args)
    assert g.tape_bytes == 0


@pytest.mark.parametrize("fn, target", [(filt, "cpu"), (active_entry, "python")])
def test_a_loop_that_runs_no_trip(fn, target):
    args = (0.8, 0.3, 0.5, np.zeros(0))
    g, _, _ = check_against_oracle(fn, args, target=target, wrt=(0, 1, 2))
    assert "forward loop" in kinds(g, args)


def test_renaming_keeps_the_gradient():
    args = (0.8, 0.3, 0.5, YS.copy())
    a = coarsen.differentiate(filt, wrt=(0, 1, 2))(*args)
    b = coarsen.differentiate(filt_renamed, wrt=(0, 1, 2))(*args)
    assert a == b


@pytest.mark.parametrize("n", [1, 6, 200])
def test_helpers_and_lengths_keep_the_gradient(n):
    # the same filter split into helpers, on series of other lengths: the same loop by
    # forward mode, the same gradient as fine-grained AD
    ys = np.sin(0.7 * np.arange(n))
    args = (0.8, 0.3, 0.5, ys)
    whole = coarsen.differentiate(filt, wrt=(0, 1, 2))
    split = coarsen.differentiate(filt_helpers, wrt=(0, 1, 2))
    fine = coarsen.differentiate(filt, wrt=(0, 1, 2), coarsen=False)
    assert "forward loop" in kinds(split, args)
    np.testing.assert_allclose(split(*args), whole(*args), rtol=1e-14)
    np.testing.assert_allclose(whole(*args), fine(*args), rtol=1e-12)


@pytest.mark.parametrize("fn", [four_inputs, branch_before])
def test_loops_that_do_not_qualify(fn):
    args = (0.8, 0.3, 0.5, YS.copy())
    g, _, _ = check_against_oracle(fn, args, target="python", wrt=(0, 1, 2))
    assert "forward loop" not in kinds(g, args)


def test_only_coarse_mode_and_the_same_numbers_as_fine():
    args = (0.8, 0.3, 0.5, YS.copy())
    fine = coarsen.differentiate(filt, wrt=(0, 1, 2), coarsen=False)
    assert "forward loop" not in kinds(fine, args)
    coarse = coarsen.differentiate(filt, wrt=(0, 1, 2))
    np.testing.assert_allclose(coarse(*args), fine(*args), rtol=1e-13)


def test_hessian_of_a_forward_loop():
    # forward over reverse reads the generated gradient, tangent lanes included, back
    args = (0.8, 0.3, 0.5, YS.copy())
    h1 = coarsen.hessian(filt, wrt=(0, 1, 2))
    h2 = coarsen.hessian(filt, wrt=(0, 1, 2), method="reverse-over-forward")
    a = np.array(h1(*args), dtype=float)
    b = np.array(h2(*args), dtype=float)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert h1.method_used == "forward over reverse"
