"""In-place updates and aliases (``coarsen.ir.inplace``): the guards the mutation run
(``python -m tests.mutation coarsen/ir/inplace.py``) found unpinned.

An alias ``v = w`` of which either name is written in place is resolved only where that is
exact: up to the first statement of its block that rebinds ``v`` or ``w`` (``w = v`` back, the
same array, is no rebinding), and only when no use of this ``v`` lies past that statement.  The
returned variable and a backward rule's cotangents stay themselves; an alias that cannot be
resolved is refused by activity analysis (``writing into 'v', which is a view of 'w'``).

Most of these shapes (a rebinding of ``v`` or ``w`` in the alias's own block and SSA web) come
from loop-carried variables, or are IR that the frontend's SSA split does not produce: those are
checked on hand-built typed IR, by the exact output of ``apply_inplace``.  The programs are
checked against the oracle (values and gradients), on both targets for one of them.
"""
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.ir.inplace import apply_inplace
from coarsen.ir.nodes import Array, Assign, Const, Function, If, Loc, Scalar, Slice, Store, Var
from coarsen.ir.printer import format_function
from tests.oracle import check_against_oracle

R = np.random.default_rng(48)
L = Loc("<unit>", 1, 0, "")
V1 = Array("f64", 1)
F64 = Scalar("f64")
ALL = (Slice(None, None, None),)


def vec(n):
    return R.uniform(0.5, 1.5, n)


# ------------------------------------------------------------------ hand-built IR
def op(a):
    return Var(a) if isinstance(a, str) else Const(a)


def A(target, prim, *args):
    return Assign(target, prim, tuple(op(a) for a in args), L)


def add_into(array, value):
    """``array[:] += value``, as ``_lower_augmented`` writes ``array += value``."""
    return Store(array, ALL, op(value), "add", L)


def function(params, body, result, arrays, scalars=(), live_out=frozenset()):
    types = {**{n: V1 for n in arrays}, **{n: F64 for n in scalars}}
    return Function("f", list(params), body, result, "<unit>", types=types, live_out=live_out)


def rewritten(f):
    """The body of ``f`` after ``apply_inplace``, one line per statement (types left out)."""
    apply_inplace(f)
    out = []
    for line in format_function(f).splitlines()[1:]:
        out.append(line.replace(": f64[:]", "").replace(": f64", ""))
    return out


def test_v_rebound_in_the_block():
    """``v = w`` holds up to ``v = mul(v, 2.0)``: that statement reads ``w`` and defines ``v``
    anew, and the uses after it read the new ``v``; ``w = v`` before it is the same array."""
    f = function(["w", "x"], [
        A("v", "copy", "w"),
        add_into("v", "x"),
        A("w", "copy", "v"),            # the same array: no rebinding
        A("v", "mul", "v", 2.0),        # v rebound
        A("y", "mul", "v", "x"),
        A("s", "sum", "y"),
        A("_ret", "add", "s", 1.0),
    ], "_ret", arrays="wxvy", scalars=["s", "_ret"])
    assert rewritten(f) == [
        "  w[:] += x",
        "  v = mul(w, 2.0)",
        "  y = mul(v, x)",
        "  s = sum(y)",
        "  _ret = add(s, 1.0)",
        "  return _ret",
    ]
    assert f.types["v"] == V1 and f.types["w"] == V1     # v is still defined and read


def test_the_alias_goes_and_its_type_with_it():
    f = function(["w", "x"], [
        A("v", "copy", "w"),
        add_into("v", "x"),
        A("y", "mul", "v", "x"),
        A("s", "sum", "y"),
    ], "s", arrays="wxvy", scalars=["s"])
    assert rewritten(f) == ["  w[:] += x", "  y = mul(w, x)", "  s = sum(y)", "  return s"]
    assert "v" not in f.types and f.types["w"] == V1


