"""Scattered adjoints distributed by offset (coarsen.ad.reverse.scatter_loops).

The rewrite itself, on statements: which loops are split, in what order, and each condition
that leaves a loop alone.  Then stencil programs through the compiler: the oracle on both
targets, the bits of the code without the pass on the cpu target, and metamorphic variants
(renamed, reordered, split into a helper, other sizes).
"""
import ast

import gast
import numpy as np
import pytest

import coarsen
from apps.arrays.heat_loop import objective as heat
from apps.arrays.wave import objective as wave
from coarsen.ad.reverse.scatter_loops import GATHERED, SPLIT, distribute_scatters

from tests.oracle import check_against_oracle


def _parse(src):
    return gast.parse(src).body


def _text(body):
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


ALLOC = "A = np.zeros(n)\nW = np.zeros(n)\n"

#: the heat equation's reverse stencil loop, as the emitter writes it
STENCIL = ALLOC + """
for i in range(1, n - 1):
    g = W[i]
    W[i] = 0.0
    s = u[i + 1] - 2 * u[i] + u[i - 1]
    a = g * k
    b = g * (1 - 2 * k)
    k_bar += g * s
    A[i + 1] += a
    A[i - 1] += a
    A[i] += b
"""


def _loops(body):
    """The loops of ``body``, a gathered split read as its split form (its ``else``)."""
    out = []
    for st in body:
        if isinstance(st, gast.If) and any(isinstance(lp, gast.For) and lp.target.id.startswith("_gk")
                                            for lp in st.body):
            out.extend(st.orelse)
        elif isinstance(st, gast.For):
            out.append(st)
    return out


def test_a_stencil_loop_is_split_by_offset_the_largest_first():
    body = _parse(STENCIL)
    before = _text(body)
    out = distribute_scatters(body)
    assert _text(body) == before                            # the input is not modified
    loops = _loops(out)
    assert len(loops) == 4
    texts = [_text(lp.body) for lp in loops]
    assert texts[0] == "g = W[i]\na = g * k\nA[i + 1] += a"
    assert texts[1] == "g = W[i]\nb = g * (1 - 2 * k)\nA[i] += b"
    assert texts[2] == "g = W[i]\na = g * k\nA[i - 1] += a"
    # the rest, last: the reset after every read of W[i], the reduction; a and b are dead there
    assert texts[3] == "g = W[i]\nW[i] = 0.0\ns = u[i + 1] - 2 * u[i] + u[i - 1]\nk_bar += g * s"
    assert loops[0].coarsen_comment == SPLIT


def test_a_loop_counting_down_takes_the_smallest_offset_first():
    body = _parse(ALLOC + "for i in range(n - 2, 0, -1):\n    g = W[i]\n"
                  "    A[i + 1] += g\n    A[i - 1] -= 2.0 * g\n    A[i + 2] += g\n")
    loops = _loops(distribute_scatters(body))
    assert [_text(lp.body).splitlines()[-1] for lp in loops] == \
        ["A[i - 1] -= 2.0 * g", "A[i + 1] += g", "A[i + 2] += g"]


def test_scatters_at_one_offset_stay_in_order_in_one_loop_and_two_dimensional_indices_work():
    body = _parse("A = np.zeros((m, n))\nfor i in range(1, n - 1):\n"
                  "    A[j, i - 1] += x[i]\n    A[j, i] += y[i]\n    A[j, i - 1] += z[i]\n")
    loops = _loops(distribute_scatters(body))
    assert [_text(lp.body) for lp in loops] == ["A[j, i] += y[i]",
                                                 "A[j, i - 1] += x[i]\nA[j, i - 1] += z[i]"]


