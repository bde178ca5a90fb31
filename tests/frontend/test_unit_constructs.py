"""The frontend's desugarings of three constructs, pinned as typed IR text: a helper returning
a tuple is inlined with one result variable per element (``_<helper>_result_<k>``), unpacked
by plain copies; ``np.array([...])`` of scalars is an allocation of the shape plus one
element store per scalar, its dtype resolved from the elements; ``dtype=x.dtype`` is a
``*_like`` constructor carrying ``x`` as a trailing operand (``dtype='like'``)."""
import numpy as np

from coarsen.ir.nodes import F64, Array
from tests.frontend.test_unit_frontend import ir, lines


def halves(x, y):
    return x * 0.5, y * 0.5


def unpack_pair(x, y):
    a, b = halves(x, y)
    return a - b


def state_of(x, y):
    s = np.array([[x, 1], [y, 2]])
    return s[1, 0]


def zeros_of(v):
    z = np.zeros((2, 3), dtype=v.dtype)
    return z[0, 0]


def early_pair(x):
    if x > 0.0:
        return x, 2.0
    return 1.0, x


def early_pair_caller(x):
    p, q = early_pair(x)
    return p * q


def test_tuple_helper_one_result_per_element():
    assert lines(ir(unpack_pair, F64, F64)) == [
        "def unpack_pair(x: f64, y: f64):",
        "  _t1: f64 = mul(x, 0.5)",
        "  _t2: f64 = mul(y, 0.5)",
        "  _halves_result_0: f64 = copy(_t1)",
        "  _halves_result_1: f64 = copy(_t2)",
        "  a: f64 = copy(_halves_result_0)",
        "  b: f64 = copy(_halves_result_1)",
        "  _ret: f64 = sub(a, b)",
        "  return _ret",
    ]


def test_tuple_helper_with_early_returns():
    text = ir(early_pair_caller, F64)
    assert lines(text)[:3] == [
        "def early_pair_caller(x: f64):",
        "  _early_pair_returned: bool = copy(False)",
        "  _early_pair_result_0: f64 = copy(0.0)",
    ]
    assert "  _early_pair_result_1: f64 = copy(0.0)" in lines(text)
    assert "    _early_pair_result_1: f64 = copy(2.0)" in lines(text)


def test_array_literal_is_allocation_and_stores():
    assert lines(ir(state_of, F64, F64)) == [
        "def state_of(x: f64, y: f64):",
        "  _t1: f64[:,:] = empty(2, 2, dtype='f64', ndim=2)",
        "  s: f64[:,:] = empty_like(_t1, x, 1, y, 2, dtype='elements')",
        "  s[0, 0] = x",
        "  s[0, 1] = 1",
        "  s[1, 0] = y",
        "  s[1, 1] = 2",
        "  _ret: f64 = getitem(s[1, 0])",
        "  return _ret",
    ]


def test_dtype_of_another_array():
    assert lines(ir(zeros_of, Array("f64", 1))) == [
        "def zeros_of(v: f64[:]):",
        "  _t1: f64[:,:] = empty(2, 3, dtype='f64', ndim=2)",
        "  z: f64[:,:] = zeros_like(_t1, v, dtype='like')",
        "  _ret: f64 = getitem(z[0, 0])",
        "  return _ret",
    ]
    assert "  z: i64[:,:] = zeros_like(_t1, v, dtype='like')" in lines(ir(zeros_of, Array("i64", 1)))
