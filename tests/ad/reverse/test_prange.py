"""``numba.prange`` reduction loops, differentiated in parallel.

A ``prange`` loop whose trips interact only through one accumulation (``s += e``,
``coarsen.analysis.reductions``) runs its fused trips (each reversed right after it runs) in
at most 128 blocks, in parallel on the CPU, combined in block order
(``coarsen.ad.reverse.parallel``): the result is the same, bit for bit, on both targets and for
every thread count.  A ``prange`` loop the analysis cannot run in parallel is differentiated
serially, as ``range`` (its sequential meaning), and the report says so.  Every program is
checked against the extended-precision oracle.
"""
import math
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba import prange

import coarsen
from coarsen import CoarsenError
from tests.oracle import check_against_oracle


def logreg(w, b, X, y):
    """Logistic regression over data points."""
    total = 0.0
    for i in prange(X.shape[0]):
        z = b
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        p = 1.0 / (1.0 + math.exp(-z))
        total -= y[i] * math.log(p) + (1.0 - y[i]) * math.log(1.0 - p)
    return total / X.shape[0]


def scratch_loss(a, x):
    """A loss over data points with a private scratch array (written in full, then read and
    updated in place); ``x`` is differentiated too, each trip in its own row."""
    d = x.shape[1]
    q = np.zeros(d)
    total = 0.0
    for i in numba.prange(x.shape[0]):
        for j in range(d):
            q[j] = math.exp(a[j]) * x[i, j]
        for j in range(1, d):
            q[j] += 0.5 * q[j - 1]
        s = 0.0
        for j in range(d):
            s += q[j] * q[j]
        total += math.log(1.0 + s)
    return total


def monte_carlo(mu, sigma, z):
    """Monte-Carlo paths of a geometric random walk and a call payoff: each trip tapes its
    path (the recurrence has no closed form in ``sigma``) and pops it in the same trip."""
    steps = z.shape[1]
    total = 0.0
    for p in prange(z.shape[0]):
        x = 1.0
        for t in range(steps):
            x = x * math.exp(mu + sigma * z[p, t] - 0.5 * sigma * sigma)
        total += max(x - 0.9, 0.0)
    return total / z.shape[0]


