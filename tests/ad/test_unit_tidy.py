"""Unit tests of ``coarsen.ad.tidy``: each rewrite on small functions, where it must fire and
where it must not (loops, rebinding, reads after the block, arrays, user names, types).

Every rewritten function is also run against the original on a few inputs: the same results,
bit for bit."""
import ast
import math
import textwrap

import gast
import numpy as np
import pytest

from coarsen.ad.tidy import FloatFacts, tidy_function, tidy_module
from coarsen.ad.tidy.copies import propagate_copies
from coarsen.ad.tidy.dead_stores import drop_dead_stores
from coarsen.ad.tidy.flow import live_after, remove
from coarsen.ad.tidy.held import reuse_held
from coarsen.ad.tidy.helpers import drop_unused_helpers
from coarsen.ad.tidy.seeds import fold_seeds
from coarsen.ir.nodes import Array, Scalar

F64, I64 = Scalar("f64"), Scalar("i64")


def _fn(src):
    return gast.parse(textwrap.dedent(src)).body[0]


def _text(node):
    mod = node if isinstance(node, gast.Module) else gast.Module(body=[node], type_ignores=[])
    return ast.unparse(gast.gast_to_ast(mod)).strip()


def _run(node, args):
    mod = node if isinstance(node, gast.Module) else gast.Module(body=[node], type_ignores=[])
    env = {"np": np, "math": math}
    exec(compile(ast.fix_missing_locations(gast.gast_to_ast(mod)), "<tidy>", "exec"), env)
    name = [s for s in mod.body if isinstance(s, gast.FunctionDef)][-1].name
    return env[name](*args)


def _bits(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _bits(x, y)
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b)), (a, b)


def _check(rewrite, src, expected, runs=(), **kw):
    """``rewrite`` of ``src`` gives ``expected`` (None: no change, the same object); the
    results agree on ``runs`` (argument tuples)."""
    fn = _fn(src)
    before = _text(fn)
    out = rewrite(fn, **kw)
    assert _text(fn) == before, "the input was changed"
    if expected is None:
        assert out is fn and _text(out) == before
    else:
        assert _text(out) == _text(_fn(expected))
    for args in runs:
        _bits(_run(_fn(src), args), _run(out, args))
    return out


def temporary(name):
    return name.startswith("_")


def compiler(name):
    return name.startswith("_") or name.endswith("_bar")


FLOATS = FloatFacts.of({"x": F64, "y": F64, "z": F64, "s": F64, "u": F64, "i": I64, "n": I64,
                        "_acc1": F64, "A": Array("f64", 1)})


# ---------------------------------------------------------------- copies
def copies(fn):
    return propagate_copies(fn, temporary)


def test_copy_straight_line():
    _check(copies, """
        def f(x, n):
            _t1 = n
            _t2 = _t1
            s = 0.0
            for i in range(_t2):
                s = s + x * _t2
            return s, _t2
        """, """
        def f(x, n):
            s = 0.0
            for i in range(n):
                s = s + x * n
            return s, n
        """, runs=[(1.5, 3), (2.0, 0)])


def test_copy_keeps_comment_on_next_statement():
    fn = _fn("""
        def f(x):
            _t1 = x
            y = _t1 * 2.0
            return y
        """)
    fn.body[0].coarsen_comment = "forward sweep"
    out = copies(fn)
    assert out.body[0].coarsen_comment == "forward sweep"


def test_copy_not_when_source_rebound_between():
    _check(copies, """
        def f(x):
            _t2 = x
            x = 5.0
            return _t2 + x
        """, None, runs=[(1.0,)])


def test_copy_not_when_source_rebound_inside_a_later_loop():
    _check(copies, """
        def f(x, n):
            _t2 = x
            for i in range(n):
                x = x + 1.0
                y = _t2
            return x
        """, None)


def test_copy_not_when_source_augmented_between():
    _check(copies, """
        def f(x):
            _t2 = x
            x += 1.0
            return _t2
        """, None)


