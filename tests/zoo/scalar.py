"""Scalar zoo: arithmetic, ``math``, builtins, branches, scalar loops, helpers, njit."""
import math

import numba

import tests.zoo.helpers_mod as hm
from tests.zoo.helpers_mod import smooth_abs


def poly_int_pow(x, y):
    return x ** 3 * y - 2.0 * x * y ** 2 + 0.5 * y ** 4 - x ** -2 + 3 * x


def float_pow(x, y):
    return x ** 2.5 + x ** y + 2.0 ** (x * y) + math.pow(x, 1.5) + y ** 0.5 - math.pow(y, -0.75)


def trig(x, y):
    a = math.sin(x) * math.cos(y) + math.tan(0.5 * x)
    b = math.asin(0.5 * y) + math.acos(0.3 * x) + math.atan(x * y)
    return a * b + math.atan2(y, x) + math.atan2(-x, y)


def hyperbolic(x, y):
    return math.sinh(x) * math.cosh(y) - math.tanh(x * y) ** 2 + math.cosh(x - y)


def exp_log(x, y):
    s = math.exp(-x * y) + math.expm1(0.1 * x) + math.log(x + y)
    s += math.log1p(x * y) - math.log10(y + 2.0) + math.log2(x + 3.0)
    return s + math.sqrt(x * x + y)


def misc_math(x, y):
    a = math.fabs(x - y) + math.hypot(x, y) + math.erf(x * y)
    b = abs(y - 2.0 * x) + min(x, y) * max(x * y, 0.25)
    return a * b


def branches3(x, y):
    if x > 1.0:
        z = x * y
    elif x > 0.0:
        z = math.sin(x) + y
    else:
        z = x * x - y
    return z * y


def cond_expr(x, y):
    a = x * y if x > y else x + y * y
    b = math.exp(a) if a < 1.0 else math.log(a)
    return a + b


def bool_logic(x, y, flag):
    if (x > 0.0 and y > 0.0) or flag:
        r = x * y
    else:
        r = x - y
    if not flag:
        r = r * 2.0
    return r + x


def early_return(x, y):
    if x < 0.0:
        return x * y
    t = math.sqrt(x) * y
    if t > 1.0:
        return t * t
    return t + x


def chained_assign(x, y):
    a = b = x * y
    a = a + 1.0
    b = b * x
    c = d = math.sin(a)
    return a * b + c * d


def tuple_unpack(x, y):
    a, b = x * y, x - y
    a, b = b, a * b
    c, d = a + 1.0, b * 2.0
    return a * a + 3.0 * b + c * d


def aug_scalar(x, y):
    s = x
    s += y * y
    s -= 0.5 * x
    s *= y
    s /= 1.0 + x * x
    return s


def while_halving(x):
    s = 0.0
    n = 0
    while x > 1e-3:
        x = x * 0.5
        s = s + math.sin(x) * n
        n += 1
    return s + x


def while_break(x, y):
    t = x
    k = 0
    while True:
        t = t * y + 0.1
        k += 1
        if t > 5.0 or k >= 20:
            break
    return t * x


def int_index_math(x, n):
    s = 0.0
    for i in range(n):
        j = (i * 7) % 5
        k = i // 2
        s += x ** j * (k + 1) - (i % 3) * x
    return s


def sum_closed_form(x, n):
    s = 0.0
    for i in range(n):
        s += i * x * x + x
    return s


def geometric(r, c, n):
    x = 1.0
    for i in range(n):
        x = x * r + c
    return x


def product_loop(x, n):
    p = 1.0
    for k in range(1, n + 1):
        p *= 1.0 + x / k
    return p


def loop_branch(x, y, n):
    s = 0.0
    for i in range(n):
        if i % 2 == 0:
            s += x * i
        elif i % 3 == 0:
            s -= y * s
        else:
            s = s * 0.5 + math.cos(x + i)
    return s


@numba.njit
def njit_scalar(x, y):
    return math.exp(0.5 * x) * math.cos(y) + x * y


def _sq(t):
    return t * t


def same_module_helper(x, y):
    return _sq(x + y) + 3.0 * _sq(x) * y


def cross_module_helpers(x, y):
    return hm.softplus(x * y) + smooth_abs(x - y) + hm.helper_calls_helper(y)


CASES = [
    (poly_int_pow, lambda: (1.3, -0.7), None),
    (float_pow, lambda: (1.4, 0.8), None),
    (trig, lambda: (0.7, 0.4), None),
    (hyperbolic, lambda: (0.6, -0.9), ("x", "y")),
    (exp_log, lambda: (0.8, 1.7), None),
    (misc_math, lambda: (0.45, 0.7), None),
    (misc_math, lambda: (-0.6, 0.3), ("y", "x")),
    # every arm of if/elif/else
    (branches3, lambda: (1.7, 0.6), None),
    (branches3, lambda: (0.6, -1.2), None),
    (branches3, lambda: (-0.8, 0.9), None),
    # both arms of both conditional expressions
    (cond_expr, lambda: (0.9, 0.3), None),
    (cond_expr, lambda: (0.3, 0.9), None),
    (bool_logic, lambda: (0.5, 0.6, False), None),
    (bool_logic, lambda: (-0.5, 0.6, True), None),
    (bool_logic, lambda: (-0.5, 0.6, False), None),
    # early return: first if, second if, fall-through
    (early_return, lambda: (-0.5, 0.8), None),
    (early_return, lambda: (4.0, 0.8), None),
    (early_return, lambda: (0.25, 0.8), None),
    (chained_assign, lambda: (0.7, 1.3), None),
    (tuple_unpack, lambda: (0.7, -1.1), None),
    (aug_scalar, lambda: (0.9, 1.6), 1),
    (while_halving, lambda: (0.37,), "x"),
    (while_halving, lambda: (5.3,), None),
    (while_break, lambda: (1.0, 1.3), None),      # leaves through t > 5
    (while_break, lambda: (0.5, 0.6), None),      # leaves through k >= 20
    (int_index_math, lambda: (0.8, 9), None),
    (sum_closed_form, lambda: (1.3, 6), None),
    (sum_closed_form, lambda: (1.3, 0), None),    # zero trips
    (geometric, lambda: (0.9, 0.3, 7), None),
    (geometric, lambda: (1.0, 0.3, 5), None),     # ratio exactly 1: degenerate closed form
    (geometric, lambda: (1.1, -0.2, 0), None),    # zero trips
    (product_loop, lambda: (0.6, 5), None),
    (loop_branch, lambda: (0.3, 0.7, 10), None),
    (njit_scalar, lambda: (0.4, 1.1), None),
    (same_module_helper, lambda: (0.8, -0.3), None),
    (cross_module_helpers, lambda: (0.8, -0.3), None),
]