@pytest.mark.parametrize("late_use", ["read", "store", "rebinding"])
def test_w_rebound_with_a_use_of_v_after(late_use):
    """``w`` rebound after ``v = w``: past it ``v`` is still the old array.  A use of ``v``
    there (a read, a store into it, a rebinding that reads it) keeps the alias."""
    late = {"read": [A("y", "mul", "v", "x")],
            "store": [add_into("v", "x")],
            "rebinding": [If(Var("c"), [A("v", "mul", "v", 2.0)], [], L)]}[late_use]
    body = [A("v", "copy", "w"), add_into("v", "x"), A("w", "mul", "x", 3.0)] + late \
        + [A("s", "sum", "w")]
    f = function(["w", "x", "c"], body, "s", arrays="wxvy", scalars=["s"])
    f.types["c"] = Scalar("bool")
    out = rewritten(f)
    assert out[:3] == ["  v = copy(w)", "  v[:] += x", "  w = mul(x, 3.0)"], out
    assert f.types["v"] == V1


def test_w_rebound_and_read_by_the_rebinding():
    """The rebinding of ``w`` reads ``v`` (the old ``w``): it reads ``w`` after the rewrite, and
    what follows it is kept."""
    f = function(["w", "x"], [
        A("y", "mul", "x", "x"),        # the alias is not the block's first statement
        A("v", "copy", "w"),
        add_into("v", "y"),
        A("w", "mul", "v", 3.0),
        A("s", "sum", "w"),
    ], "s", arrays="wxvy", scalars=["s"])
    assert rewritten(f) == ["  y = mul(x, x)", "  w[:] += y", "  w = mul(w, 3.0)", "  s = sum(w)",
                            "  return s"]
    assert "v" not in f.types


def test_w_rebound_right_after_the_alias():
    """The rebinding is the statement right after ``v = w`` (here the alias's third), and the
    old array is written and read after it: the alias stays."""
    body = [
        A("y", "mul", "x", "x"),
        A("z", "mul", "y", "x"),
        A("v", "copy", "w"),
        A("w", "mul", "x", 3.0),        # w rebound
        add_into("v", "z"),             # the old array
        A("t", "mul", "v", "w"),
        A("s", "sum", "t"),
    ]
    f = function(["w", "x"], list(body), "s", arrays="wxvyzt", scalars=["s"])
    assert rewritten(f)[2:5] == ["  v = copy(w)", "  w = mul(x, 3.0)", "  v[:] += z"]


def test_w_rebound_before_and_after_the_alias():
    """A rebinding of ``w`` before ``v = w`` does not end its range; the one after does."""
    f = function(["w", "x"], [
        A("w", "mul", "w", 2.0),
        A("z", "mul", "x", "x"),
        A("v", "copy", "w"),
        add_into("v", "z"),
        A("t", "mul", "v", "x"),
        A("w", "mul", "t", 3.0),        # w rebound: the range ends here
        A("s", "sum", "w"),
    ], "s", arrays="wxvzt", scalars=["s"])
    assert rewritten(f) == ["  w = mul(w, 2.0)", "  z = mul(x, x)", "  w[:] += z", "  t = mul(w, x)",
                            "  w = mul(t, 3.0)", "  s = sum(w)", "  return s"]


def test_v_rebound_before_any_write():
    """``w = v`` in the range becomes ``w = w`` and goes, even where ``w`` is never written
    (only the new ``v`` is)."""
    f = function(["w", "x"], [
        A("v", "copy", "w"),
        A("w", "copy", "v"),            # the same array
        A("v", "mul", "v", 2.0),        # v rebound
        add_into("v", "x"),             # the new v written: v = w is an alias to resolve
        A("s", "sum", "v"),
    ], "s", arrays="wxv", scalars=["s"])
    assert rewritten(f) == ["  v = mul(w, 2.0)", "  v[:] += x", "  s = sum(v)", "  return s"]


def test_a_self_copy_goes_and_the_next_alias_is_resolved():
    f = function(["w", "x", "z"], [
        A("w", "copy", "w"),
        A("v", "copy", "x"),
        add_into("v", "z"),
        add_into("w", "z"),
        A("s", "sum", "w"),
    ], "s", arrays="wxzv", scalars=["s"])
    assert rewritten(f) == ["  x[:] += z", "  w[:] += z", "  s = sum(w)", "  return s"]