def test_copy_not_read_on_a_later_trip():
    # _t2 holds the previous trip's x where it is read: not x
    _check(copies, """
        def f(x, n):
            s = 0.0
            for i in range(n):
                if i > 0:
                    s = s + _t2
                _t2 = x
                x = x * 2.0
            return s
        """, None, runs=[(1.5, 4)])


def test_copy_not_read_after_its_block():
    _check(copies, """
        def f(x, c):
            _t2 = 0.0
            if c:
                _t3 = x
            x = 2.0
            return _t3 if c else x
        """, None)
    _check(copies, """
        def f(x, c):
            if c:
                _t3 = x
            return _t3
        """, None)


def test_copy_not_bound_twice():
    _check(copies, """
        def f(x, y, c):
            _t2 = x
            if c:
                _t2 = y
            return _t2
        """, None)


def test_copy_never_a_user_name_nor_a_global():
    _check(copies, """
        def f(x):
            u = x
            return u * 2.0
        """, None)
    _check(copies, """
        def f(x):
            _t1 = G
            return _t1 * x
        """, None)


def test_copy_of_an_array_is_the_same_object():
    # element stores through either name reach the one array: propagating is exact
    _check(copies, """
        def f(A):
            A = A.copy()
            _t1 = A
            _t1[0] = 7.0
            return A[0] + _t1[1]
        """, """
        def f(A):
            A = A.copy()
            A[0] = 7.0
            return A[0] + A[1]
        """, runs=[(np.array([1.0, 2.0]),)])


def test_copy_not_when_an_array_is_rebound():
    _check(copies, """
        def f(A):
            _t1 = A
            A = A.copy()
            A[0] = 7.0
            return _t1[0]
        """, None, runs=[(np.array([1.0, 2.0]),)])


def test_copy_chain():
    _check(copies, """
        def f(x):
            _t1 = x
            _t2 = _t1
            _t3 = _t2
            return _t3 * _t2
        """, """
        def f(x):
            return x * x
        """, runs=[(3.0,)])


# ---------------------------------------------------------------- seeds
def seeds(fn):
    return fold_seeds(fn, compiler, FLOATS)


def test_seed_folded_into_products_and_sums():
    _check(seeds, """
        def f(x, y, n):
            _ret_bar = 1.0
            x_bar = 0.0
            y_bar = 0.0
            x_bar += _ret_bar * y
            y_bar += _ret_bar
            _t4_bar = _ret_bar * x
            _t5_bar = -_ret_bar
            y_bar += _t4_bar * n + _t5_bar
            return x_bar, y_bar
        """, """
        def f(x, y, n):
            x_bar = 0.0
            y_bar = 0.0
            x_bar += y
            y_bar += 1.0
            _t4_bar = x
            _t5_bar = -1.0
            y_bar += _t4_bar * n + _t5_bar
            return x_bar, y_bar
        """, runs=[(0.5, 2.5, 3)])


def test_seed_into_a_float_accumulator_of_an_int():
    # _acc1 += 1.0 * i and _acc1 += i: i converted to float64 either way
    _check(seeds, """
        def f(n):
            _acc1 = 0.0
            for i in range(n):
                s_bar = 1.0
                _acc1 += s_bar * i
            return _acc1
        """, """
        def f(n):
            _acc1 = 0.0
            for i in range(n):
                _acc1 += i
            return _acc1
        """, runs=[(5,), (0,)])


def test_seed_not_folded_where_the_type_would_change():
    # 1.0 * i is a float, i an int; 1.0 * A a new array, A the argument itself
    _check(seeds, """
        def f(i, A):
            s_bar = 1.0
            _t1_bar = s_bar * i
            _t2_bar = s_bar * A
            return _t1_bar, _t2_bar
        """, None)
    _check(seeds, """
        def f(k):
            s_bar = 1.0
            k_bar = 0
            k_bar += s_bar * k
            return k_bar
        """, None)


def test_seed_not_folded_where_a_later_trip_reads_it():
    _check(seeds, """
        def f(y, n):
            s_bar = 0.5
            x_bar = 0.0
            for i in range(n):
                x_bar += s_bar * y
                s_bar = 1.0
                x_bar += s_bar * y
            return x_bar
        """, None, runs=[(2.0, 3)])


