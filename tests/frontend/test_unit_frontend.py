"""The frontend (``coarsen.frontend``): source -> IR, and the hygienic ``Namer``.

Each function below is lowered (``coarsen.frontend.lower.lower``), typed
(``coarsen.ir.typeinfer.infer``) and printed (``coarsen.ir.printer.format_function``); the
tests pin the exact IR text, line by line: early ``return`` becomes a flag and guards,
``break`` turns a ``for`` into a ``while`` with an explicit counter, helpers are inlined under
fresh names, a user name that looks like a compiler name is escaped (``_y`` -> ``u_y``), and a
name reused for an unrelated value is split into SSA webs (``c``, ``c_2``).
"""
import math

import pytest

import coarsen
from coarsen.frontend.lower import lower
from coarsen.frontend.names import RESERVED_NAMES, Namer
from coarsen.ir.nodes import F64, I64
from coarsen.ir.printer import format_function
from coarsen.ir.typeinfer import infer


def early_return(x):
    if x > 1.0:
        return x * x
    return 2.0 * x


def break_loop(x, n):
    s = 0.0
    for i in range(n):
        if s > 10.0:
            break
        s = s + x
    return s


def scale(a, k):
    t = a * k
    return t + 1.0


def calls_helper(x, y):
    return scale(x, y) * scale(y, x)


def underscore_local(x):
    _y = x * x
    return _y + math.sin(x)


def reused_index(x, n):
    t = 0.0
    for c in range(n):
        t = t + x
    for c in range(n):
        t = t * x
    return t


def retyped_name(x, n):
    c = x * 2.0
    t = c + 1.0
    for c in range(n):
        t = t * x + c
    return t


def ir(fn, *types):
    fn_ir, _ = lower(fn)
    infer(fn_ir, list(types))
    return format_function(fn_ir)


def lines(text):
    return text.rstrip("\n").split("\n")


def assert_in_order(text, expected):
    """Each expected line occurs in ``text`` as a whole line (indentation included), in order."""
    got = lines(text)
    k = 0
    for want in expected:
        while k < len(got) and got[k] != want:
            k += 1
        assert k < len(got), f"missing (in order): {want!r}\n{text}"
        k += 1


# ---------------------------------------------------------------- lowering
def test_early_return_becomes_flag_and_guard():
    text = ir(early_return, F64)
    assert_in_order(text, [
        "def early_return(x: f64):",
        "  _returned: bool = copy(False)",
        "  _ret: f64 = copy(0.0)",
        "  _t1: bool = gt(x, 1.0)",
        "  if _t1:",
        "    _ret: f64 = mul(x, x)",
        "    _returned: bool = copy(True)",
        "  _ret = gamma(_t1, _ret, _ret)",
        "  _t2: bool = not(_returned)",      # the rest of the function runs under the guard
        "  if _t2:",
        "    _ret: f64 = mul(2.0, x)",
        "  return _ret",
    ])
    # the only return is the function's last line: no early exit survives in the IR
    assert [ln for ln in lines(text) if "return" in ln.split()] == ["  return _ret"]


def test_break_turns_for_into_while_with_counter():
    text = ir(break_loop, F64, I64)
    assert not any(ln.lstrip().startswith("for ") for ln in lines(text))
    assert_in_order(text, [
        "  s: f64 = copy(0.0)",
        "  _t1: i64 = copy(n)",
        "  _i_next: i64 = copy(0)",
        "  _brk: bool = copy(False)",
        "  while:  # mu: i, _i_next, _brk, s",
        "    _t3: bool = not(_brk)",
        "      _t2: bool = range_cont(_i_next, _t1, 1)",
        "    break unless _t2",
        "    i: i64 = copy(_i_next)",
        "    _i_next: i64 = add(_i_next, 1)",
        "    _t4: bool = gt(s, 10.0)",
        "    if _t4:",
        "      _brk: bool = copy(True)",
        "    _t5: bool = not(_brk)",          # the rest of the body is guarded by the flag
        "    if _t5:",
        "      s: f64 = add(s, x)",
        "  _ret: f64 = copy(s)",
    ])


