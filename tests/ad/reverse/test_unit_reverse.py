"""Reverse mode (``coarsen.ad.reverse.differentiate_ir``): what the forward sweep tapes, and
``coarsen.ad.canonical``: segments lifted under canonical names.

The tape tests read the generated source (target "python", built with ``coarsen.lowering.build``, no Numba): a
value assigned once outside every loop is never taped; a loop-carried scalar whose old value
the reverse sweep reads is pushed once per trip (every intermediate fine-grained, only the
segment's input coarse); an accumulator read only after its last assignment is not taped; a
``while`` loop is reversed by its trip counter; a loop with a closed form tapes once, whatever
its trip count.  Each generated gradient is also run and
compared with the derivative worked out by hand.

The canonical tests lift the same segment written with two different sets of names: the SymPy
partials are identical, the info maps back to each function's own names, and ``real_name`` /
``real_text`` translate the canonical symbols.
"""
import math
import re

import pytest

from coarsen import lowering
from coarsen import symbolic as S
from coarsen.ad.canonical import lift_canonically, real_name, real_text
from coarsen.ad.lift import differentiate_segment
from coarsen.ad.reverse import differentiate_ir
from coarsen.transforms.artifact import Options
from coarsen.analysis.activity import analyze
from coarsen.analysis.segments import plan_segments
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import F64, I64
from coarsen.ir.typeinfer import infer


def single(x):
    y = math.sin(x)
    z = y * y
    return z


def logistic(x, r, n):
    for i in range(n):
        x = r * x * (1.0 - x)
    return x


def accumulate(x, n):
    s = 0.0
    for i in range(n):
        s = s + x * x
    return s


def product(x, n):
    s = 1.0
    for i in range(n):
        s = s * x
    return s


def halve(x):
    while x > 1.0:
        x = x * 0.5
    return x


def generate(fn, types, wrt, coarse):
    f, _ = lower(fn)
    infer(f, types)
    # coarse: the recompute step (plan="auto" follows the cost weights)
    module, _ = differentiate_ir(f, wrt, analyze(f, wrt), "entry",
                                 Options(coarsen=coarse, plan="recompute", target="python"))
    source = lowering.render(module, target="python")
    module = lowering.build(source, name=f"unit_{fn.__name__}", target="python")
    return source, module.entry


def pushed(source):
    """Names pushed on the float tape and on the int tape."""
    return (set(re.findall(r"^\s*_ftape\[_fpos\] = (\w+)$", source, re.MULTILINE)),
            set(re.findall(r"^\s*_itape\[_ipos\] = (\w+)$", source, re.MULTILINE)))


def popped(source):
    return re.findall(r"^\s*(\w+) = _ftape\[_fpos\]$", source, re.MULTILINE)


MODES = [pytest.param(False, id="fine"), pytest.param(True, id="coarse")]


@pytest.mark.parametrize("coarse", MODES)
def test_single_assignments_are_never_taped(coarse):
    source, entry = generate(single, [F64], ("x",), coarse)
    assert "_ftape" not in source and "_itape" not in source
    value, (dx,), tape = entry(0.7)
    assert value == math.sin(0.7) * math.sin(0.7)
    assert dx == pytest.approx(2 * math.sin(0.7) * math.cos(0.7), rel=1e-15)
    assert tape == (0, 0)


def logistic_by_hand(x, r, n):
    dx, dr = 1.0, 0.0
    for _ in range(n):
        dx, dr = r * (1 - 2 * x) * dx, x * (1 - x) + r * (1 - 2 * x) * dr
        x = r * x * (1 - x)
    return x, dx, dr


@pytest.mark.parametrize("coarse, taped, per_trip", [
    pytest.param(False, {"x", "_t2", "_t3"}, 3, id="fine"),    # every intermediate
    pytest.param(True, {"x"}, 1, id="coarse"),                  # the segment's input only
])
def test_loop_carried_scalar_is_taped_once_per_trip(coarse, taped, per_trip):
    source, entry = generate(logistic, [F64, F64, I64], ("x", "r"), coarse)
    assert pushed(source) == (taped, set())
    assert sorted(popped(source)) == sorted(taped)              # each push has its pop
    assert f"    _ftape = _reserve(_ftape, _fpos + {per_trip} * n)" in source.split("\n")
    value, (dx, dr), (floats, ints) = entry(0.3, 3.1, 7)
    x, hx, hr = logistic_by_hand(0.3, 3.1, 7)
    assert value == x
    assert dx == pytest.approx(hx, rel=1e-12) and dr == pytest.approx(hr, rel=1e-12)
    assert (floats, ints) == (per_trip * 7, 0)