def hinge(w, X, c):
    """A loop from 1, a branch in the trip, the accumulator decreasing."""
    loss = c
    for i in prange(1, X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        if z > 0.4:
            loss -= z * z
        else:
            loss -= math.sin(z) * c
    return loss


def stable_logloss(w, X, y):
    """The logistic loss in its overflow-free two-branch form: a temporary of each branch's
    forward step is read by the same branch of the reverse step."""
    total = 0.0
    for i in prange(X.shape[0]):
        z = 0.0
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        if z > 0:
            total += (1.0 - y[i]) * z + math.log1p(math.exp(-z))
        else:
            total += -y[i] * z + math.log1p(math.exp(z))
    return total


def stable_logloss_renamed(_t13, z_bar, _blk1):
    """``stable_logloss`` with the compiler's own spellings for names (metamorphic)."""
    _ret = 0.0
    for _t10 in prange(z_bar.shape[0]):
        _t19 = 0.0
        for _sum9 in range(z_bar.shape[1]):
            _t19 += _t13[_sum9] * z_bar[_t10, _sum9]
        if _t19 > 0:
            _ret += (1.0 - _blk1[_t10]) * _t19 + math.log1p(math.exp(-_t19))
        else:
            _ret += -_blk1[_t10] * _t19 + math.log1p(math.exp(_t19))
    return _ret


def test_branch_temporaries_in_the_parallel_body_fine_grained():
    """Numba's parfors ignore definitions on paths that may not run (numba#9256): fine-grained,
    the cpu target's gradient was off by 0.83 (the python target and a serial njit of the same
    generated text were right).  Each trip now defines those temporaries first."""
    rng = np.random.default_rng(42)
    args = (rng.normal(size=3), rng.normal(size=(8, 3)), (rng.random(8) < 0.5).astype(np.float64))
    results = {}
    for target in ("python", "cpu"):
        g, value, grads = check_against_oracle(stable_logloss, args, target, "w", coarse=False)
        assert "differentiated in parallel" in str(g.report())
        results[target] = _bits(value, grads)
    assert results["python"] == results["cpu"]
    g = coarsen.differentiate(stable_logloss_renamed, wrt="_t13", coarsen=False)
    assert _bits(*g.value_and_grad(*args)) == results["cpu"]


def _data(seed, *shape):
    return np.random.default_rng(seed).uniform(0.1, 0.9, shape)


CASES = {
    logreg: (lambda: (_data(1, 3) - 0.5, 0.1, _data(2, 40, 3),
                      (np.random.default_rng(3).random(40) < 0.5).astype(np.float64)), ("w", "b")),
    scratch_loss: (lambda: (_data(4, 3) - 0.5, _data(5, 30, 3)), None),
    monte_carlo: (lambda: (0.01, 0.2, np.random.default_rng(6).normal(size=(37, 5))), None),
    hinge: (lambda: (_data(7, 2), _data(8, 25, 2), 0.3), None),
}


def _code(source):
    """The generated source without its comments (which quote the user's lines)."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def _parallel_body(source):
    """The code of the parallel loop: the function it is outlined into
    (``lowering.outline``), up to the next function."""
    return _code(source).split("numba.prange(")[1].split("\n@numba.njit")[0].split("if not _done")[0]


def _bits(value, grads):
    gs = grads if isinstance(grads, tuple) else (grads,)
    return [np.float64(value).tobytes()] + [np.asarray(g).tobytes() for g in gs]


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_oracle_both_targets_bit_identical(fn):
    make, wrt = CASES[fn]
    results = {}
    for target in ("python", "cpu"):
        g, value, grads = check_against_oracle(fn, make(), target, wrt)
        assert ("numba.prange(" in _code(g.source)) == (target == "cpu")
        if target == "cpu":
            # Numba runs a prange loop whose body raises serially: index checks call a helper
            assert "raise " not in _parallel_body(g.source)
        results[target] = _bits(value, grads)
        report = str(g.report())
        assert "differentiated in parallel, in at most 128 blocks" in report, report
    assert results["python"] == results["cpu"]


def test_parallel_decorator_only_where_needed():
    make, wrt = CASES[monte_carlo]
    g = coarsen.differentiate(monte_carlo, target="cpu")
    g(*make())
    src = _code(g.source)
    assert src.count("parallel=True") == 1
    par = src.split("parallel=True)\n")[1].split("\n@numba.njit")[0]
    assert "numba.prange(" in par and "_taped(" in par      # the taped gradient, not a helper
    # each block has its own tape: the loop body never touches the shared one
    body = _parallel_body(g.source)
    assert "_ftape =" not in body and "_fpos +=" not in body and "_ftape[" not in body
    assert "_fpos" in body                  # it does tape, into the block's own tape


_SUBPROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import coarsen
    sys.path.insert(0, {tests!r})
    from test_prange import CASES, logreg
    make, wrt = CASES[logreg]
    args = make()
    args = (args[0], args[1], np.vstack([args[2]] * 5), np.concatenate([args[3]] * 5))
    value, grads = coarsen.differentiate(logreg, wrt=wrt, target="cpu").value_and_grad(*args)
    print(float(value).hex(), [float(v).hex() for v in np.concatenate([grads[0], [grads[1]]])])
""")


def test_same_bits_for_one_and_two_threads(tmp_path):
    """The blocks and their order depend on the trip count only: one thread and two give the
    same bits (the second process loads the code the first compiled, from the same cache)."""
    env = dict(os.environ, COARSEN_CACHE_DIR=str(tmp_path / "cache"))
    code = _SUBPROCESS.format(tests=os.path.dirname(__file__))
    out = []
    for threads in ("1", "2"):
        env["NUMBA_NUM_THREADS"] = threads
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        out.append(run.stdout.strip().splitlines()[-1])
    assert out[0] == out[1]


# ------------------------------------------------------------------- serial, and refused

def not_a_reduction(x, y):
    """Trips write their own element of an output array: run serially, as range."""
    out = np.zeros(x.shape[0])
    for i in prange(x.shape[0]):
        out[i] = math.sin(x[i] * y)
    return np.sum(out * out)


def nested(x, y):
    s = 0.0
    for k in range(2):
        for i in prange(x.shape[0]):
            s += x[i] * y * (k + 1)
    return s


def read_before(x, y):
    s = x[0] * y
    w = s * s
    for i in prange(x.shape[0]):
        s += math.exp(x[i] * y)
    return s + w