#: each variant breaks one condition of the split: the loop is left as it is
REFUSED = {
    "one offset only": "for i in range(n):\n    A[i] += u[i]\n    A[i] += 2.0 * u[i]\n",
    "the scattered array read": "for i in range(1, n - 1):\n    A[i + 1] += A[i]\n    A[i - 1] += u[i]\n",
    "the scattered array read elsewhere": "for i in range(1, n - 1):\n    A[i + 1] += u[i]\n"
                                          "    A[i - 1] += u[i]\n    q = A[i]\n",
    "a parameter's memory": "for i in range(1, n - 1):\n    P[i + 1] += u[i]\n    P[i - 1] += u[i]\n",
    "a value carried from the trip before": "for i in range(1, n - 1):\n    A[i + 1] += c\n"
                                            "    A[i - 1] += c\n    c = u[i]\n",
    "a value from a running sum": "for i in range(1, n - 1):\n    c += u[i]\n    A[i + 1] += c\n"
                                  "    A[i - 1] += c\n",
    "a value assigned twice": "for i in range(1, n - 1):\n    c = u[i]\n    c = c * c\n"
                              "    A[i + 1] += c\n    A[i - 1] += c\n",
    "a written array read at another element": "for i in range(1, n - 1):\n    c = W[i + 1]\n"
                                               "    W[i] = 0.0\n    A[i + 1] += c\n    A[i - 1] += c\n",
    "a written array read after its write": "for i in range(1, n - 1):\n    W[i] = 0.0\n    c = W[i]\n"
                                            "    A[i + 1] += c\n    A[i - 1] += c\n",
    "a written array read at an index without the counter": "for i in range(1, n - 1):\n"
                                                            "    c = W[j]\n    W[j] = 0.0\n"
                                                            "    A[i + 1] += c\n    A[i - 1] += c\n",
    "a write into memory other names reach": "for i in range(1, n - 1):\n    P[i] = 0.0\n"
                                             "    A[i + 1] += u[i]\n    A[i - 1] += u[i]\n",
    "bounds the loop changes": "for i in range(1, m):\n    m = u[i]\n    A[i + 1] += u[i]\n    A[i - 1] += u[i]\n",
    "the counter assigned": "for i in range(1, n - 1):\n    A[i + 1] += u[i]\n    A[i - 1] += u[i]\n    i = 2\n",
    "a call that is not pure": "for i in range(1, n - 1):\n    c = f(u[i])\n    A[i + 1] += c\n    A[i - 1] += c\n",
    "a statement that is no assignment": "for i in range(1, n - 1):\n    A[i + 1] += u[i]\n"
                                         "    A[i - 1] += u[i]\n    if u[i] > 0:\n        q = 1\n",
    "other indices that differ": "B = np.zeros((n, n))\nfor i in range(1, n - 1):\n"
                                 "    B[j, i + 1] += u[i]\n    B[k, i - 1] += u[i]\n",
    "another index the loop assigns": "B = np.zeros((n, n))\nfor i in range(1, n - 1):\n    j = 0\n"
                                      "    B[j, i + 1] += u[i]\n    B[j, i - 1] += u[i]\n",
    "an offset that is not a constant": "for i in range(1, n - 1):\n    A[i + j] += u[i]\n    A[i - 1] += u[i]\n",
    "the array bound to another name": "V = A\nfor i in range(1, n - 1):\n    A[i + 1] += u[i]\n    A[i - 1] += u[i]\n",
    "a step of 2": "for i in range(1, n - 1, 2):\n    A[i + 1] += u[i]\n    A[i - 1] += u[i]\n",
    # b is assigned by a statement of two targets, which the trip's scalars may not be
    "a chained assignment": "for i in range(1, n - 1):\n    c = b = u[i]\n    A[i + 1] += b\n"
                            "    A[i - 1] += b\n",
    # 2 - i counts down: no offset of the counter
    "an index reversed": "for i in range(1, n - 1):\n    A[i + 1] += u[i]\n    A[2 - i] += u[i]\n",
    # A reached through another name (a transpose is a view of the same memory)
    "the array transposed": "V = A.T\nfor i in range(1, n - 1):\n    A[i + 1] += u[i]\n"
                            "    A[i - 1] += V[i]\n",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_loop_breaking_a_condition_is_left_alone(case):
    body = _parse(ALLOC + REFUSED[case])
    assert _text(distribute_scatters(body)) == _text(body)


#: each is split, the statement of ``B`` or ``W`` kept in the rest of the body
SPLIT_ALL_THE_SAME = {
    # an accumulation at an index without the counter, and one through an index array
    "other accumulations": "B = np.zeros(n)\nfor i in range(1, n - 1):\n    B[j] += u[i]\n"
                           "    B[idx[i]] += u[i]\n    A[i + 1] += u[i]\n    A[1 + i] += W[i]\n"
                           "    A[i - 1] += u[i]\n",
    # the written array's shape read by a scatter's value, the scattered array's after the loop
    "shapes": "for i in range(1, n - 1):\n    c = W[i] * (W.shape == u.shape)\n    W[i] = 0.0\n"
              "    A[i + 1] += c\n    A[i - 1] += c\nm = A.shape[0]\n",
}


@pytest.mark.parametrize("case", sorted(SPLIT_ALL_THE_SAME))
def test_loops_with_other_statements_and_shapes_are_split(case):
    body = _parse(ALLOC + SPLIT_ALL_THE_SAME[case])
    loops = _loops(distribute_scatters(body))
    assert len(loops) >= 3, _text(distribute_scatters(body))
    rest = _text(loops[-1].body)
    assert "B[j] += u[i]" in rest or "W[i] = 0.0" in rest, rest


def test_statements_that_do_not_change_are_the_inputs_own_nodes():
    # copy on write: a compound statement with nothing split inside is not copied
    body = _parse(ALLOC + "for t in range(3):\n    for i in range(n):\n        A[i] += 1.0\n"
                  "if n > 2:\n    for i in range(1, n - 1):\n        A[i + 1] += u[i]\n"
                  "        A[i - 1] += u[i]\nelse:\n    q = 1\n")
    out = distribute_scatters(body)
    assert out[2] is body[2]                  # the loop over t: nothing to split
    assert out[3] is not body[3] and out[3].orelse[0] is body[3].orelse[0]
    assert len(_loops(out[3].body)) == 2


def test_the_refused_variants_split_once_the_condition_holds():
    # the control for REFUSED: the same loop shape, every condition met, is split
    body = _parse(ALLOC + "for i in range(1, n - 1):\n    c = W[i]\n    W[i] = 0.0\n"
                  "    A[i + 1] += c\n    A[i - 1] += c\n")
    assert len(_loops(distribute_scatters(body))) == 3


def test_a_long_enough_loop_adds_its_interior_gathered_and_its_edges_by_offset():
    out = distribute_scatters(_parse(STENCIL))
    gathered = out[2]
    assert isinstance(gathered, gast.If) and gathered.coarsen_comment == GATHERED
    assert _text([gathered.test]) == "n - 1 >= 3"         # hi - lo >= cmax - cmin
    low1, low2, core, high1, high2 = gathered.body
    # the edges: each offset's trips whose element the interior does not cover, largest first
    assert _text([low1]) == "for i in range(1, 2):\n    g = W[i]\n    b = g * (1 - 2 * k)\n    A[i] += b"
    assert _text([low2.iter]) == "range(1, 3)" and _text(low2.body).endswith("A[i - 1] += a")
    assert _text([high1.iter]) == "range(n - 1 - 2, n - 1)" and _text(high1.body).endswith("A[i + 1] += a")
    assert _text([high2.iter]) == "range(n - 1 - 1, n - 1)" and _text(high2.body).endswith("A[i] += b")
    # the interior: one trip per element, counting from 0 (Numba vectorizes a loop counting
    # from 0 or 1, not one from 2), its offsets' terms in the split loops' order
    assert _text([core]) == (
        "for _gk1 in range(n - 1 - 3):\n"
        "    g = W[_gk1 + 1]\n    a = g * k\n    A[_gk1 + 2] += a\n"
        "    g = W[_gk1 + 2]\n    b = g * (1 - 2 * k)\n    A[_gk1 + 2] += b\n"
        "    g = W[_gk1 + 3]\n    a = g * k\n    A[_gk1 + 2] += a")
    # too short: the split loops, then the rest after either
    assert [_text(lp.body).splitlines()[-1] for lp in gathered.orelse] == \
        ["A[i + 1] += a", "A[i] += b", "A[i - 1] += a"]
    assert isinstance(out[3], gast.For) and "k_bar += g * s" in _text(out[3].body)


@pytest.mark.parametrize("head, gathered", [
    ("for i in range(1, n - 1):", True),
    ("for i in range(n):", False),             # lo + cmin = -1: element -1 is Python's last
    ("for i in range(2, n):", True),
    ("for i in range(m, n - 1):", False),      # the start is no constant
    ("for i in range(n - 2, 0, -1):", False),  # counting down: split only
])
def test_the_gathered_form_needs_an_int_start_and_no_element_below_0(head, gathered):
    body = _parse(ALLOC + head + "\n    g = W[i]\n    A[i + 1] += g\n    A[i - 1] += 2.0 * g\n")
    out = distribute_scatters(body)
    assert any(isinstance(st, gast.If) for st in out) == gathered, _text(out)
    assert len(_loops(out)) == 2


#: loops whose gathered form must add the same terms in the same order as the split loops,
#: every length (the version test's edge included)
GATHER_CASES = {
    "heat": """
    def f(u, W, k, n):
        A = np.zeros(n)
        for i in range(1, n - 1):
            g = W[i]
            a = g * k
            A[i + 1] += a
            A[i - 1] += a
            A[i] += g * (1 - 2 * k)
        return A + 0.0
    """,
    "two arrays": """
    def f(u, W, k, n):
        A = np.zeros(n)
        B = np.zeros(n)
        for i in range(1, n - 1):
            g = W[i] * 3.0
            A[i + 1] += g * k
            B[i] -= g
            A[i - 1] += g
            A[i] += g * u[i]
        return A + 2.0 * B
    """,
    "wide": """
    def f(u, W, k, n):
        A = np.zeros(n + 3)
        for i in range(2, n - 1):
            g = W[i]
            A[i + 2] += g * 1e16
            A[i - 2] += g
            A[i + 1] += -g * 1e16
            A[i] += u[i] * g
        return A + 0.0
    """,
    "from zero": """
    def f(u, W, k, n):
        A = np.zeros(n + 2)
        for i in range(n):
            A[i + 2] += W[i]
            A[1 + i] += u[i] * 1e-16
            A[i] -= W[i] * u[i]
        return A + 0.0
    """,
    "rows": """
    def f(u, W, k, n):
        A = np.zeros((3, n))
        for j in range(3):
            for i in range(1, n - 1):
                A[j, i + 1] += W[i] * j
                A[j, i - 1] += u[i]
        return A + 0.0
    """,
}


@pytest.mark.parametrize("case", sorted(GATHER_CASES))
def test_the_gathered_form_gives_the_bits_of_the_split_loops_at_every_length(case):
    from tests.helpers_passes import rewrite

    before, after, text = rewrite(GATHER_CASES[case], lambda body, made: distribute_scatters(body), ())
    assert "_gk1" in text, text
    r = np.random.default_rng(7)
    for n in list(range(0, 12)) + [40]:
        # terms of mixed magnitudes, so that another order of the additions shows
        u = r.standard_normal(n + 3) * 10.0 ** r.integers(-8, 9, n + 3)
        W = r.standard_normal(n + 3) * 10.0 ** r.integers(-8, 9, n + 3)
        assert before(u, W, 0.3, n).tobytes() == after(u, W, 0.3, n).tobytes(), (case, n)


# ------------------------------------------------------------------ programs


def heat_renamed(goal, steps, c, v0):
    # ``heat`` (apps.arrays.heat_loop) renamed and its arguments permuted: the same
    # operations, the same bits
    m = v0.shape[0]
    w = v0.copy()
    wn = v0.copy()
    for s in range(steps):
        for j in range(1, m - 1):
            wn[j] = w[j] + c * (w[j - 1] - 2.0 * w[j] + w[j + 1])
        for j in range(1, m - 1):
            w[j] = wn[j]
    total = 0.0
    for j in range(m):
        e = w[j] - goal[j]
        total += e * e
    return total


def _lap(u, i):
    return u[i + 1] - 2.0 * u[i] + u[i - 1]


def heat_reordered(u0, kappa, target, nt):
    # the stencil's operands in another order, through a helper: other roundings
    n = u0.shape[0]
    u = u0.copy()
    un = u0.copy()
    for t in range(nt):
        for i in range(1, n - 1):
            un[i] = kappa * _lap(u, i) + u[i]
        for i in range(1, n - 1):
            u[i] = un[i]
    loss = 0.0
    for i in range(n):
        loss += (target[i] - u[i]) ** 2
    return loss


def rows(U, c, nt):
    # a 2-D field, the stencil along each row: the scatters' row index is the outer counter
    m, n = U.shape
    V = U.copy()
    W = U.copy()
    for t in range(nt):
        for j in range(m):
            for i in range(1, n - 1):
                W[j, i] = V[j, i] + c * (V[j, i - 1] - 2.0 * V[j, i] + V[j, i + 1])
        for j in range(m):
            for i in range(1, n - 1):
                V[j, i] = W[j, i]
    return np.sum(V * V)


def _heat_args(n, rng):
    return rng.standard_normal(n), 0.2, rng.standard_normal(n), 4


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_stencil_programs_match_the_oracle(target):
    rng = np.random.default_rng(3)
    for n in (2, 3, 7):
        args = _heat_args(n, rng)
        check_against_oracle(heat, args, target=target, wrt=("u0", "kappa"))
        check_against_oracle(heat_reordered, args, target=target, wrt=("u0", "kappa"))
        check_against_oracle(wave, args, target=target, wrt=("u0", "c2"))
    check_against_oracle(rows, (rng.standard_normal((3, 6)), 0.15, 3), target=target, wrt=("U", "c"))


@pytest.mark.parametrize("fn, wrt", [(heat, ("u0", "kappa")), (wave, ("u0", "c2"))])
def test_the_split_gives_the_bits_of_the_code_without_it(fn, wrt):
    rng = np.random.default_rng(8)
    # lane_sums off on both sides: it leaves a loop that still scatters alone, so it would sum
    # kappa's adjoint in lanes on one side only (its own bits: tests/ad/reverse/test_lane_sums.py)
    on = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable={"lane_sums"})
    off = coarsen.differentiate(fn, wrt=wrt, target="cpu", disable={"distribute_scatters", "lane_sums"})
    for n in (3, 9, 40):
        args = _heat_args(n, rng)
        v1, g1 = on.value_and_grad(*args)
        v0, g0 = off.value_and_grad(*args)
        assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0)), n
    assert SPLIT in on.source_for(*args)
    assert SPLIT not in off.source_for(*args)


