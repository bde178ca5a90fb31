"""The analyses: activity (``coarsen.analysis.activity.analyze``) and segment planning
(``coarsen.analysis.segments.plan_segments``).

Activity is checked on hand-built typed IR: a variable is active exactly when it is a float that
depends on a differentiated input through a differentiable operand (varied) and the result
depends on it (useful); element writes carry both properties through the array.  Segment
planning is checked on small lowered functions: which statements form each segment, which
ride along as passengers, where segments are cut, and that inputs and outputs come in program
order (never sorted by name).
"""
import math

import numpy as np

from coarsen.analysis.activity import analyze, statement_positions
from coarsen.analysis.segments import plan_segments
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import (
    BOOL,
    F64,
    I64,
    Array,
    Assign,
    Const,
    For,
    Function,
    If,
    Loc,
    Segment,
    Store,
    Var,
    walk,
)
from coarsen.ir.printer import format_function
from coarsen.ir.typeinfer import infer

L = Loc("<unit>", 1, 0, "")


def A(target, prim, *args, index=()):
    return Assign(target, prim, tuple(Var(a) if isinstance(a, str) else Const(a) for a in args),
                  L, index=index)


def typed(params, body, result, types):
    f = Function("f", params, body, result, "<unit>")
    f.types = dict(types)
    return f


# ---------------------------------------------------------------- activity
def test_active_is_varied_and_useful():
    f = typed(["x", "y", "k"],
              [A("a", "mul", "x", 2.0),       # varied, useful
               A("b", "mul", "y", 3.0),       # varied, not useful
               A("kf", "float", "k"),         # useful, not varied
               A("e", "mul", "kf", 2.0),      # useful, not varied
               A("d", "mul", "a", "a"),
               A("r", "add", "d", "e")], "r",
              {"x": F64, "y": F64, "k": I64, "a": F64, "b": F64, "kf": F64, "e": F64,
               "d": F64, "r": F64})
    facts = analyze(f, ("x", "y"))
    assert facts.active == {"x", "a", "d", "r"}      # y is differentiated but not useful


def test_zero_derivative_operands_stop_variation():
    f = typed(["x"],
              [A("fl", "floor", "x"),          # zero derivative: not varied
               A("c", "gt", "x", 0.0),         # a comparison: not varied
               A("s", "mul", "fl", "x"),
               A("r", "add", "s", 1.0)], "r",
              {"x": F64, "fl": F64, "c": BOOL, "s": F64, "r": F64})
    assert analyze(f, ("x",)).active == {"x", "s", "r"}


def test_integers_are_never_active():
    f = typed(["x"], [A("i", "int", "x"), A("r", "mul", "x", "i")], "r",
              {"x": F64, "i": I64, "r": F64})
    assert analyze(f, ("x",)).active == {"x", "r"}


def test_element_writes_carry_activity_through_the_array():
    arr = Array("f64", 1)
    f = typed(["a", "x", "z"],
              [Store("a", (Const(0),), Var("x"), None, L),      # a becomes varied through x
               Store("a", (Const(2),), Var("z"), None, L),      # z: not differentiated
               A("r", "getitem", "a", index=(Const(1),))], "r",
              {"a": arr, "x": F64, "z": F64, "r": F64})
    facts = analyze(f, ("x",))
    assert facts.active == {"a", "x", "r"}
    assert facts.stored == {"a"}


def test_defs_loops_and_single_use_temporaries():
    f = typed(["x", "n"],
              [A("s", "copy", 0.0),
               For("i", Const(0), Var("n"), Const(1),
                   [A("_t1", "mul", "x", "x"), A("s", "add", "s", "_t1")], L),
               A("r", "mul", "s", 2.0)], "r",
              {"x": F64, "n": I64, "s": F64, "i": I64, "_t1": F64, "r": F64})
    facts = analyze(f, ("x",))
    assert facts.active == {"x", "_t1", "s", "r"}
    assert facts.defs == {"x": 1, "n": 1, "s": 2, "i": 1, "_t1": 1, "r": 1}
    assert facts.in_loop == {"i", "_t1", "s"}
    assert facts.set_temps == {"_t1"}   # defined once, used once in its block: adjoint is set


def test_statement_positions_number_in_walk_order_with_enclosing_loops():
    inner = A("b", "add", "a", 1.0)
    cond = If(Var("c"), [inner], [], L)
    lp = For("i", Const(0), Var("n"), Const(1), [cond], L)
    first = A("a", "copy", 1.0)
    order, loops_of = statement_positions([first, lp])
    assert [order[id(s)] for s in (first, lp, cond, inner)] == [0, 1, 2, 3]
    assert loops_of[id(first)] == () and loops_of[id(lp)] == ()
    assert loops_of[id(cond)] == (lp,) and loops_of[id(inner)] == (lp,)


# ---------------------------------------------------------------- segment planning
def two_segments(w, x):
    z = x * x
    a = z + 1.0
    q = math.sin(a)
    s = np.sum(w)             # an array operation: cuts the run
    c = s * z
    d = c * a + q
    return d


def with_element_read(w, x, i):
    p = x * 2.0
    v = w[i]                  # an element read: a passenger, hoisted to the front
    r = p * v
    return r * p


def one_op(x, y):
    a = x * y
    return a


def loop_product(p, a, n):
    for i in range(n):
        p = p * a
    return p


def planned(fn, types, wrt):
    f, _ = lower(fn)
    infer(f, types)
    facts = analyze(f, wrt)
    return f, plan_segments(f, facts)


def targets(stmts):
    return [s.target for s in stmts]


def test_array_operation_cuts_two_segments_outputs_in_definition_order():
    f, segs = planned(two_segments, [Array("f64", 1), F64], ("w", "x"))
    assert [s.index for s in segs] == [1, 2]
    s1, s2 = segs
    assert targets(s1.stmts) == ["z", "a", "q"]
    assert s1.inputs == ["x"]
    assert s1.outputs == ["z", "a", "q"]        # definition order, not sorted (a, q, z)
    assert targets(s2.stmts) == ["c", "_t1", "d", "_ret"]
    assert s2.inputs == ["s", "z", "a", "q"]    # order of first read
    assert s2.outputs == ["_ret"]
    assert s2.plan.lines[0] == s1.plan.lines[1] + 2    # the np.sum line is between
    # the function body is now: segment 1, the sum, segment 2
    kinds = [type(s).__name__ if not isinstance(s, Assign) else s.op for s in f.body]
    assert kinds == ["Segment", "sum", "Segment"]


def test_element_read_rides_along_as_passenger():
    _, segs = planned(with_element_read, [Array("f64", 1), F64, I64], ("w", "x"))
    (seg,) = segs
    assert targets(seg.passengers) == ["v"]
    assert targets(seg.stmts) == ["v", "p", "r", "_ret"]   # passengers first
    assert seg.inputs == ["x", "v"] and seg.outputs == ["_ret"]


def test_one_active_operation_is_no_segment():
    f, segs = planned(one_op, [F64, F64], ("x", "y"))
    assert segs == []
    assert not any(isinstance(s, Segment) for s in walk(f.body))


def test_whole_loop_body_is_a_segment_even_with_one_operation():
    f, segs = planned(loop_product, [F64, F64, I64], ("p", "a"))
    (seg,) = segs
    (lp,) = [s for s in f.body if isinstance(s, For)]
    assert lp.body == [seg]
    assert targets(seg.stmts) == ["p"]
    assert seg.inputs == ["p", "a"] and seg.outputs == ["p"]   # p is carried: read, then set
    assert "segment 1 (block; in p, a; out p):" in format_function(f)
