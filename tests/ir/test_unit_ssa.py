"""``coarsen.ir.ssa.split_webs`` on hand-built IR.

Checked: the input function is not modified; a value carried around a loop and a value merged
at the end of an ``if`` each stay one web (one name); a loop index reused by a later loop, and
a name reassigned to an unrelated value, are split into ``<name>_<k>`` webs, the parameter's
(or else the first defined) web keeping the name and new names skipping those in use.
"""
from coarsen.ir.nodes import Assign, Const, For, Function, If, Loc, Store, Var
from coarsen.ir.printer import format_function
from coarsen.ir.ssa import split_webs

L = Loc("<unit>", 1, 0, "")


def op(v):
    return Var(v) if isinstance(v, str) else Const(v)


def A(target, prim, *args):
    return Assign(target, prim, tuple(op(a) for a in args), L)


def loop(var, stop, body):
    return For(var, Const(0), Var(stop), Const(1), body, L)


def fn(params, body, result):
    return Function("f", params, body, result, "<unit>")


def text(f):
    """The printed IR without its header (untyped, so no types)."""
    return format_function(f).rstrip("\n").split("\n")[1:]


def test_reused_loop_index_splits_and_input_is_untouched():
    f = fn(["x", "n"], [A("s", "copy", 0.0),
                        loop("i", "n", [A("s", "add", "s", "i")]),
                        loop("i", "n", [A("s", "mul", "s", "i")])], "s")
    before = format_function(f)
    g = split_webs(f)
    assert text(g) == [
        "  s = copy(0.0)",
        "  for i in range(0, n, 1):  # mu: s",
        "    s = add(s, i)",
        "  for i_2 in range(0, n, 1):  # mu: s",
        "    s = mul(s, i_2)",
        "  return s",
    ]
    assert format_function(f) == before               # the input is not modified
    assert f.body[2].var == "i" and f.body[2].body[0].args == (Var("s"), Var("i"))


def test_loop_carried_value_stays_one_web():
    f = fn(["x", "r", "n"], [loop("i", "n", [A("x", "mul", "x", "r")]),
                             A("y", "add", "x", 1.0)], "y")
    assert text(split_webs(f)) == [
        "  for i in range(0, n, 1):  # mu: x",
        "    x = mul(x, r)",
        "  y = add(x, 1.0)",
        "  return y",
    ]


def test_if_merge_stays_one_web():
    f = fn(["x", "c"], [If(Var("c"), [A("y", "mul", "x", 2.0)], [A("y", "mul", "x", 3.0)], L),
                        A("r", "add", "y", 1.0)], "r")
    assert text(split_webs(f)) == [
        "  if c:",
        "    y = mul(x, 2.0)",
        "  else:",
        "    y = mul(x, 3.0)",
        "  y = gamma(c, y, y)",
        "  r = add(y, 1.0)",
        "  return r",
    ]


def test_one_armed_if_merges_with_the_value_before_it():
    f = fn(["x", "c"], [A("y", "copy", 0.0),
                        If(Var("c"), [A("y", "mul", "x", 2.0)], [], L),
                        A("r", "add", "y", 1.0)], "r")
    names = {st.target for st in split_webs(f).body if isinstance(st, Assign)}
    assert names == {"y", "r"}


def test_unrelated_reassignment_splits_and_skips_names_in_use():
    # c: an int, then (after c_2 is taken by the user) an unrelated float
    f = fn(["x"], [A("c", "copy", 1), A("d", "add", "c", 1), A("c_2", "copy", 0.5),
                   A("c", "mul", "x", 2.0), A("r", "add", "c", "d"), A("q", "add", "r", "c_2")],
           "q")
    assert text(split_webs(f)) == [
        "  c = copy(1)",
        "  d = add(c, 1)",
        "  c_2 = copy(0.5)",
        "  c_3 = mul(x, 2.0)",
        "  r = add(c_3, d)",
        "  q = add(r, c_2)",
        "  return q",
    ]


def test_parameter_web_keeps_its_name():
    f = fn(["x"], [A("a", "mul", "x", 2.0), A("x", "copy", 3.0), A("r", "add", "a", "x")], "r")
    assert text(split_webs(f)) == [
        "  a = mul(x, 2.0)",
        "  x_2 = copy(3.0)",
        "  r = add(a, x_2)",
        "  return r",
    ]


def test_store_uses_the_array_web_and_defines_nothing():
    # a[0] = x writes the array in place: the later read of a is the same web
    f = fn(["a", "x"], [Store("a", (Const(0),), Var("x"), None, L),
                        Assign("r", "getitem", (Var("a"),), L, index=(Const(1),))], "r")
    assert text(split_webs(f)) == [
        "  a[0] = x",
        "  r = getitem(a[1])",
        "  return r",
    ]


def test_result_follows_its_web():
    f = fn(["x"], [A("r", "copy", 3.0), A("y", "add", "r", 1.0), A("r", "mul", "x", "y")], "r")
    g = split_webs(f)
    assert text(g)[-2:] == ["  r_2 = mul(x, y)", "  return r_2"]
    assert g.result == "r_2" and f.result == "r"
