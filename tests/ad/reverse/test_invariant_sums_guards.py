"""Invariant sums (coarsen.ad.reverse.invariant_sums): the guards the mutation run
(``python -m tests.mutation coarsen/ad/reverse/invariant_sums.py --guards-only``) left
unpinned.  Kept first in the run's list: a broken choice of the local's name would otherwise
show only as a run past the time limit."""
import numpy as np

from coarsen.ad.reverse.invariant_sums import invariant_sums

from tests.helpers_passes import rewrite

# the function's own ``_sum1``, live across the loop: the pass's local must take another name
OWN_NAME = """
def f(Y, n):
    G = np.zeros(3)
    _sum1 = Y[0] * 2.0
    for j in range(n):
        G[1] -= Y[j] * j
    return G, _sum1
"""


def test_the_local_takes_a_name_the_function_does_not_use():
    before, after, text = rewrite(OWN_NAME, invariant_sums, {"G"})
    assert "_sum2 = G[1]" in text and "_sum2 -= Y[j] * j" in text and "G[1] = _sum2" in text, text
    Y = np.arange(1.0, 6.0)
    for a, b in zip(before(Y, 5), after(Y, 5)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


# ---------------------------------------------------------------------------- sampled mutants
MEETS_LATER = """
def f(Y, n):
    A = np.zeros(n + 2)
    for i in range(n):
        for j in range(i, n):
            t = Y[i, j]
            A[i + 1] += t
            A[j] -= t * t
    return A
"""


def test_a_pair_loop_that_reaches_the_element_later_is_left_alone():
    """``j`` starts at ``i`` and reaches ``i + 1`` on the second trip: ``A[i + 1]`` is not
    held (held, the final store would drop the ``A[j]`` update at ``j = i + 1``)."""
    before, after, text = rewrite(MEETS_LATER, invariant_sums, {"A", "t"})
    assert "_sum" not in text, text
    Y = np.arange(1.0, 17.0).reshape(4, 4)
    assert before(Y, 4).tobytes() == after(Y, 4).tobytes()


def test_a_long_else_branch():
    """A branch of more than 256 statements around a rewritten loop: the blocks keep their
    lengths (compared as numbers: ints above 256 are distinct objects)."""
    filler = "".join(f"        z = z + {k}.0\n" for k in range(300))
    src = ("def f(Y, n, c):\n    G = np.zeros(3)\n    z = 0.0\n    if c:\n"
           "        for j in range(n):\n            G[1] += Y[j]\n    else:\n" + filler +
           "    return G, z\n")
    before, after, text = rewrite(src, invariant_sums, {"G"})
    assert "_sum1 += Y[j]" in text, text
    Y = np.arange(1.0, 6.0)
    for c in (True, False):
        for a, b in zip(before(Y, 5, c), after(Y, 5, c)):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


TRANSPOSED = """
def f(Y, n):
    A = np.zeros(3)
    V = A.T
    for j in range(n):
        A[1] += Y[j]
        V[1] += 1.0
    return A
"""


def test_an_array_reached_through_another_attribute_is_left_alone():
    """``A.T`` is a view: ``V[1]`` is ``A[1]``, so ``A[1]`` is not held in a local (only
    ``.shape`` reads nothing but the shape)."""
    before, after, text = rewrite(TRANSPOSED, invariant_sums, {"A"})
    assert "_sum" not in text, text
    Y = np.arange(1.0, 6.0)
    assert before(Y, 5).tobytes() == after(Y, 5).tobytes()
