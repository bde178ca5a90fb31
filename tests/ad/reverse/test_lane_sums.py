"""Adjoint sums in lanes (coarsen.ad.reverse.lane_sums) and their helper ``_sum_acc``.

The rewrite on statements: what a loop becomes, where the buffer goes, and each condition
that leaves a loop alone.  The helper's order of additions, against a model written here.
Then programs through the compiler: the oracle on both targets, the bits of the code without
the pass where a loop has fewer than eight trips, the exact lane order where it has more, the
function's value never reordered, and metamorphic variants (renamed, reordered through a
helper, other sizes).
"""
import ast
import io

import gast
import numpy as np
import pytest

import coarsen
from apps.arrays.heat_loop import objective as heat
from apps.arrays.softmax import objective as softmax
from apps.arrays.wave import objective as wave
from coarsen.ad.reverse.lane_sums import HELPER, lane_sums
from coarsen.codegen.helpers import HELPERS

from tests.ad.reverse.test_scatter_loops import heat_renamed, heat_reordered
from tests.oracle import check_against_oracle

_sum_acc = HELPERS[HELPER]         # the helper as plain Python: the generated text runs it


def _parse(src):
    return gast.parse(src).body


def _text(body):
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


ADJ = frozenset({"k_bar", "c_bar"})

#: heat's reverse reduction loop, as the emitter writes it
LOOP = """
for i in range(1, n - 1):
    g = W[i]
    W[i] = 0.0
    s = u[i + 1] - 2 * u[i] + u[i - 1]
    k_bar += g * s
"""


def test_a_reduction_loop_stores_its_terms_and_sums_them_after_it():
    body = _parse(LOOP)
    before = _text(body)
    out, used = lane_sums(body, ADJ)
    assert _text(body) == before                            # the input is not modified
    assert used == {HELPER}
    assert _text(out) == (
        "_lanes1 = np.empty(max(n - 1 - 1, 0))\n"
        "for i in range(1, n - 1):\n"
        "    g = W[i]\n    W[i] = 0.0\n    s = u[i + 1] - 2 * u[i] + u[i - 1]\n"
        "    _lanes1[i - 1] = g * s\n"
        "k_bar = _sum_acc(k_bar, _lanes1, n - 1 - 1)")
    # the statements that do not change are the input's own nodes
    assert out[1].body[0] is body[0].body[0] and out[1].body[2] is body[0].body[2]


def test_the_buffer_goes_before_the_outermost_loop_and_the_sum_after_the_inner_one():
    # the outer loop reads k_bar too: each run of the inner loop is summed after it
    src = "for t in range(nt):\n    x = 1.0\n    if t > 0:\n" + "\n".join(
        "        " + line for line in LOOP.strip().splitlines()) + "\n    y = k_bar\n"
    out, _ = lane_sums(_parse(src), ADJ)
    assert _text(out) == (
        "_lanes1 = np.empty(max(n - 1 - 1, 0))\n"
        "for t in range(nt):\n    x = 1.0\n    if t > 0:\n"
        "        for i in range(1, n - 1):\n"
        "            g = W[i]\n            W[i] = 0.0\n"
        "            s = u[i + 1] - 2 * u[i] + u[i - 1]\n            _lanes1[i - 1] = g * s\n"
        "        k_bar = _sum_acc(k_bar, _lanes1, n - 1 - 1)\n"
        "    y = k_bar")


def test_a_sum_the_outer_loops_do_not_mention_gathers_every_run_and_adds_once_after_them():
    src = "for t in range(nt):\n    x = 1.0\n    if t > 0:\n" + "\n".join(
        "        " + line for line in LOOP.strip().splitlines()) + "\n    y = 2.0\nz = k_bar\n"
    out, _ = lane_sums(_parse(src), ADJ)
    assert _text(out) == (
        "_lanes1 = np.zeros(max(n - 1 - 1, 0))\n"
        "for t in range(nt):\n    x = 1.0\n    if t > 0:\n"
        "        for i in range(1, n - 1):\n"
        "            g = W[i]\n            W[i] = 0.0\n"
        "            s = u[i + 1] - 2 * u[i] + u[i - 1]\n            _lanes1[i - 1] += g * s\n"
        "    y = 2.0\n"
        "k_bar = _sum_acc(k_bar, _lanes1, n - 1 - 1)\n"
        "z = k_bar")