def test_seed_not_folded_where_read_after_its_block():
    _check(seeds, """
        def f(y, c):
            s_bar = 0.5
            if c:
                s_bar = 1.0
            return s_bar * y
        """, None)


def test_seed_stops_at_a_rebinding():
    _check(seeds, """
        def f(y, z):
            a_bar = 0.0
            b_bar = 0.0
            s_bar = 1.0
            a_bar += s_bar * y
            s_bar = 2.0 * z
            b_bar += s_bar * y
            return a_bar, b_bar
        """, """
        def f(y, z):
            a_bar = 0.0
            b_bar = 0.0
            a_bar += y
            s_bar = 2.0 * z
            b_bar += s_bar * y
            return a_bar, b_bar
        """, runs=[(1.5, 3.0)])


def test_seed_not_an_augmented_rebinding():
    _check(seeds, """
        def f(y):
            s_bar = 1.0
            s_bar += y
            return s_bar
        """, None)


def test_seed_never_a_user_name():
    _check(seeds, """
        def f(y):
            s = 1.0
            return s * y
        """, None)


# ---------------------------------------------------------------- dead stores
def dead(fn):
    return drop_dead_stores(fn, compiler, FLOATS)


def test_dead_store_at_the_end():
    _check(dead, """
        def f(x):
            s_bar = 0.0
            s_bar += x
            a_bar = s_bar * 2.0
            s_bar = 0.0
            return a_bar
        """, """
        def f(x):
            s_bar = 0.0
            s_bar += x
            a_bar = s_bar * 2.0
            return a_bar
        """, runs=[(1.5,)])


def test_dead_store_kept_when_a_later_trip_reads_it():
    _check(dead, """
        def f(x, n):
            s_bar = 0.0
            a_bar = 0.0
            for i in range(n):
                a_bar += s_bar
                s_bar = 0.0
                s_bar += x
            return a_bar
        """, None, runs=[(1.5, 3)])


def test_dead_store_kept_for_a_zero_trip_loop():
    _check(dead, """
        def f(x, n):
            _t1 = 0.0
            for i in range(n):
                _t1 = x * i
            return _t1
        """, None, runs=[(1.5, 0), (1.5, 2)])


def test_dead_store_kept_on_a_break_path():
    _check(dead, """
        def f(n):
            _k = 0.0
            for i in range(n):
                _k = 1.0
                if i == 2:
                    break
                _k = 2.0
            return _k
        """, None, runs=[(5,), (1,)])


def test_dead_store_kept_on_a_continue_path():
    _check(dead, """
        def f(n):
            _k = 0.0
            for i in range(n):
                _k = 1.0
                if i == n - 1:
                    continue
                _k = 2.0
            return _k
        """, None, runs=[(5,), (0,)])


def test_dead_store_kept_on_a_while_test():
    _check(dead, """
        def f(x):
            _go = True
            while _go:
                x = x * 0.5
                _go = False
                if x > 1.0:
                    _go = True
            return x
        """, None, runs=[(10.0,)])


def test_dead_store_in_a_loop_rebound_before_every_read():
    _check(dead, """
        def f(x, n):
            a_bar = 0.0
            for i in range(n):
                z_bar = 0.0
                z_bar += x
                a_bar += z_bar
                z_bar = 0.0
            return a_bar
        """, """
        def f(x, n):
            a_bar = 0.0
            for i in range(n):
                z_bar = 0.0
                z_bar += x
                a_bar += z_bar
            return a_bar
        """, runs=[(1.5, 3)])


def test_dead_store_kept_where_numba_would_type_it_otherwise():
    # _k is bound to an int and to a float: dropping the float would make it an int
    _check(dead, """
        def f(n):
            _k = 0.5
            _k = n
            return _k
        """, None)
    # bound to constants of one type only: dropping one changes nothing
    _check(dead, """
        def f(c):
            _r = False
            _r = True
            return c
        """, """
        def f(c):
            return c
        """)


