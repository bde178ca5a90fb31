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