@pytest.mark.parametrize("other", [
    "k_bar = 0.0", "k_bar += 1.0", "y = k_bar", "k_bar = k_bar * 0.5",
    "for j in range(m):\n        k_bar += h[j]",
])
def test_a_sum_the_outer_loop_mentions_elsewhere_stays_after_the_inner_loop(other):
    src = "for t in range(nt):\n" + "\n".join(
        "    " + line for line in LOOP.strip().splitlines()) + "\n    " + other + "\n"
    text = _text(lane_sums(_parse(src), ADJ)[0])
    assert "_lanes1 = np.empty(max(n - 1 - 1, 0))" in text
    assert "    _lanes1[i - 1] = g * s\n    k_bar = _sum_acc(k_bar, _lanes1, n - 1 - 1)\n" \
        in text.replace("        ", "    ")


@pytest.mark.parametrize("head, index, trips", [
    ("range(n)", "i", "n"),
    ("range(0, m)", "i", "m"),
    ("range(X.shape[1])", "i", "X.shape[1]"),
    ("range(n - 1, -1, -1)", "n - 1 - i", "n - 1 + 1"),
    ("range(a, b, -1)", "a - i", "a - b"),
    ("range(2, n, 1)", "i - 2", "n - 2"),
])
def test_each_range_form_gives_its_trip_number_and_count(head, index, trips):
    out, _ = lane_sums(_parse(f"for i in range({head[6:-1]}):\n    c_bar = c_bar + x[i] * y[i]\n"), ADJ)
    assert _text(out) == (f"_lanes1 = np.empty(max({trips}, 0))\nfor i in {head}:\n"
                          f"    _lanes1[{index}] = x[i] * y[i]\nc_bar = _sum_acc(c_bar, _lanes1, {trips})")


def test_two_adjoints_get_a_buffer_each_and_the_term_may_come_first():
    out, _ = lane_sums(_parse("for i in range(n):\n    k_bar = g[i] + k_bar\n    c_bar += h[i]\n"),
                       ADJ)
    assert _text(out) == (
        "_lanes1 = np.empty(max(n, 0))\n_lanes2 = np.empty(max(n, 0))\n"
        "for i in range(n):\n    _lanes1[i] = g[i]\n    _lanes2[i] = h[i]\n"
        "k_bar = _sum_acc(k_bar, _lanes1, n)\nc_bar = _sum_acc(c_bar, _lanes2, n)")


def test_the_term_keeps_the_source_line_of_its_statement():
    body = _parse(LOOP)
    body[0].body[3].coarsen_comment = "k_bar += g * s (line 20)"
    out, _ = lane_sums(body, ADJ)
    store = out[1].body[3]
    assert _text([store]) == "_lanes1[i - 1] = g * s"
    assert store.coarsen_comment == "k_bar += g * s (line 20)"
    assert getattr(out[1].body[0], "coarsen_comment", None) is None
    out, _ = lane_sums(_parse(LOOP), ADJ)
    assert getattr(out[1].body[3], "coarsen_comment", None) is None


def test_a_name_the_function_has_is_never_taken():
    out, _ = lane_sums(_parse("_lanes1 = 0.0\nfor i in range(n):\n    k_bar += g[i]\n"), ADJ)
    assert "_lanes2[i] = g[i]" in _text(out)


