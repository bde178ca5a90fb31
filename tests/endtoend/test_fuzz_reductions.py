"""Randomized differential tests of reduction loops (``tests/progen_reductions.py``).

The second fuzz family writes programs shaped like losses over data: loops over an array whose
trips interact through accumulators, with nested loops (pairs ``range(i + 1, m)``, double
sums, dot products into a trip-local sum), private scratch arrays, accumulation chains, element
writes at the trip's index, and the negative cases the reduction analysis must refuse (a
second accumulator, ``*=``/``max`` updates, a carried recurrence, a read of the accumulator, a
write at another trip's index, ``continue``).

* ``test_reductions_python``: fixed seeds on the ``python`` target, coarse and fine, against
  the oracle (a discarded seed is replaced deterministically, as in ``tests/endtoend/test_fuzz.py``);
* ``test_reductions_cpu``: a few of them on ``cpu`` too (one Numba compile each);
* ``test_family_reaches_the_reduction_analysis``: the fixed seeds do exercise what they are
  for: enough of their gradients reverse a loop trip by trip (``fused``) and nest an inner
  loop into it, else the tests above would pass on nothing;
* ``test_family_is_deterministic_and_runs``: same seed, same program; every fixed program
  runs in plain Python.

Larger soaks: ``python tests/fuzz_soak.py --family reductions --count 400 --seed S``.
"""
import collections

import pytest

import coarsen
from tests import progen_generate
from tests.progen import check_seed_with_oracle, prescreen
from tests.progen_reductions import generate_reductions

# seeds 100..139: their gradients reverse 26 loops trip by trip and nest 5 (0..39: 13 and 1)
PY_SEEDS = list(range(100, 140))
CPU_SEEDS = [7_000_000 + k for k in range(4)]
FUSED = "a reduction loop into"
NESTED = "nested in a reduction loop"


def _checked(seed, **kw):
    prog, out, _ = check_seed_with_oracle(seed, make=generate_reductions, **kw)
    assert out.status == "ok" and out.oracle, (seed, out)
    return prog


@pytest.mark.parametrize("seed", PY_SEEDS)
def test_reductions_python(seed):
    _checked(seed)


@pytest.mark.parametrize("seed", CPU_SEEDS)
def test_reductions_cpu(seed):
    _checked(seed, targets=("python", "cpu"), modes={"python": (True, False), "cpu": (True,)})


#: programs whose adjoint sums lane_sums adds in lanes once their arrays hold 8 to 20 values
LANE_SEEDS = [7_100_000, 7_100_008, 7_100_013, 7_100_029]


@pytest.mark.parametrize("seed", LANE_SEEDS)
def test_reductions_on_long_arrays_cpu(seed, monkeypatch):
    # from eight terms on the lanes add in another order than the loop: the oracle, and fine
    # mode on python, still agree with the cpu gradient
    monkeypatch.setattr(progen_generate, "LENGTHS", (8, 20))
    prog = _checked(seed, targets=("python", "cpu"), modes={"python": (True, False), "cpu": (True,)})
    assert 8 <= len(prog.a) <= 20
    src = coarsen.differentiate(prog.load(), target="cpu").source_for(*prog.make_args())
    assert "_sum_acc(" in src, seed


def test_family_reaches_the_reduction_analysis():
    counts = collections.Counter()
    for seed in PY_SEEDS:
        prog = generate_reductions(seed)
        g = coarsen.differentiate(prog.load(), target="python")
        g(*prog.make_args())
        counts["fused"] += FUSED in g.source
        counts["nested"] += NESTED in g.source
        counts["not fused"] += FUSED not in g.source
    print(f"\nreduction family, {len(PY_SEEDS)} fixed programs: {dict(counts)}")
    # both sides of the analysis: loops it reverses trip by trip, and loops it refuses
    assert counts["fused"] >= 20, counts
    assert counts["nested"] >= 4, counts
    assert counts["not fused"] >= 10, counts


def test_family_is_deterministic_and_runs():
    feats = collections.Counter()
    for seed in PY_SEEDS:
        prog = generate_reductions(seed)
        assert prog.source == generate_reductions(seed).source
        plain = generate_reductions(seed, adversarial=False)
        assert prog.load()(*prog.make_args()) == plain.load()(*plain.make_args()), seed
        out = prescreen(prog)
        assert not (out.why or "").startswith(("primal raised", "primal returned")), (seed, out)
        feats.update(prog.features)
    want = {"red_nested": 10, "red_nested_deep": 5, "red_dot": 5, "red_chain": 5,
            "red_branch": 10, "red_write": 1, "red_continue": 1, "red_scratch": 1,
            "red_carried": 1, "adversarial_names": 20}
    low = {f: feats[f] for f, k in want.items() if feats[f] < k}
    assert not low, (low, feats)
