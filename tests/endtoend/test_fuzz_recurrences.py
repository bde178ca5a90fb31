"""Randomized differential tests of recurrences (``tests/progen_recurrences.py``).

The third fuzz family writes loops that carry state through their trips in few inputs, as a
filter or an integrator does, reading data that is not differentiated: the loops coarsen
preaccumulates by forward mode (``coarsen.analysis.forward_loops``), and their negative cases
(a store, a fourth lane, a state set in branches before the loop, a read of a differentiated
array).

* ``test_recurrences_python``: fixed seeds on the ``python`` target, coarse and fine, against
  the oracle (a discarded seed is replaced deterministically, as in ``tests/endtoend/test_fuzz.py``);
* ``test_recurrences_cpu``: two of them on ``cpu`` too;
* ``test_family_reaches_forward_loops``: the fixed seeds exercise both sides: loops run with
  tangent lanes, and loops reversed as usual;
* ``test_family_is_deterministic_and_runs``: same seed, same program; every one runs.

Larger soaks: ``python tests/fuzz_soak.py --family recurrences --count 400 --seed S``.
"""
import collections

import pytest

import coarsen
from tests.progen import check_seed_with_oracle, prescreen
from tests.progen_recurrences import generate_recurrences

# seeds 0..23: 14 of their gradients run a loop by forward mode, 10 reverse it as usual
PY_SEEDS = list(range(24))
CPU_SEEDS = [8_000_000, 8_000_001]
FORWARD = "by forward mode"


def _checked(seed, **kw):
    prog, out, _ = check_seed_with_oracle(seed, make=generate_recurrences, **kw)
    assert out.status == "ok" and out.oracle, (seed, out)
    return prog


@pytest.mark.parametrize("seed", PY_SEEDS)
def test_recurrences_python(seed):
    _checked(seed)


@pytest.mark.parametrize("seed", CPU_SEEDS)
def test_recurrences_cpu(seed):
    _checked(seed, targets=("python", "cpu"), modes={"python": (True, False), "cpu": (True,)})


def test_family_reaches_forward_loops():
    counts = collections.Counter()
    for seed in PY_SEEDS:
        prog = generate_recurrences(seed)
        g = coarsen.differentiate(prog.load(), target="python")
        g(*prog.make_args())
        counts["forward" if FORWARD in g.source else "not forward"] += 1
    print(f"\nrecurrence family, {len(PY_SEEDS)} fixed programs: {dict(counts)}")
    assert counts["forward"] >= 10, counts
    assert counts["not forward"] >= 5, counts


def test_family_is_deterministic_and_runs():
    feats = collections.Counter()
    for seed in PY_SEEDS:
        prog = generate_recurrences(seed)
        assert prog.source == generate_recurrences(seed).source
        plain = generate_recurrences(seed, adversarial=False)
        assert prog.load()(*prog.make_args()) == plain.load()(*plain.make_args()), seed
        out = prescreen(prog)
        assert not (out.why or "").startswith(("primal raised", "primal returned")), (seed, out)
        feats.update(prog.features)
    want = {"rec_damped": 15, "rec_branch": 5, "rec_inner": 3, "rec_const_entry": 10,
            "rec_active_entry": 5, "adversarial_names": 10}
    low = {f: feats[f] for f, k in want.items() if feats[f] < k}
    assert not low, (low, feats)