def wide(u0, k, nt):
    # a fourth-order stencil from 2: offsets -2 to 2, the gathered interior from element 4
    n = u0.shape[0]
    u = u0.copy()
    un = u0.copy()
    for t in range(nt):
        for i in range(2, n - 2):
            un[i] = u[i] + k * (-u[i - 2] + 16.0 * u[i - 1] - 30.0 * u[i] + 16.0 * u[i + 1]
                                - u[i + 2]) / 12.0
        for i in range(2, n - 2):
            u[i] = un[i]
    return np.sum(u * u)


def upwind(u0, k, nt):
    # from element 0, offsets 0 and 1: the smallest offset reaches no element below 0
    n = u0.shape[0]
    u = u0.copy()
    un = np.zeros(n)
    for t in range(nt):
        for i in range(n - 1):
            un[i] = u[i] - k * (u[i + 1] - u[i])
        for i in range(n - 1):
            u[i] = un[i]
    return np.sum(np.sin(u))


@pytest.mark.parametrize("fn", [wide, upwind])
def test_gathered_stencils_keep_the_bits_and_match_the_oracle(fn):
    rng = np.random.default_rng(11)
    on = coarsen.differentiate(fn, wrt=(0, 1), target="cpu", disable={"lane_sums"})
    off = coarsen.differentiate(fn, wrt=(0, 1), target="cpu", disable={"distribute_scatters", "lane_sums"})
    for n in range(2, 12):
        args = (rng.uniform(-1.0, 1.0, n), 0.15, 3)
        v1, g1 = on.value_and_grad(*args)
        v0, g0 = off.value_and_grad(*args)
        assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0)), n
    assert "for _gk1 in range(" in on.source_for(*args)
    for target in ("cpu", "python"):
        check_against_oracle(fn, (rng.uniform(-1.0, 1.0, 9), 0.2, 4), target=target, wrt=(0, 1))