def with_break(x, y):
    s = 0.0
    for i in prange(x.shape[0]):
        if x[i] > 0.8:
            break
        s += x[i] * y
    return s


SERIAL = {
    not_a_reduction: "serially: its trips interact other than through one accumulation",
    nested: "serially: inside another loop",
    read_before: "serially: the reverse sweep reads its accumulator before the loop",
    with_break: None,       # a loop with break becomes a while loop: serial, no note
}


@pytest.mark.parametrize("fn", list(SERIAL), ids=lambda f: f.__name__)
def test_serial_fallbacks(fn):
    args = (_data(9, 6), 0.7)
    g, _, _ = check_against_oracle(fn, args, "python")
    report = str(g.report())
    if SERIAL[fn] is not None:
        assert SERIAL[fn] in report, report
    assert "in parallel" not in report
    assert "_nblocks" not in g.source        # no blocks: the loop runs as range


def _own_prange():
    def prange(n):          # the user's own function, not numba's
        return range(n)

    def f(x):
        s = 0.0
        for i in prange(x.shape[0]):
            s += x[i] * x[i]
        return s
    return f


def test_user_function_named_prange_is_not_numbas():
    f = _own_prange()
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(f, target="python")(_data(10, 4))
    err = info.value
    assert err.lineno is not None and err.col_offset is not None and err.filename
    assert "range" in str(err)


def prange_value(x):
    r = prange(x.shape[0])
    s = 0.0
    for i in r:
        s += x[i]
    return s


def test_prange_outside_a_loop_header_is_refused():
    with pytest.raises(CoarsenError) as info:
        coarsen.differentiate(prange_value, target="python")(_data(11, 3))
    assert "prange() is only supported as the iterable of a for loop" in str(info.value)
    assert info.value.lineno is not None


def logreg_renamed(_blk1, _parts2, _acc3, total_bar):
    """``logreg`` with the parallel loop's compiler names: the same bits."""
    _sum4 = 0.0
    for _lo5 in prange(_acc3.shape[0]):
        _ntrips6 = _parts2
        for _done7 in range(_acc3.shape[1]):
            _ntrips6 += _blk1[_done7] * _acc3[_lo5, _done7]
        _hi8 = 1.0 / (1.0 + math.exp(-_ntrips6))
        _sum4 -= total_bar[_lo5] * math.log(_hi8) + (1.0 - total_bar[_lo5]) * math.log(1.0 - _hi8)
    return _sum4 / _acc3.shape[0]


def test_renamed_is_bit_identical():
    make, _ = CASES[logreg]
    args = make()
    v0, g0 = coarsen.differentiate(logreg, wrt=(0, 1), target="python").value_and_grad(*args)
    v1, g1 = coarsen.differentiate(logreg_renamed, wrt=(0, 1), target="python").value_and_grad(*args)
    assert _bits(v0, g0) == _bits(v1, g1)


def logreg_range(w, b, X, y):
    """``logreg`` written with ``range``: serial by default, parallel with ``parallel=True``."""
    total = 0.0
    for i in range(X.shape[0]):
        z = b
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        p = 1.0 / (1.0 + math.exp(-z))
        total -= y[i] * math.log(p) + (1.0 - y[i]) * math.log(1.0 - p)
    return total / X.shape[0]


def test_parallel_option_runs_range_reduction_loops_in_blocks():
    """``differentiate(fn, parallel=True)``: a ``range`` reduction loop takes the same blocks
    as the ``prange`` loop, with the same bits; without the option it stays serial."""
    make, wrt = CASES[logreg]
    args = make()
    serial = coarsen.differentiate(logreg_range, wrt, target="cpu")
    assert "numba.prange(" not in _code(_src(serial, args))
    g = coarsen.differentiate(logreg_range, wrt, target="cpu", parallel=True)
    v, gr = g.value_and_grad(*args)
    assert "numba.prange(" in _code(_src(g, args))
    assert "differentiated in parallel, in at most 128 blocks" in str(g.report())
    ref = coarsen.differentiate(logreg, wrt, target="cpu")
    assert _bits(v, gr) == _bits(*ref.value_and_grad(*args))   # logreg: checked on the oracle


def _src(g, args):
    return g.specialize(args).source
