"""The conditions of ``coarsen.ad.reverse.dot_loops`` on hand-written statements: the plain
loop and its variants are rewritten, the input is not modified, and each near miss (a condition
of the module's docstring not met) stays a loop.  Gradients, bits and variants:
``test_dot_loops.py``.
"""
import ast

import gast
import pytest

from coarsen.ad.reverse.dot_loops import dot_loop_calls
from coarsen.ir.nodes import Array, Scalar

F2, F1, I1 = Array("f64", 2), Array("f64", 1), Array("i64", 1)
TYPES = {"L": F2, "x": F1, "y": F1, "J": I1, "acc": Scalar("f64"), "iacc": Scalar("i64"),
         "i": Scalar("i64"), "n": Scalar("i64"), "c": Scalar("f64")}

LOOP = """
acc = 0.0
for _k in range(n):
    _t1 = L[i, _k]
    _t2 = x[_k]
    _t3 = _t1 * _t2
    acc = acc + _t3
out = acc
"""


def _text(body):
    return ast.unparse(ast.fix_missing_locations(gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


def _run(text, types=TYPES):
    new, helpers = dot_loop_calls(gast.parse(text).body, types)
    return _text(new), helpers


def test_the_pass_rewrites_the_plain_loop_and_leaves_its_input_alone():
    body = gast.parse(LOOP).body
    before = gast.dump(gast.Module(body=body, type_ignores=[]))
    new, helpers = dot_loop_calls(body, TYPES)
    assert gast.dump(gast.Module(body=body, type_ignores=[])) == before
    text = _text(new)
    assert "acc = _dot_acc(acc, L[i, :], x, n)" in text and "for _k" not in text
    assert helpers == {"_dot_acc"}
    # the product's other order, the accumulator on the right, reads inline, a nested loop
    text, _ = _run("""
for i in range(n):
    acc = 0.0
    for _k in range(n):
        acc = x[_k] * L[_k, i] + acc
    y[i] = acc
""")
    assert "acc = _dot_acc(acc, x, L[:, i], n)" in text and "for _k" not in text


NEAR_MISSES = {
    "a temporary read after the loop": LOOP + "z = _t1\n",
    "a temporary assigned twice": LOOP.replace("    _t2 = x[_k]\n", "    _t2 = x[_k]\n    _t2 = x[_k]\n"),
    "an int accumulator": LOOP.replace("acc", "iacc"),
    "an index that is not the loop's variable alone": LOOP.replace("x[_k]", "x[_k + 1]"),
    "the loop's variable twice": LOOP.replace("L[i, _k]", "L[_k, _k]"),
    "an index the loop assigns, read after it": LOOP.replace("    _t1 = L[i, _k]\n", "    i = 2\n    _t1 = L[i, _k]\n"),
    "an index that is a float": LOOP.replace("L[i, _k]", "L[c, _k]"),
    "an int array": LOOP.replace("x[_k]", "J[_k]"),
    "a call in the product": LOOP.replace("_t1 * _t2", "_t1 * np.sin(_t2)"),
    "a sum, not a product": LOOP.replace("_t1 * _t2", "_t1 + _t2"),
    "a difference": LOOP.replace("acc + _t3", "acc - _t3"),
    "the accumulator in the product": LOOP.replace("_t1 * _t2", "_t1 * acc"),
    "a temporary the sum does not read": LOOP.replace("    _t3 = _t1 * _t2\n",
                                                      "    _t3 = _t1 * _t2\n    _t4 = np.log(_t2)\n"),
    "the loop's variable read after it": LOOP + "z = _k\n",
    "an else": LOOP.replace("out = acc", "else:\n    acc = 1.0\nout = acc"),
    "a range with a start": LOOP.replace("range(n)", "range(1, n)"),
    "a store in the body": LOOP.replace("    _t2 = x[_k]\n", "    _t2 = x[_k]\n    y[_k] = _t2\n"),
    "a partial index": LOOP.replace("L[i, _k]", "L[_k]"),
    "the loop's variable read in a later test": LOOP + "if _k > 0:\n    z = 1.0\n",
    "the loop's variable read in a later branch": LOOP + "if n > 0:\n    z = 1.0\nelse:\n    z = _k\n",
    "the loop's variable read in a later loop's range": LOOP + "for j in range(_k):\n    y[j] = 1.0\n",
    "the loop's variable read in a later loop's body": LOOP + "for j in range(n):\n    y[j] = _k\n",
    "the loop's variable read in a later loop's else": LOOP + "for j in range(n):\n    y[j] = 1.0\nelse:\n    z = _k\n",
    "the loop's variable read in a while": LOOP + "while _k < n:\n    n = n - 1\n",
}


NEAR_MISSES["an index the loop assigns, read after it"] += "z = i\n"


@pytest.mark.parametrize("why", sorted(NEAR_MISSES))
def test_near_misses_stay_loops(why):
    text, helpers = _run(NEAR_MISSES[why])
    assert "_dot_acc" not in text and not helpers, why
    assert "for _k in range(" in text


def test_a_loop_variable_bound_again_later_does_not_block():
    text, _ = _run(LOOP + "for _k in range(n):\n    y[_k] = _k\n")
    assert "acc = _dot_acc(acc, L[i, :], x, n)" in text
    text, _ = _run(LOOP + "for _k in range(_k):\n    y[_k] = 1.0\n")
    assert "_dot_acc" not in text


def test_a_loop_whose_body_is_only_the_dot_is_rebuilt_and_the_comment_kept():
    body = gast.parse("""
for i in range(n):
    for _k in range(n):
        acc = acc + L[i, _k] * x[_k]
z = 1.0
""").body
    body[0].body[0].coarsen_comment = "y = L @ x"
    new, _ = dot_loop_calls(body, TYPES)
    assert new[0] is not body[0] and new[1] is body[1]        # copied on write, the rest kept
    assert isinstance(new[0].body[0], gast.Assign) and isinstance(body[0].body[0], gast.For)
    assert new[0].body[0].coarsen_comment == "y = L @ x"
    assert "acc = _dot_acc(acc, L[i, :], x, n)" in _text(new)


def test_temporaries_inside_an_index_are_substituted():
    text, _ = _run("""
for _k in range(n):
    _t5 = _k
    _t6 = i
    acc = acc + L[_t6, _t5] * x[_t5]
""")
    assert text.strip() == "acc = _dot_acc(acc, L[i, :], x, n)"


def test_names_and_dtypes_are_compared_by_value():
    # the loop's variable, its uses in the indexes and the arrays' dtype as strings made at
    # run time (equal, not the same objects: the compiler builds names with f-strings)
    def made(s):
        return "".join(list(s))
    body = gast.parse(LOOP).body
    for n in gast.walk(gast.Module(body=body, type_ignores=[])):
        if isinstance(n, gast.Name) and n.id == "_k":
            n.id = made("_k")
    types = {**TYPES, "L": Array(made("f64"), 2), "x": Array(made("f64"), 1)}
    assert types["L"].dtype is not F2.dtype
    new, helpers = dot_loop_calls(body, types)
    assert "acc = _dot_acc(acc, L[i, :], x, n)" in _text(new) and helpers == {"_dot_acc"}