def test_dead_store_never_a_user_name_nor_an_emptied_body():
    _check(dead, """
        def f(x):
            s = 0.0
            return x
        """, None)
    _check(dead, """
        def f(x, c):
            if c:
                s_bar = 0.0
            return x
        """, None)
    _check(dead, """
        def f(x, c):
            if c:
                x = x + 1.0
            else:
                s_bar = 0.0
            return x
        """, """
        def f(x, c):
            if c:
                x = x + 1.0
            return x
        """, runs=[(1.0, True), (1.0, False)])


def test_liveness_of_augmented_and_element_stores():
    fn = _fn("""
        def f(A, x):
            _a = 0.0
            _a += x
            _B = A
            _B[0] = x
            return A
        """)
    live = live_after(fn)
    assert "_a" in live[id(fn.body[0])]
    assert "_B" in live[id(fn.body[2])]
    assert "_B" not in live[id(fn.body[3])]


def test_remove_hands_comments_on():
    fn = _fn("""
        def f(x):
            _t1 = x
            y = _t1
            return y
        """)
    fn.body[0].coarsen_comment = "forward sweep"
    fn.body[2].coarsen_comment = "the end"
    out = remove(fn, {id(fn.body[0])})
    assert out.body[0].coarsen_comment == "forward sweep"
    assert fn.body[0].coarsen_comment == "forward sweep" and len(fn.body) == 3


# ---------------------------------------------------------------- held values
def held(fn):
    return reuse_held(fn, temporary, FLOATS)


def test_held_value_read_not_recomputed():
    _check(held, """
        def f(x, y):
            _t8 = 1.0 / (x * x + 1.0)
            y_bar = 0.0
            y_bar += y * (1.0 / (x * x + 1.0))
            _s1_t0 = math.tanh(x * y)
            _t9 = math.tanh(x * y)
            return y_bar + _t8 + _s1_t0 + _t9
        """, """
        def f(x, y):
            _t8 = 1.0 / (x * x + 1.0)
            y_bar = 0.0
            y_bar += y * _t8
            _s1_t0 = math.tanh(x * y)
            _t9 = _s1_t0
            return y_bar + _t8 + _s1_t0 + _t9
        """, runs=[(0.3, 1.7)])


def test_held_not_after_an_operand_is_rebound():
    _check(held, """
        def f(x, n):
            _t8 = math.exp(x)
            for i in range(n):
                x = x + 1.0
            return math.exp(x) + _t8
        """, None, runs=[(0.5, 2)])


def test_held_not_before_nor_outside_its_block():
    _check(held, """
        def f(x, c):
            y = math.exp(x * 2.0)
            if c:
                _t8 = math.exp(x * 2.0)
                y = y + _t8
            return y + math.exp(x * 2.0)
        """, None)
    _check(held, """
        def f(x, n):
            y = 0.0
            for i in range(n):
                y = y + math.exp(x * 2.0)
                _t8 = math.exp(x * 2.0)
                x = x + _t8
            return y
        """, None, runs=[(0.1, 3)])


def test_held_not_for_elements_ints_globals_or_signs():
    # an element may change without its array's name being bound
    _check(held, """
        def f(A):
            A = A.copy()
            _t8 = A[0] * 2.0
            A[0] = 5.0
            return A[0] * 2.0 + _t8
        """, None, runs=[(np.array([1.0]),)])
    _check(held, """
        def f(A):
            A = A.copy()
            _t8 = float(A)
            A[()] = 5.0
            return float(A) + _t8
        """, None, runs=[(np.array(1.0),)])
    _check(held, """
        def f(n):
            _t8 = n * 2
            return n * 2 + _t8
        """, None)
    _check(held, """
        def f(x):
            _t8 = math.exp(G)
            return math.exp(G) + _t8
        """, None)
    _check(held, """
        def f(x):
            _t6 = -x
            return -x * _t6
        """, None)


def test_held_not_bound_twice():
    _check(held, """
        def f(x, c):
            _t8 = math.exp(x)
            if c:
                _t8 = 0.0
            return math.exp(x) + _t8
        """, None)