@pytest.mark.parametrize("coarse", MODES)
def test_accumulator_read_after_its_loop_is_not_taped(coarse):
    source, entry = generate(accumulate, [F64, I64], ("x",), coarse)
    assert pushed(source) == (set(), set())
    value, (dx,), tape = entry(1.5, 4)
    assert value == 4 * 1.5 * 1.5 and dx == 4 * 2 * 1.5 and tape == (0, 0)


@pytest.mark.parametrize("coarse, floats_per_call", [
    pytest.param(False, lambda n: n, id="fine"),     # s before each trip
    pytest.param(True, lambda n: 1, id="coarse"),    # closed form s*x**n: s once, any n
])
def test_product_tapes_its_old_value(coarse, floats_per_call):
    source, entry = generate(product, [F64, I64], ("x",), coarse)
    assert pushed(source) == ({"s"}, set())
    for n in (5, 40):
        value, (dx,), (floats, ints) = entry(1.1, n)
        assert value == pytest.approx(1.1 ** n, rel=1e-13)
        assert dx == pytest.approx(n * 1.1 ** (n - 1), rel=1e-13)
        assert (floats, ints) == (floats_per_call(n), 0)


def test_while_loop_is_reversed_by_its_trip_counter():
    source, entry = generate(halve, [F64], ("x",), False)
    assert pushed(source) == (set(), set())     # x * 0.5 needs no old value of x
    counter = re.search(r"^        (_trips\d+) \+= 1$", source, re.MULTILINE).group(1)
    assert re.search(rf"^    for _trip\d+ in range\({counter}\):$", source, re.MULTILINE)
    value, (dx,), _ = entry(10.0)
    assert value == 10.0 / 16 and dx == 1.0 / 16


# ---------------------------------------------------------------- canonical names
def named_a(x, y):
    a = x * y
    b = math.sin(a) + x
    return b * a


def named_b(zeta, alpha):
    m = zeta * alpha
    k = math.sin(m) + zeta
    return k * m


def lifted(fn):
    f, _ = lower(fn)
    infer(f, [F64, F64])
    wrt = tuple(f.params)
    facts = analyze(f, wrt)
    (seg,) = plan_segments(f, facts)
    before = (list(seg.stmts), list(seg.inputs), list(seg.outputs), seg.plan)
    info = lift_canonically(differentiate_segment, seg, f.types, facts.active,
                            S.Budget(max_ops=4000, seconds=120), temps=f.temps)
    assert (list(seg.stmts), list(seg.inputs), list(seg.outputs), seg.plan) == before
    return info


def test_two_namings_give_the_same_partials():
    ia, ib = lifted(named_a), lifted(named_b)
    assert ia.names == {"_cv1_0": "x", "_cv1_1": "y", "_cv1_2": "a", "_cv1_4": "b",
                           "_cv1_5": "_ret"}        # _t1 keeps its name (and its number)
    assert ib.names == {"_cv1_0": "zeta", "_cv1_1": "alpha", "_cv1_2": "m", "_cv1_4": "k",
                           "_cv1_5": "_ret"}
    rename = {"x": "zeta", "y": "alpha", "_ret": "_ret"}
    assert set(ia.partials) == {("_ret", "x"), ("_ret", "y")}
    assert {(rename[o], rename[i]) for o, i in ia.partials} == set(ib.partials)
    for (o, i), expr in ia.partials.items():
        # the very same SymPy expression, over canonical symbols: the same rounding
        other = ib.partials[(rename[o], rename[i])]
        assert expr == other and str(expr) == str(other)
        assert {s.name for s in expr.free_symbols} <= {"_cv1_0", "_cv1_1", "_s1_t0",
                                                       "_s1__cv1_2_1"}
    swap = {"x": "zeta", "y": "alpha"}
    assert re.sub(r"\b[xy]\b", lambda m: swap[m.group(0)], ia.formula) == ib.formula
    assert "_cv" not in ia.formula


def test_real_name_and_real_text():
    names = {"_cv1_0": "x", "_cv1_2": "a"}
    assert real_name("_cv1_2", names) == "a"
    assert real_name("_s1__cv1_2_1", names) == "_s1_a_1"    # a lifter symbol of a
    assert real_name("_s1_t0", names) == "_s1_t0"           # a CSE temporary: unchanged
    assert real_name("_cv2_0", names) == "_cv2_0"           # another segment's: unchanged
    assert real_text("_cv1_0*_s1__cv1_2_1 + _cv1_0", names) == "x*_s1_a_1 + x"
