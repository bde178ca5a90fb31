"""Randomized differential tests of ``coarsen.jvp``, coarse and fine, on the three fuzz
families (``tests/progen.py``, ``progen_reductions.py``, ``progen_recurrences.py``).

Each program is first checked as ``tests/endtoend/test_fuzz.py`` checks it (coarse and fine gradients
against the extended-precision oracle; a discarded seed is replaced deterministically), then
``progen.check_jvp``: the JVP's value against the program's, its tangent along a fixed
direction against the checked gradient's dot product with it, in both modes.  The fixed seeds
reach closed-form loops and blocks that go through their partials
(``test_seeds_reach_coarse_tangents``), and one seed runs on the ``cpu`` target.

Larger soaks: ``python tests/fuzz_soak.py --jvp [--family F] --count N --seed S``.
"""
import pytest

import coarsen
from tests.progen import check_seed_with_oracle, generate, jvp_direction
from tests.progen_recurrences import generate_recurrences
from tests.progen_reductions import generate_reductions

FAMILIES = {"mixed": generate, "reductions": generate_reductions,
            "recurrences": generate_recurrences}
SEEDS = [("mixed", s) for s in (0, 6, 7, 9, 10)] + \
    [("reductions", s) for s in (5, 7, 8, 11)] + [("recurrences", s) for s in (1, 4, 8)]


@pytest.mark.parametrize("family,seed", SEEDS, ids=[f"{f}-{s}" for f, s in SEEDS])
def test_jvp_python(family, seed):
    _, out, _ = check_seed_with_oracle(seed, make=FAMILIES[family], jvp=True)
    assert out.status == "ok" and out.oracle, (seed, out)


def test_jvp_cpu():
    # mixed seed 7: a loop in closed form (its tangent too) on the cpu target
    _, out, _ = check_seed_with_oracle(7, targets=("python", "cpu"),
                                       modes={"python": (True,), "cpu": (True,)}, jvp=True)
    assert out.status == "ok" and out.oracle, out


def test_seeds_reach_coarse_tangents():
    closed = blocks = 0
    for family, seed in SEEDS:
        prog = FAMILIES[family](seed)
        fn = prog.load()
        _, grads = coarsen.differentiate(fn, target="python").value_and_grad(*prog.make_args())
        j = coarsen.jvp(fn, target="python")
        j(*prog.make_args(), tangents=tuple(jvp_direction(grads)))
        closed += j._last.stats["closed_forms"]
        blocks += j._last.stats["coarse_blocks"]
    assert closed >= 3 and blocks >= 8, (closed, blocks)