#: loops that break one condition each: left exactly as they are
REFUSED = {
    "not an adjoint": "for i in range(n):\n    s += g[i]\n",
    "read again in the loop": "for i in range(n):\n    k_bar += g[i]\n    h[i] = k_bar\n",
    "added twice": "for i in range(n):\n    k_bar += g[i]\n    k_bar += h[i]\n",
    "read in its own term": "for i in range(n):\n    k_bar = k_bar + k_bar * g[i]\n",
    "subtracted": "for i in range(n):\n    k_bar -= g[i]\n",
    "multiplied": "for i in range(n):\n    k_bar = k_bar * g[i]\n",
    "another name added": "for i in range(n):\n    k_bar = z + g[i]\n",
    "another name added last": "for i in range(n):\n    k_bar = g[i] + z\n",
    "read in its own augmented term": "for i in range(n):\n    k_bar += k_bar * g[i]\n",
    "an element of an array": "for i in range(n):\n    a[0] += g[i]\n",
    "a branch in the body": "for i in range(n):\n    if g[i] > 0:\n        k_bar += g[i]\n",
    "a loop in the body": "for i in range(n):\n    for j in range(m):\n        h[j] = 0.0\n"
                          "    k_bar += g[i]\n",
    "an else": "for i in range(n):\n    k_bar += g[i]\nelse:\n    h[0] = 1.0\n",
    "a step of 2": "for i in range(0, n, 2):\n    k_bar += g[i]\n",
    "a step by name": "for i in range(0, n, st):\n    k_bar += g[i]\n",
    "not a range": "for i in xs:\n    k_bar += g[i]\n",
    "a keyword": "for i in range(n, step=1):\n    k_bar += g[i]\n",
    "a bound by a call": "for i in range(len(g)):\n    k_bar += g[i]\n",
    "a float bound": "for i in range(n * 1.5):\n    k_bar += g[i]\n",
    "a bound by division": "for i in range(n // 2):\n    k_bar += g[i]\n",
    "a negated call": "for i in range(-len(g)):\n    k_bar += g[i]\n",
    "an inverted bound": "for i in range(~n):\n    k_bar += g[i]\n",
    "a bound the loop assigns": "for i in range(n):\n    k_bar += g[i]\n    n = 3\n",
    "a bound an outer loop assigns": "for t in range(nt):\n    m = t + 1\n"
                                     "    for i in range(m):\n        k_bar += g[i]\n",
    "a bound a while loop assigns": "while q:\n    m = 4\n    for i in range(m):\n        k_bar += g[i]\n",
    "the counter assigned": "for i in range(n):\n    k_bar += g[i]\n    i = 0\n",
    "a tuple counter": "for i, j in range(n):\n    k_bar += g[i]\n",
    "an expression statement": "for i in range(n):\n    k_bar += g[i]\n    f(i)\n",
    "a shape of an attribute": "for i in range(a.b.shape[0]):\n    k_bar += g[i]\n",
    "a shape by name": "for i in range(X.shape[j]):\n    k_bar += g[i]\n",
    "a carried state": "for i in range(n):\n    x = x + h * g[i]\n    k_bar += x\n",
    "a carried position": "for i in range(n):\n    p -= 1\n    k_bar += t[p]\n",
    "a name read before its assignment": "for i in range(n):\n    k_bar += g[i] * y\n    y = g[i]\n",
    "a scatter at two offsets": "for i in range(1, n):\n    A[j, i + 1] += g[i]\n"
                                "    A[j, i - 1] += g[i]\n    k_bar += g[i] * h[i]\n",
    "an array element's index carried": "for i in range(n):\n    h[j] = g[i]\n    j = i\n    k_bar += g[i]\n",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_loop_breaking_a_condition_is_left_alone(case):
    body = _parse(REFUSED[case])
    out, used = lane_sums(body, ADJ)
    assert _text(out) == _text(body) and used == frozenset()
    assert all(a is b for a, b in zip(out, body))


def test_adds_into_distinct_arrays_or_one_index_are_no_scatter():
    out, _ = lane_sums(_parse("for i in range(n):\n    A[j, i] += g[i]\n    B[i + 1] += g[i]\n"
                              "    A[j, i] += h[i]\n    k_bar += g[i] * h[i]\n"), ADJ)
    assert "_lanes1[i] = g[i] * h[i]" in _text(out)


def test_temporaries_assigned_before_their_reads_are_not_carried():
    out, _ = lane_sums(_parse("for i in range(n):\n    y = g[i]\n    y = y * 2.0\n"
                              "    h[i] = y\n    k_bar += y * x\n"), ADJ)
    assert "_lanes1[i] = y * x" in _text(out)


def test_an_outer_loop_assigning_other_names_still_takes_the_inner_loop():
    out, _ = lane_sums(_parse("for t in range(nt):\n    q = t + 1\n"
                              "    for i in range(n):\n        k_bar += g[q, i]\n"), ADJ)
    assert "_lanes1[i] += g[q, i]" in _text(out)


# ------------------------------------------------------------------ the helper


def _model(acc, terms):
    """The lanes of ``_sum_acc`` written out: lane k % 4 from eight terms on, acc first."""
    n = len(terms)
    if n < 8:
        for t in terms:
            acc = acc + t
        return acc
    lanes = [acc, -0.0, -0.0, -0.0]
    m = n - n % 4
    for k in range(m):
        lanes[k % 4] = lanes[k % 4] + terms[k]
    for k in range(m, n):
        lanes[0] = lanes[0] + terms[k]
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 11, 12, 31])
def test_the_helper_adds_in_the_lanes_of_its_model(n):
    rng = np.random.default_rng(n)
    # terms of very different sizes, so that another order rounds differently
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
    acc = 0.37
    got = _sum_acc(acc, x, n)
    assert got == _model(acc, list(x))
    if n >= 8:
        seq = acc
        for t in x:
            seq += t
        assert np.isclose(got, seq, rtol=1e-9, atol=1e-3 * np.max(np.abs(x)))


