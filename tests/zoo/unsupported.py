"""Constructs outside coarsen's input language, one small function each.

The offending line carries the marker comment ``# <- unsupported``; ``tests/frontend/test_fence.py``
checks that ``CoarsenError`` points at a marked line.  Where two lines are equally the
construct (``global`` and the write it permits, ``try:`` and its ``except``), both are marked.

``FENCE`` lists ``(fn, args_factory, why)``.
"""
import math
import types

import numpy as np


def _h(a, b):
    return a * b


def try_except(x):
    try:  # <- unsupported
        y = math.log(x)
    except ValueError:  # <- unsupported
        y = 0.0
    return y


def with_statement(x):
    with np.errstate(all="ignore"):  # <- unsupported
        y = x * 2.0
    return y


def generator_expression(x):
    return sum(x * i for i in range(3))  # <- unsupported


def yield_generator(x):
    yield x * 2.0  # <- unsupported


def lambda_expression(x):
    f = lambda t: t * x  # <- unsupported  # noqa: E731
    return f(2.0)


def direct_recursion(x, n):
    if n == 0:
        return x
    return x * direct_recursion(x, n - 1)  # <- unsupported


_COUNTER = 0.0


def global_write(x):
    global _COUNTER  # <- unsupported
    _COUNTER = x  # <- unsupported
    return x * 2.0


def _make_nonlocal():
    total = 0.0

    def nonlocal_write(x):
        nonlocal total  # <- unsupported
        total = total + x  # <- unsupported
        return x * total
    return nonlocal_write


nonlocal_write = _make_nonlocal()


def dict_literal(x):
    d = {"a": x}  # <- unsupported
    return d["a"] * 2.0


def list_literal(x):
    v = [x, 2.0 * x]  # <- unsupported
    return v[0] + v[1]


def list_comprehension(x):
    v = [x * i for i in range(3)]  # <- unsupported
    return v[2]


def set_literal(x):
    s = {x, 2.0}  # <- unsupported
    return x * len(s)


def string_operation(x):
    s = "x=" + str(x)  # <- unsupported
    return x * len(s)


_STATE = types.SimpleNamespace(v=0.0)


def attribute_write(x):
    _STATE.v = x  # <- unsupported
    return x * 2.0


def star_args_call(x, y):
    return _h(*(x, y))  # <- unsupported


def kwargs_call(x, y):
    return _h(**dict(a=x, b=y))  # <- unsupported


def star_params(*xs):  # <- unsupported
    return xs[0] * 2.0


def print_call(x):
    print(x)  # <- unsupported
    return x * 2.0


def linalg_svd(A):
    s = np.linalg.svd(A, compute_uv=False)  # <- unsupported
    return s[0]


def del_statement(x):
    y = x * 2.0
    del y  # <- unsupported
    return x


def class_definition(x):
    class Point:  # <- unsupported
        pass
    return x * 2.0


def import_inside(x):
    import cmath  # <- unsupported
    return x * 2.0


async def async_def(x):  # <- unsupported
    return x * 2.0


def walrus(x):
    if (y := x * 2.0) > 1.0:  # <- unsupported
        return y
    return x


def random_call(x):
    return x * np.random.rand()  # <- unsupported


def array_return(a, x):
    return a * x  # <- unsupported


def int_return(x, n):
    return n * 2  # <- unsupported


def or_as_value(a, b):
    scale = a or b  # <- unsupported
    return scale * 2.0


def and_as_value(a, n):
    return (n and a) * a  # <- unsupported


FENCE = [
    (try_except, lambda: (2.0,), "try/except"),
    (with_statement, lambda: (2.0,), "with"),
    (generator_expression, lambda: (2.0,), "generator expression"),
    (yield_generator, lambda: (2.0,), "yield"),
    (lambda_expression, lambda: (2.0,), "lambda"),
    (direct_recursion, lambda: (2.0, 3), "direct recursion"),
    (global_write, lambda: (2.0,), "global write"),
    (nonlocal_write, lambda: (2.0,), "nonlocal write"),
    (dict_literal, lambda: (2.0,), "dict literal"),
    (list_literal, lambda: (2.0,), "list literal"),
    (list_comprehension, lambda: (2.0,), "list comprehension"),
    (set_literal, lambda: (2.0,), "set literal"),
    (string_operation, lambda: (2.0,), "string operations"),
    (attribute_write, lambda: (2.0,), "attribute write"),
    (star_args_call, lambda: (2.0, 3.0), "star-args call"),
    (kwargs_call, lambda: (2.0, 3.0), "**kwargs call"),
    (star_params, lambda: (2.0, 3.0), "*args parameter"),
    (print_call, lambda: (2.0,), "print"),
    (linalg_svd, lambda: (np.eye(3) + 0.1,), "np.linalg.svd"),
    (del_statement, lambda: (2.0,), "del"),
    (class_definition, lambda: (2.0,), "class definition"),
    (import_inside, lambda: (2.0,), "import inside the function"),
    (async_def, lambda: (2.0,), "async def"),
    (walrus, lambda: (2.0,), "walrus"),
    (random_call, lambda: (2.0,), "np.random"),
    (array_return, lambda: (np.ones(3), 2.0), "non-scalar (array) return"),
    (int_return, lambda: (2.0, 3), "integer return"),
    (or_as_value, lambda: (0.5, 3.0), "`or` used as a value (Python's result: an operand)"),
    (and_as_value, lambda: (0.5, 3), "`and` used as a value (Python's result: an operand)"),
]
