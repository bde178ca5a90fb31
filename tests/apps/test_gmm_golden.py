"""ADBench GMM's generated gradient, pinned: its loop over data points reverses each point right
after its forward (``coarsen.analysis.reductions``), so the tapes hold one point's values and do
not grow with the number of points.

The golden file ``tests/golden/gmm_coarse_cpu.py`` is the cpu target's source with the default
cost weights (the tests' ``COARSEN_COST_WEIGHTS``; the harness uses the machine's), byte for byte; regenerate it with ``COARSEN_UPDATE_GOLDEN=1`` after an intended change
and review the diff.  Inside the point loop there is no tape reservation and no trip count on a
tape; what it still tapes, per mixture component, is the scratch vector ``qx`` (overwritten by
the next component, read back by this one's reverse), the packed index ``idx``, the branch
flags of the running maximum and the preaccumulated ``exp(main_term[k] - mx)``: the values a
hand-written gradient keeps in its ``(K, d)`` arrays.
"""
import os
import re

import numpy as np

import coarsen
from apps import gmm

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden", "gmm_coarse_cpu.py")


def _point_loop(src):
    """The text of the top-level ``for i in range(...)`` loop of the taped entry."""
    lines = src.splitlines()
    entry = next(k for k, ln in enumerate(lines) if ln.startswith("def value_and_grad_objective_taped("))
    start = next(k for k, ln in enumerate(lines) if k > entry and ln.startswith("    for i in range("))
    end = next(k for k in range(start + 1, len(lines))
               if lines[k].startswith("    ") and not lines[k].startswith("     "))
    return "\n".join(lines[start:end])


def test_gmm_gradient_source_is_pinned():
    g = coarsen.differentiate(gmm.objective, wrt=gmm.WRT)
    src = g.source_for(*gmm.make_inputs("s"))
    if os.environ.get("COARSEN_UPDATE_GOLDEN"):
        with open(GOLDEN, "w") as fh:
            fh.write(src)
    with open(GOLDEN) as fh:
        assert src == fh.read(), f"generated source changed: diff {GOLDEN}"
    loop = _point_loop(src)
    assert "# a reduction loop into slse: each trip is reversed right after it runs" in src
    assert "_reserve(" not in loop and "_push" not in loop
    # the reverse of each point's trip follows its forward in the same loop body: one pop per
    # push, one by one or, where the reverse loop reads the tape counting up, a loop's at once
    # (a loop that only pushes counts in an unsigned cursor ``_tc<k>``: tape_cursors)
    pushes = len(re.findall(r"_ftape\[(?:_fpos|_tc\d+)\] = ", loop))
    pops = loop.count("_fpos -= 1") + loop.count("_fpos = _fpos - max(") \
        + len(re.findall(r"= _ftape\[_tc\d+\]", loop))
    assert pops == pushes > 0


def test_gmm_tape_does_not_grow_with_the_points():
    alphas, means, icf, x, gamma, m = gmm.make_inputs("s")
    rng = np.random.default_rng(4)
    g = coarsen.differentiate(gmm.objective, wrt=gmm.WRT, target="python")
    sizes = []
    for n in (4, 40):
        xs = rng.uniform(size=(n, x.shape[1]))
        g(alphas, means, icf, xs, gamma, m)
        sizes.append(g.tape_bytes)
    assert sizes[0] == sizes[1] > 0, sizes