def test_the_update_result_is_the_array_it_updates():
    """``w_2 = add(w, x)`` marked in place: the web of ``w_2`` is ``w``'s again (renamed, its
    type gone); a parameter keeps its name."""
    f = function(["w", "x"], [
        Assign("w_2", "add", (Var("w"), Var("x")), L, attrs=(("inplace", True),)),
        A("y", "mul", "w_2", "x"),
        A("s", "sum", "y"),
    ], "s", arrays=["w", "x", "w_2", "y"], scalars=["s"])
    assert rewritten(f) == ["  w[:] += x", "  y = mul(w, x)", "  s = sum(y)", "  return s"]
    assert "w_2" not in f.types and f.types["w"] == V1


@pytest.mark.parametrize("kept", ["result", "live_out", "used_after"])
def test_an_alias_kept_does_not_stop_the_others(kept):
    """The returned array (forward mode), a backward rule's cotangent and an alias with a use
    past a rebinding stay; the alias after them is still resolved."""
    first = [A("v", "copy", "w"), add_into("v", "x")]
    if kept == "used_after":
        first += [A("w", "mul", "x", 3.0), A("y", "mul", "v", "x")]
    tail = [A("u", "copy", "x"), add_into("u", "z"), A("s", "sum", "u")]
    f = function(["w", "x", "z"], first + tail, "v" if kept == "result" else "s",
                 arrays="wxzvuy", scalars=["s"],
                 live_out=frozenset({"v"}) if kept == "live_out" else frozenset())
    out = rewritten(f)
    assert out[:2] == ["  v = copy(w)", "  v[:] += x"], out
    assert out[-3:-1] == ["  x[:] += z", "  s = sum(x)"], out
    assert f.types["v"] == V1 and "u" not in f.types


# ------------------------------------------------------------------ programs
def rebound_by_a_read_of_the_alias(w, x):
    for k in range(2):
        v = w
        v += x                  # the caller's w in the first trip
        w = v * 3.0             # w rebound (one web with the parameter: loop-carried)
    return np.sum(w * w)


def old_array_read_after_rebinding(w, x):
    s = 0.0
    for k in range(2):
        v = w
        v += x
        w = x * 3.0
        s += np.sum(v * x)      # v is the old w here
    return s + np.sum(w * w)


def alias_read_by_the_next_trip(w, x):
    s = 0.0
    v = x * 1.0
    for k in range(2):
        s += np.sum(v * x)      # the trip before's v: w from the second trip on
        v = w
        v += x
    return s


def alias_rebound_in_an_inner_loop(w, x):
    for k in range(2):
        v = w
        v += x
        for j in range(2):
            v = v * 2.0         # one web with v += x: the first inner trip reads it
    return np.sum(w * x)


def _rebinds_its_parameter(a, x):
    for k in range(2):
        v = a
        v += x
        a = x * 3.0
        v[0] = 7.0 * x[1]       # the old a (the caller's w in the first trip)


def store_into_the_old_array(w, x):
    _rebinds_its_parameter(w, x)
    return np.sum(w * w)


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_rebound_by_a_read_of_the_alias(target):
    check_against_oracle(rebound_by_a_read_of_the_alias, (vec(3), vec(3)), target=target)


@pytest.mark.parametrize("fn", [old_array_read_after_rebinding, alias_read_by_the_next_trip,
                                alias_rebound_in_an_inner_loop, store_into_the_old_array])
def test_alias_not_resolvable_is_refused(fn):
    """Resolving these aliases would read or write the wrong array; they are refused instead."""
    with pytest.raises(CoarsenError, match="which is a view of 'w'"):
        coarsen.ir_text(fn, vec(3), vec(3))


def _scale(a):
    a *= 1.5
    return np.sum(a)


def read_before_a_helper(A, x):
    A[1] *= _scale(A) * x[0]        # a row: its read moves after the call
    A[0, 2] -= _scale(A) * x[1]     # an element: read before the call
    return np.sum(A * A)


def test_the_read_first_mark_is_consumed():
    """``aug_read`` tells this pass which reads to move; it is gone after it (later passes
    leave statements with attributes alone)."""
    text = coarsen.ir_text(read_before_a_helper, R.uniform(0.5, 1.5, (2, 3)), vec(2))
    assert "aug_read" not in text, text
    check_against_oracle(read_before_a_helper, (R.uniform(0.5, 1.5, (2, 3)), vec(2)))