def test_the_helper_keeps_the_order_below_eight_and_a_negative_zero():
    x = np.array([1e16, 1.0, -1e16, 1.0, 0.5, 0.25, 3.0])
    seq = 2.0
    for t in x:
        seq += t
    assert _sum_acc(2.0, x, 7) == seq
    assert np.signbit(_sum_acc(-0.0, np.array([-0.0] * 9), 9))
    assert _sum_acc(1.5, x, -3) == 1.5


# ------------------------------------------------------------------ programs


def scale_sum(x, c):
    # the adjoint of c is the sum of x[i] * y_bar: its order shows with terms of mixed size
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        y[i] = c * x[i]
    total = 0.0
    for i in range(n):
        total += y[i]
    return total


def test_a_parameter_adjoint_is_the_lane_sum_of_its_terms():
    x = np.array([1e16, 1.0, -1e16, 1.0, 3.0, 1e-3, 2.0, -7.0, 1e15, 5.0, -1e15])
    g = coarsen.differentiate(scale_sum, wrt=("c",), target="cpu")
    v, (cb,) = g.value_and_grad(x, 0.5)
    assert "_sum_acc(c_bar" in g.source_for(x, 0.5)
    assert cb == _model(0.0, list(x))            # each term is x[i] * 1.0
    off = coarsen.differentiate(scale_sum, wrt=("c",), target="cpu", disable={"lane_sums"})
    v0, (cb0,) = off.value_and_grad(x, 0.5)
    assert v0 == v and cb0 != cb                # the same value; the terms summed in order
    seq = 0.0
    for t in x:
        seq += t
    assert cb0 == seq


def _heat_args(n, rng):
    return rng.standard_normal(n), 0.2, rng.standard_normal(n), 4


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_programs_with_lane_sums_match_the_oracle(target):
    rng = np.random.default_rng(3)
    for n in (3, 9, 14):
        args = _heat_args(n, rng)
        check_against_oracle(heat, args, target=target, wrt=("u0", "kappa"))
        check_against_oracle(heat_reordered, args, target=target, wrt=("u0", "kappa"))
        check_against_oracle(wave, args, target=target, wrt=("u0", "c2"))
    for shape in ((2, 3), (3, 11), (2, 17)):
        check_against_oracle(softmax, (rng.standard_normal(shape), rng.standard_normal(shape)),
                             target=target, wrt=("X",))
    check_against_oracle(scale_sum, (rng.standard_normal(13), 0.3), target=target, wrt=("c",))


@pytest.mark.parametrize("fn, wrt", [(heat, ("u0", "kappa")), (wave, ("u0", "c2"))])
def test_below_eight_trips_in_one_run_the_bits_are_those_of_the_code_without_it(fn, wrt):
    # n = 9: seven interior points, so the one step's lane sum adds in the loop's order
    rng = np.random.default_rng(8)
    on = coarsen.differentiate(fn, wrt=wrt, target="cpu")
    off = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable={"lane_sums"})
    for n in (3, 9):
        args = _heat_args(n, rng)[:3] + (1,)
        v1, g1 = on.value_and_grad(*args)
        v0, g0 = off.value_and_grad(*args)
        assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0)), n
    for n in (9, 40):
        args = _heat_args(n, rng)
        v1, g1 = on.value_and_grad(*args)
        v0, g0 = off.value_and_grad(*args)
        # more trips or steps: the function's value is never reordered, the gradient's sum
        # (each point's terms over the steps, then the lanes) rounds its way
        assert v1 == v0 and np.array_equal(g1[0], g0[0])
        assert np.isclose(g1[1], g0[1], rtol=1e-12)
    src = on.source_for(*args)
    # the steps' terms gathered per point, one sum after the time loop
    assert "_sum_acc(" in src and "_sum_acc(" not in off.source_for(*args)
    assert src.index("_bar = _sum_acc(") > src.index("for t in range(nt - 1, -1, -1)")
    assert "np.zeros(max(n - 1 - 1, 0))" in src