def test_a_renamed_program_and_a_row_stencil_keep_the_bits():
    rng = np.random.default_rng(9)
    u0, kappa, target, nt = _heat_args(12, rng)
    v1, g1 = coarsen.differentiate(heat, wrt=("u0", "kappa"), target="cpu").value_and_grad(
        u0, kappa, target, nt)
    renamed = coarsen.differentiate(heat_renamed, wrt=("v0", "c"), target="cpu")
    v2, (gu, gk) = renamed.value_and_grad(target, nt, kappa, u0)
    assert v2 == v1 and np.array_equal(gu, g1[0]) and gk == g1[1]
    args = (rng.standard_normal((4, 10)), 0.1, 5)
    on = coarsen.differentiate(rows, wrt=("U", "c"), target="cpu", disable={"lane_sums"})
    off = coarsen.differentiate(rows, wrt=("U", "c"), target="cpu",
                                disable={"distribute_scatters", "lane_sums"})
    v1, g1 = on.value_and_grad(*args)
    v0, g0 = off.value_and_grad(*args)
    assert v1 == v0 and all(np.array_equal(a, b) for a, b in zip(g1, g0))
    assert SPLIT in on.source_for(*args)


def test_an_offset_written_as_a_negative_difference_keeps_the_order_of_the_additions():
    # ``i - (-1)`` is ``i + 1``: the two scatters add into each element in the trip's order,
    # whichever form is written first (values chosen so that the order of the additions shows)
    from tests.helpers_passes import rewrite

    src = """
    def f(u, n):
        A = np.zeros(n)
        for i in range(1, n - 1):
            A[i - (-1)] += u[i]
            A[i + 1] += -u[i] * 1e-16
            A[i - 1] += u[i] * 3.0
        return A + 0.0
    """
    before, after, text = rewrite(src, lambda body, made: distribute_scatters(body), ())
    assert len(_loops(gast.parse(text).body[0].body)) == 2, text
    u = np.array([1.0, 1e16, 1.0, 3.0, -1e16, 0.5, 1.0])
    assert before(u, 7).tobytes() == after(u, 7).tobytes()


def test_names_spelled_by_distinct_string_objects_are_the_same_names():
    # the compiler builds names (f-strings are not interned): compared by value
    body = _parse(ALLOC + "for ix in range(1, n - 1):\n    c = W[ix]\n    W[ix] = 0.0\n"
                  "    A[ix + 1] += c\n    A[ix - 1] += c\n")
    loop = body[2]
    loop.target.id = "".join(["i", "x"])
    assert loop.target.id is not body[2].body[0].value.slice.id
    assert len(_loops(distribute_scatters(body))) == 3