def test_helper_is_inlined_under_fresh_names():
    assert lines(ir(calls_helper, F64, F64)) == [
        "def calls_helper(x: f64, y: f64):",
        "  scale_t: f64 = mul(x, y)",
        "  _scale_result: f64 = add(scale_t, 1.0)",
        "  scale2_t: f64 = mul(y, x)",
        "  _scale2_result: f64 = add(scale2_t, 1.0)",
        "  _ret: f64 = mul(_scale_result, _scale2_result)",
        "  return _ret",
    ]


def test_underscore_name_is_escaped():
    assert lines(ir(underscore_local, F64)) == [
        "def underscore_local(x: f64):",
        "  u_y: f64 = mul(x, x)",
        "  _t1: f64 = sin(x)",
        "  _ret: f64 = add(u_y, _t1)",
        "  return _ret",
    ]


def test_ir_text_is_the_typed_lowering():
    assert coarsen.ir_text(underscore_local, 0.5) == ir(underscore_local, F64)


def test_reused_loop_index_is_split():
    assert lines(ir(reused_index, F64, I64)) == [
        "def reused_index(x: f64, n: i64):",
        "  t: f64 = copy(0.0)",
        "  _t1: i64 = copy(n)",
        "  for c in range(0, _t1, 1):  # mu: t",
        "    t: f64 = add(t, x)",
        "  _t2: i64 = copy(n)",
        "  for c_2 in range(0, _t2, 1):  # mu: t",
        "    t: f64 = mul(t, x)",
        "  _ret: f64 = copy(t)",
        "  return _ret",
    ]


def test_name_reused_with_another_type_is_split():
    # c is a float, then (read outside its loop, so the loop becomes a while) an int index
    text = ir(retyped_name, F64, I64)
    assert_in_order(text, [
        "  c: f64 = mul(x, 2.0)",
        "  t: f64 = add(c, 1.0)",
        "    c_2: i64 = copy(_c_next)",
        "    t: f64 = add(_t3, c_2)",
    ])


# ---------------------------------------------------------------- Namer
def test_escapes_are_never_compiler_looking_and_avoid_every_identifier():
    seed = {"_y", "u_y", "x_bar", "x_bar_v", "np", "sum", "value_and_grad_f", "x"}
    n = Namer(seed=seed)
    got = {s: n.user(s) for s in ["_y", "x_bar", "np", "sum", "value_and_grad_f", "_", "x"]}
    assert got == {"_y": "u_y2", "x_bar": "x_bar_v2", "np": "np_v", "sum": "sum_v",
                   "value_and_grad_f": "value_and_gradv_f", "_": "u_", "x": "x"}
    escapes = [v for k, v in got.items() if k != v]
    assert len(set(escapes)) == len(escapes)
    assert not set(escapes) & seed
    for v in got.values():
        assert not Namer.compiler_looking(v)
        assert v not in RESERVED_NAMES


@pytest.mark.parametrize("name", ["_t1", "_ftape", "_ret", "x_bar", "np", "math", "numba",
                                  "range", "float", "value_and_grad_loss"])
def test_compiler_looking(name):
    assert Namer.compiler_looking(name)


@pytest.mark.parametrize("name", ["x", "u_y", "bar", "x_bar_v", "t_", "np_v"])
def test_not_compiler_looking(name):
    assert not Namer.compiler_looking(name)


def test_user_names_are_memoized_and_fresh_names_are_not():
    n = Namer(seed={"_a", "t"})
    first = n.user("_a")
    assert first == "u_a"
    assert n.user("_a") == first                     # one source name, one IR name
    assert n.user_map == {"_a": "u_a"}
    a, b = n.user_fresh("t"), n.user_fresh("t")      # helpers' locals: a new name each time
    assert (a, b) == ("t2", "t3")
    assert n.temp() == "_t1" and n.temp() == "_t2"
    assert n.fresh("_t1") == "_t12"                  # never hands out a used name
