"""A stencil line is one segment of interest, and its reverse step uses loop-invariant partials.

``u[t + 1, i] = u[t, i] + kappa * (u[t, i - 1] - 2.0 * u[t, i] + u[t, i + 1])`` (heat).  Its
index arithmetic ``i - 1``, ``i + 1`` rides along as passengers, and the element reads that use
them are passengers reading an earlier passenger's result: they join the segment
(``coarsen.analysis.segments``), where the two reads of ``u[t, i]`` share one symbol
(``coarsen.ad.lift.same_element_reads``).  The partial with respect to ``u[t, i]`` is then
``1 - 2*kappa``, which no trip changes: the cost model prices such code as evaluated once before
the loop (``coarsen.analysis.strategy.loop_invariant``), and prices the fine-grained reverse's
re-evaluation of ``u[t, i - 1] - 2 u[t, i] + u[t, i + 1]`` for kappa's partial, so the planner
recomputes the segment where it had stayed fine-grained (heat at size m: 76 to 63 us, the
hand-written gradient 59 us).  Checked against the extended-precision oracle and against fine
mode, with the user's names chosen like the compiler's, the terms in another order, the
stencil in a helper (the stencil and its variants from ``tests/endtoend/test_tape_rules_metamorphic.py``),
a chain of index arithmetic, and an index reassigned between two reads.
"""
import math
import re

import numpy as np
import pytest
import sympy

import coarsen
from coarsen.analysis.strategy import SegmentContext, loop_invariant
from tests.oracle import check_against_oracle
from tests.endtoend.test_tape_rules_metamorphic import (_history_args, history, history_helpers,
                                               history_renamed)


def heat_reordered(u0, kappa, nt):
    """``history`` (``tests/endtoend/test_tape_rules_metamorphic.py``) with the stencil's terms in
    another order."""
    nx = u0.shape[0]
    u = np.zeros((nt + 1, nx))
    for i in range(nx):
        u[0, i] = u0[i]
    for t in range(nt):
        for i in range(1, nx - 1):
            u[t + 1, i] = kappa * (u[t, i + 1] + u[t, i - 1] - u[t, i] * 2.0) + u[t, i]
    s = 0.0
    for i in range(nx):
        s += u[nt, i] * math.tanh(u[nt, i])
    return s


def index_chain(x, c, n):
    """Each read's index computed from the previous one's."""
    s = 0.0
    for i in range(n):
        j = i + 1
        k = j + 1
        s += x[i] * c + x[j] * x[k] - c * x[j] * x[i]
    return s


def index_reassigned(x, c, n):
    """The same spelling ``x[j]`` reads two elements: ``j`` changes between the reads."""
    s = 0.0
    for i in range(n):
        j = i
        a = x[j]
        j = i + 1
        b = x[j]
        s += c * a * b - a * x[j] * a
    return s


def _chain_args():
    return (np.array([0.3, -0.7, 1.1, 0.4, -0.2, 0.9, 0.5]), 1.3, 5)


CASES = [(history, _history_args), (history_renamed, _history_args),
         (heat_reordered, _history_args), (history_helpers, _history_args),
         (index_chain, _chain_args),
         (index_reassigned, _chain_args)]


@pytest.mark.parametrize("fn,make", CASES, ids=[f.__name__ for f, _ in CASES])
def test_against_the_oracle_and_fine_mode(fn, make):
    args = make()
    g, _, grads = check_against_oracle(fn, args, wrt=(0, 1))
    fine = coarsen.differentiate(fn, wrt=(0, 1), coarsen=False)(*make())
    for a, b in zip(grads, fine):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


def test_cpu_target_against_the_oracle():
    check_against_oracle(history, _history_args(), wrt=(0, 1), target="cpu")


def _stencil_plan(fn):
    import inspect
    g = coarsen.differentiate(fn, wrt=(0, 1))
    g(*_history_args())
    lines, first = inspect.getsourcelines(fn)
    line = first + next(k for k, text in enumerate(lines) if "u[t + 1, i] = u[t, i] + kappa" in text)
    text = str(g.report())
    found = re.findall(rf"segment \d+ \(line {line}, block\)(.*?)\n(.*?)\n", text)
    return found, text


def test_the_stencil_line_is_one_recomputed_segment():
    found, text = _stencil_plan(history)
    assert len(found) == 1, text
    head, strategy = found[0]
    assert "out (" in head, text
    assert "strategy recompute" in strategy, text


def test_loop_invariant_code():
    k, a, b = sympy.symbols("k a b", real=True)
    t0 = sympy.Symbol("t0", real=True)
    keep = [(t0, 2 * k + 1)]
    exprs = [1 - 2 * k, k * a, t0 * b, sympy.Integer(3), sympy.exp(k)]
    inv, inv_exprs = loop_invariant(keep, exprs, SegmentContext(True, frozenset(), frozenset({"k"})))
    assert inv == {t0}
    # a call (exp) is not assumed hoisted; a number costs nothing anyway
    assert inv_exprs == {0}
    # outside a loop, or with no invariant input, nothing is
    assert loop_invariant(keep, exprs, SegmentContext(False, frozenset(), frozenset({"k"}))) == (set(), set())
    assert loop_invariant(keep, exprs, SegmentContext(True, frozenset(), frozenset())) == (set(), set())