def test_the_gathered_sum_is_each_points_terms_in_step_order_then_the_lanes():
    # the same sum written out: the terms of kappa's adjoint per point and step, from the
    # reverse sweep of the code without lane_sums, re-added in the pass's order
    rng = np.random.default_rng(12)
    u0, kappa, target, nt = _heat_args(13, rng)
    on = coarsen.differentiate(heat, wrt=("u0", "kappa"), target="cpu")
    _, (_, kb) = on.value_and_grad(u0, kappa, target, nt)
    n = u0.shape[0]
    states = [u0.copy()]
    u = u0.copy()
    for t in range(nt):
        un = u.copy()
        for i in range(1, n - 1):
            un[i] = u[i] + kappa * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = un
        states.append(u.copy())
    ub = 2.0 * (u - target)
    lanes = [0.0] * (n - 2)
    for t in range(nt - 1, -1, -1):
        s = states[t]
        unb = ub.copy()
        ub = np.zeros(n)
        ub[0], ub[-1] = unb[0], unb[-1]
        unb[0] = unb[-1] = 0.0
        for i in range(1, n - 1):
            ub[i + 1] += unb[i] * kappa
        for i in range(1, n - 1):
            ub[i] += unb[i] * (1 - 2 * kappa)
        for i in range(1, n - 1):
            ub[i - 1] += unb[i] * kappa
        for i in range(1, n - 1):
            lanes[i - 1] += unb[i] * (s[i + 1] - 2 * s[i] + s[i - 1])
    assert kb == _model(0.0, lanes)


def test_a_renamed_program_keeps_the_bits():
    rng = np.random.default_rng(9)
    u0, kappa, target, nt = _heat_args(30, rng)
    v1, g1 = coarsen.differentiate(heat, wrt=("u0", "kappa"), target="cpu").value_and_grad(
        u0, kappa, target, nt)
    renamed = coarsen.differentiate(heat_renamed, wrt=("v0", "c"), target="cpu")
    v2, (gu, gk) = renamed.value_and_grad(target, nt, kappa, u0)
    assert v2 == v1 and np.array_equal(gu, g1[0]) and gk == g1[1]



def test_the_pass_runs_on_the_cpu_target_only_and_never_in_a_device_function():
    # a device function (workspace mode, built as python: ``Options.build_target``) takes its
    # tapes and allocates nothing
    from coarsen.transforms.artifact import Options

    g = coarsen.differentiate(heat, wrt=("u0", "kappa"))
    assert "lane_sums" in g.report(*_heat_args(12, np.random.default_rng(0)),
                                   file=io.StringIO()).format()
    assert Options(workspace=True, target="cpu").build_target == "python"
    py = coarsen.differentiate(heat, wrt=("u0", "kappa"), target="python")
    assert "_sum_acc(" not in py.source_for(*_heat_args(12, np.random.default_rng(0)))


def test_float32_inputs_give_the_float64_gradient_of_their_values():
    # another dtype: float32 arrays are computed in float64, so the lanes see the same terms
    rng = np.random.default_rng(11)
    u0, kappa, target, nt = _heat_args(20, rng)
    u32, t32 = u0.astype(np.float32), target.astype(np.float32)
    g = coarsen.differentiate(heat, wrt=("u0", "kappa"), target="cpu")
    v1, (gu1, gk1) = g.value_and_grad(u32, kappa, t32, nt)
    v2, (gu2, gk2) = g.value_and_grad(u32.astype(np.float64), kappa, t32.astype(np.float64), nt)
    assert gu1.dtype == np.float32
    assert v1 == v2 and gk1 == gk2 and np.array_equal(gu1, gu2.astype(np.float32))
    assert "_sum_acc(" in g.source_for(u32, kappa, t32, nt)