# ---------------------------------------------------------------- float facts
def test_float_facts_of_a_function():
    fn = _fn("""
        def f(x, n, A):
            _pa2 = 0.0
            _pa2 = x * 2.0
            _k = 0.5
            _k = n
            _m = n * 2
            _c = _d * 1.0
            _d = _c + 1.0
            _e = _ftape[_m]
            return _pa2
        """)
    facts = FloatFacts.of({"x": F64, "n": I64}).extended(fn)
    assert "_pa2" in facts.float_scalars and "_e" in facts.float_scalars
    assert "_m" in facts.int_scalars
    assert not {"_k", "_c", "_d", "A"} & (facts.float_scalars | facts.int_scalars)


def test_seed_folded_with_a_temporary_known_float():
    src = """
        def f(x, y):
            _pa2 = 0.0
            _pa2 = x * y
            s_bar = 1.0
            _t3_bar = s_bar * (x * _pa2)
            return _t3_bar
        """
    out = _check(lambda fn: tidy_function(fn, FloatFacts.of({"x": F64, "y": F64})), src, """
        def f(x, y):
            _pa2 = x * y
            _t3_bar = x * _pa2
            return _t3_bar
        """, runs=[(0.25, 3.0)])
    assert out is not None


# ---------------------------------------------------------------- helpers
def test_unused_helpers_and_imports_dropped():
    mod = gast.parse(textwrap.dedent("""
        import math
        import numpy as np

        def _grow(tape, need):
            return np.empty(need)

        def _reserve(tape, need):
            if need > tape.shape[0]:
                return _grow(tape, need)
            return tape

        def _unused(x):
            return math.exp(x)

        def entry(x, t):
            t = _reserve(t, 4)
            return x, t
        """))
    out = drop_unused_helpers(mod)
    names = [s.name for s in out.body if isinstance(s, gast.FunctionDef)]
    assert names == ["_grow", "_reserve", "entry"]
    assert "import math" not in _text(out) and "import numpy as np" in _text(out)
    assert len(mod.body) == 6


def test_no_helper_needed():
    mod = gast.parse(textwrap.dedent("""
        import numpy as np

        def _reserve(tape, need):
            return np.empty(need)

        def entry(x):
            return x * 2.0
        """))
    out = drop_unused_helpers(mod)
    assert _text(out) == "def entry(x):\n    return x * 2.0"


# ---------------------------------------------------------------- together
def test_tidy_function_reaches_a_fixed_point():
    src = """
        def f(x, y, n):
            _ret_bar = 1.0
            u_bar = 0.0
            t_bar = 0.0
            u_bar += _ret_bar * y
            _t8_bar = _ret_bar * x
            _t7_bar = _t8_bar * y
            t_bar += _t7_bar
            _t5_bar = u_bar
            u_bar = 0.0
            t_bar += _t5_bar * x
            return t_bar
        """
    out = _check(lambda fn: tidy_function(fn, FLOATS), src, """
        def f(x, y, n):
            u_bar = 0.0
            t_bar = 0.0
            u_bar += y
            _t7_bar = x * y
            t_bar += _t7_bar
            t_bar += u_bar * x
            return t_bar
        """, runs=[(0.3, 1.7, 2)])
    assert _text(tidy_function(out, FLOATS)) == _text(out)


def test_tidy_module_leaves_helpers_and_user_code_alone():
    mod = gast.parse(textwrap.dedent("""
        def _helper(x):
            _t1 = x
            return _t1

        def value_and_grad_f(x):
            _t1 = x
            return _helper(_t1)
        """))
    out = tidy_module(mod, {"x": F64})
    assert _text(out) == _text(gast.parse(textwrap.dedent("""
        def _helper(x):
            _t1 = x
            return _t1

        def value_and_grad_f(x):
            return _helper(x)
        """)))


@pytest.mark.parametrize("src", [
    # a nested scope or a del: the analyses do not cover them, nothing is touched
    "def f(x):\n    _t1 = x\n    g = lambda: _t1\n    return g()\n",
    "def f(x):\n    _t1 = x\n    y = [_t1 for _ in range(2)]\n    return y\n",
    "def f(x):\n    _t1 = x\n    y = _t1\n    del x\n    return y\n",
])
def test_not_plain_is_left_alone(src):
    fn = gast.parse(src).body[0]
    assert tidy_function(fn, FLOATS) is fn
