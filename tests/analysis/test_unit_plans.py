"""Typed segment plans (``coarsen.analysis.plans``), compiler names known by origin
(``Function.temps``, the emitter's made names), and the generated code's segment steps.

Plans: planning gives each segment a ``SegmentPlan`` with its lines; lifting returns a
``LiftedSegment``, a ``ClosedFormLoop`` or a ``Fallback``.  Temporaries: the analyses ask
``fn.temps``, so a temporary is one because the compiler made it, whatever its spelling, and
cleanup removes only names the compiler made.  Steps: a segment whose output is also its input
(``x = r*x*(1 - x)``) updates ``x_bar`` in place, and the gradient still matches the oracle.
"""
import math

import gast
import pytest

import coarsen
from coarsen import symbolic as S
from coarsen.ad.canonical import lift_canonically, show_temps
from coarsen.ad.lift import closed_form_segment, differentiate_segment
from coarsen.ad.reverse import differentiate_ir
from coarsen.transforms.artifact import Options
from coarsen.ad.reverse.cleanup import drop_dead_adjoint_code
from coarsen.analysis.activity import analyze
from coarsen.analysis.plans import ClosedFormLoop, Fallback, LiftedSegment, SegmentPlan
from coarsen.analysis.segments import plan_segments
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import F64, I64, Assign, Const, For, Function, Loc, Var, walk
from coarsen.ir.typeinfer import infer
from tests.oracle import fd_grad

L = Loc("<unit>", 1, 0, "")


def logistic(r, x0, n):
    x = x0
    for i in range(n):
        x = r * x * (1.0 - x)
    return x


def arith(a, n):
    s = 0.0
    for i in range(n):
        s += a * i
    return s


def two(x, y):
    a = x * y
    return math.sin(a) * a + x


def planned(fn, types):
    f, _ = lower(fn)
    infer(f, types)
    wrt = tuple(p for p, t in zip(f.params, types) if t == F64)
    facts = analyze(f, wrt)
    return f, facts, plan_segments(f, facts)


def test_planning_gives_typed_plans_and_lifting_typed_results():
    f, facts, (seg,) = planned(two, [F64, F64])
    assert isinstance(seg.plan, SegmentPlan) and seg.plan.result is None
    first = two.__code__.co_firstlineno
    assert seg.plan.lines == (first + 1, first + 2) and seg.plan.kind == "block"
    budget = S.Budget(max_ops=4000, seconds=60)
    res = lift_canonically(differentiate_segment, seg, f.types, facts.active, budget,
                           temps=f.temps)
    assert isinstance(res, LiftedSegment) and res.kind == "block"
    assert set(res.partials) == {("_ret", "x"), ("_ret", "y")}
    assert len(res.paths) == 1 and res.names and "_cv" not in res.formula
    # a closed form for a loop; a Fallback (with its reason) where there is none
    f, facts, (seg,) = planned(arith, [F64, I64])
    loop = next(s for s in walk(f.body) if isinstance(s, For))
    cf = lift_canonically(closed_form_segment, seg, f.types, facts.active, budget, loop=loop,
                          temps=f.temps)
    assert isinstance(cf, ClosedFormLoop) and cf.carried == ["s"] and cf.kind == "loop"
    f, facts, (seg,) = planned(logistic, [F64, F64, I64])
    loop = next(s for s in walk(f.body) if isinstance(s, For))
    fb = lift_canonically(closed_form_segment, seg, f.types, facts.active, budget, loop=loop,
                          temps=f.temps)
    assert isinstance(fb, Fallback) and "no closed form" in fb.reason


def test_the_driver_leaves_plans_on_its_segments():
    f, _ = lower(arith)
    infer(f, [F64, I64])
    _, em = differentiate_ir(f, ("a",), analyze(f, ("a",)), "entry", Options(target="python"))
    (seg,) = em.segments
    assert isinstance(seg.plan.lifted, ClosedFormLoop) and seg.plan.kind == "loop"
    assert seg.plan.lifted.loop is not None and seg.plan.fallback is None


def test_temporaries_are_known_by_origin_not_spelling():
    f, _ = lower(two)
    assert f.temps and all(any(isinstance(s, Assign) and s.target == t for s in walk(f.body))
                           for t in f.temps)
    # a hand-built function says which names are temporaries: spelling does not matter
    body = [Assign("s", "copy", (Var("x"),), L),
            For("i", Const(0), Var("n"), Const(1),
                [Assign("tmp", "mul", (Var("x"), Var("x")), L),
                 Assign("s", "add", (Var("s"), Var("tmp")), L)], L)]
    types = {"x": F64, "n": I64, "s": F64, "i": I64, "tmp": F64}

    def set_temps(temps):
        fn = Function("f", ["x", "n"], list(body), "s", "<unit>", types=dict(types), temps=temps)
        return analyze(fn, ("x",)).set_temps
    assert set_temps(frozenset({"tmp"})) == {"tmp"}
    assert set_temps(frozenset()) == set()


def test_cleanup_removes_only_names_the_compiler_made():
    body = gast.parse("a_bar = 0.0\nb_bar = 0.0\n_g1 = 1.0\nreturn 0.0\n").body
    kept = drop_dead_adjoint_code(body, {"a_bar", "_g1"})
    assert [s.targets[0].id for s in kept if isinstance(s, gast.Assign)] == ["b_bar"]


def test_formulas_show_the_source_for_temporaries():
    g = coarsen.differentiate(arith, wrt="a", target="python")
    (entry,) = g.report(1.3, 7).segments
    assert "Max(0, n)" in entry["formula"] and "_t" not in entry["formula"]
    f, _ = lower(two)
    t = next(iter(sorted(f.temps)))
    assert show_temps(f"_ret = {t}", f) == "_ret = " + show_temps(t, f)
    assert "_t" not in show_temps(f"y = 2*{t}", f)


@pytest.fixture(scope="module")
def logistic_python():
    return coarsen.differentiate(logistic, wrt=("r", "x0"), target="python", plan="recompute")


def test_segment_output_that_is_its_input_is_updated_in_place(logistic_python):
    src = logistic_python.source_for(3.1, 0.3, 20)
    assert "_g1" not in src and "x_bar = x_bar * (" in src
    # the loop header's comment appears once in the forward sweep: passengers of no segment
    # stay in program order (_t1 = n right before its loop)
    fwd = src.split("# reverse sweep")[0]
    assert fwd.count("# for i in range(n):") == 1
    args = (3.1, 0.3, 20)
    _, (dr, dx0) = logistic_python.value_and_grad(*args)
    ref = fd_grad(logistic, args, (0, 1))
    assert dr == pytest.approx(float(ref[0]), rel=1e-9) and dx0 == pytest.approx(float(ref[1]), rel=1e-9)

