"""Nested reduction loops (``coarsen.analysis.reductions``, ``ReductionLoop.nested``): a loop
in a reduction loop's body that accumulates into the same accumulator (a double sum, the
pairs of a pair potential) has its trips reversed right after they run too, with nothing
taped.  Where the inner loop reads a value of the outer trip, stores into an array, or
leaves a value read after it, it is reversed as before.  Every case against the oracle on
both targets; renaming changes nothing, bit for bit; parallel outer loops keep their inner
loops as before."""
import math

import numpy as np
import pytest

import coarsen
from tests.zoo.harness import check_value_and_grad


def double_sum(W, v, c):
    s = 0.0
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            s += math.sin(W[i, j] * v[j]) * c
    return s


def double_sum_renamed(s_bar, _t1, W_bar):
    _acc1 = 0.0
    for i in range(s_bar.shape[0]):
        for _g2 in range(s_bar.shape[1]):
            _acc1 += math.sin(s_bar[i, _g2] * _t1[_g2]) * W_bar
    return _acc1


def pairs(W, v, c):
    """Lennard-Jones' shape: pairs j > i, locals in the inner trip, a branch."""
    e = 0.0
    for i in range(W.shape[0]):
        for j in range(i + 1, W.shape[0]):
            d = W[i, 0] - W[j, 0]
            r2 = d * d + (W[i, 1] - W[j, 1]) ** 2 + c
            if r2 > 1.0:
                e += 1.0 / r2
            else:
                e += math.exp(-r2) * v[0]
    return e


def inner_reads_outer_local(W, v, c):
    """The inner loop reads ``z``, a value of the outer trip: not nested."""
    s = 0.0
    for i in range(W.shape[0]):
        z = math.tanh(W[i, 0] * c)
        for j in range(W.shape[1]):
            s += z * W[i, j] * v[j]
    return s


def inner_then_more(W, v, c):
    """Statements of the outer trip before and after the inner loop (reading no inner local):
    SSA names the sum anew (``s_2 = s + ...``, the inner loop adds to ``s_2``, then
    ``s = s_2 - ...``), an accumulation chain."""
    s = 0.0
    for i in range(W.shape[0]):
        s += W[i, 0] * c
        for j in range(W.shape[1]):
            t = W[i, j] * v[j]
            s += t * t
        s -= math.cos(W[i, 1] + c)
    return s


def inner_local_read_after(W, v, c):
    """``t`` of the inner loop's last trip is read after it: not nested."""
    s = 0.0
    for i in range(W.shape[0]):
        t = 0.0
        for j in range(W.shape[1]):
            t = W[i, j] * v[j]
            s += math.sin(t)
        s += t * c
    return s


def inner_stores(W, v, c):
    """The inner loop fills a scratch row: not nested."""
    s = 0.0
    row = np.zeros(W.shape[1])
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            row[j] = W[i, j] * c
            s += row[j] * v[j]
    return s


def three_deep(W, v, c):
    s = 0.0
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            for k in range(2):
                s += math.sin(W[i, j] + k * v[j]) * c
    return s


def _args():
    r = np.random.default_rng(5)
    return (r.normal(size=(4, 3)), r.normal(size=3), 0.7)


CASES = [double_sum, double_sum_renamed, pairs, inner_reads_outer_local, inner_then_more,
         inner_local_read_after, inner_stores, three_deep]


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_against_the_oracle(fn, target, coarse):
    check_value_and_grad(fn, _args, None, target, coarse, f"{fn.__name__}-{target}-{coarse}")


@pytest.mark.parametrize("fn, nested", [(double_sum, True), (pairs, True),
                                        (three_deep, True), (inner_then_more, True),
                                        (inner_reads_outer_local, False),
                                        (inner_local_read_after, False), (inner_stores, False)],
                         ids=lambda x: getattr(x, "__name__", str(x)))
def test_which_loops_nest(fn, nested):
    g = coarsen.differentiate(fn, target="python")
    g(*_args())
    assert ("nested in a reduction loop" in g.source) is nested
    if nested:
        assert "_ftape" not in g.source


def test_renamed_bit_for_bit():
    a = coarsen.differentiate(double_sum, target="python")(*_args())
    b = coarsen.differentiate(double_sum_renamed, target="python")(*_args())
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_parallel_outer_loop_keeps_its_inner_loops():
    g = coarsen.differentiate(double_sum, parallel=True)
    got = g(*_args())
    ref = coarsen.differentiate(double_sum, target="python")(*_args())
    assert "nested in a reduction loop" not in g.source
    for x, y in zip(got, ref):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)


# ------------------------------------------------------------------ generated double loops
_TERMS = ["W[i, j]", "v[j]", "c", "W[i, 0]", "v[0]", "W[j % W.shape[0], 1]", "t", "z"]
_WRAP = ["math.sin({})", "math.exp(0.3 * {})", "({}) * ({})", "math.tanh({})", "({}) - ({})",
         "1.0 / (1.5 + ({}) * ({}))"]


def _expr(r, depth, names, j=True):
    if depth == 0 or r.random() < 0.3:
        return str(r.choice([t for t in _TERMS if (t in names or t[0] in "Wvc")
                             and (j or "j" not in t)]))
    w = str(r.choice(_WRAP))
    return w.format(*[_expr(r, depth - 1, names, j) for _ in range(w.count("{}"))])


def _program(seed):
    """A double loop accumulating into ``s``: with or without an outer-trip value ``z`` (read
    in the inner loop or not), an inner local ``t``, the inner range over ``j`` or ``j > i``,
    a third level, and terms added by the outer trip before and after the inner loop (an
    accumulation chain ``s``, ``s_2``)."""
    r = np.random.default_rng(seed)
    outer_z = r.random() < 0.5
    names = {"z"} if outer_z else set()
    lines = ["def f(W, v, c):", "    s = 0.0", "    for i in range(W.shape[0]):"]
    if outer_z:
        lines.append(f"        z = {_expr(r, 2, set(), j=False)}")
    stop = r.choice(["W.shape[1]", "v.shape[0]"])
    start = "0" if r.random() < 0.6 else f"i % {stop}"
    if r.random() < 0.4:
        lines.append(f"        s += {_expr(r, 2, names, j=False)}")
    lines.append(f"        for j in range({start}, {stop}):")
    inner = names | {"t"}
    lines.append(f"            t = {_expr(r, 2, names)}")
    if r.random() < 0.3:
        lines += ["            for k in range(2):",
                  f"                s += ({_expr(r, 2, inner)}) * (k + 1)"]
    else:
        lines.append(f"            s += {_expr(r, 3, inner)}")
    if r.random() < 0.3 and outer_z:
        lines.append(f"        s += z * {_expr(r, 1, set(), j=False)}")
    lines.append("    return s")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(32))
def test_generated_double_loops(seed, tmp_path):
    """Generated double loops, against the oracle (python target, coarse and fine)."""
    import importlib.util
    import sys

    from tests.oracle import check_against_oracle
    text = "import math\n\nimport numpy as np\n\n\n" + _program(seed)
    path = tmp_path / f"nested_gen_{seed}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"nested_gen_{seed}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    r = np.random.default_rng(100 + seed)
    args = (r.normal(size=(3, 4)) * 0.7, r.normal(size=4) * 0.7, 0.6)
    for coarse in (True, False):
        check_against_oracle(mod.f, args, "python", coarse=coarse)
