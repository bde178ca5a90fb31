"""Unit tests of ``coarsen.ad.tidy`` that pin guards mutation testing found unpinned (issue 48):
a seed read in a sum, a seed at an odd position or after one that cannot fold, a copy only
inside a loop.  Every rewritten function is run against the original: the same results, bit
for bit."""
import ast
import math
import textwrap

import gast
import numpy as np

from coarsen.ad.tidy import FloatFacts
from coarsen.ad.tidy.copies import propagate_copies
from coarsen.ad.tidy.held import reuse_held
from coarsen.ad.tidy.helpers import drop_unused_helpers
from coarsen.ad.tidy.seeds import fold_seeds
from coarsen.ir.nodes import Array, Scalar

F64, I64 = Scalar("f64"), Scalar("i64")
FLOATS = FloatFacts.of({"x": F64, "y": F64, "i": I64, "A": Array("f64", 1)})


def _fn(src):
    return gast.parse(textwrap.dedent(src)).body[0]


def _text(node):
    return ast.unparse(gast.gast_to_ast(gast.Module(body=[node], type_ignores=[]))).strip()


def _run(node, args):
    mod = gast.Module(body=[node], type_ignores=[])
    env = {"np": np, "math": math}
    exec(compile(ast.fix_missing_locations(gast.gast_to_ast(mod)), "<tidy>", "exec"), env)
    return env[node.name](*args)


def _check(rewrite, src, expected, runs=()):
    """``rewrite`` of ``src`` gives ``expected`` (None: ``src`` unchanged, the same object)."""
    fn = _fn(src)
    out = rewrite(fn)
    if expected is None:
        assert out is fn
    assert _text(out) == _text(_fn(expected or src))
    for args in runs:
        a, b = _run(_fn(src), args), _run(out, args)
        a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
        assert all(type(p) is type(q) and p == q for p, q in zip(a, b)), (a, b)


def seeds(fn):
    return fold_seeds(fn, lambda name: name.endswith("_bar"), FLOATS)


def test_seed_read_in_a_sum_becomes_the_constant():
    _check(seeds, """
        def f(x, y):
            x_bar = 0.0
            s_bar = 1.0
            x_bar += s_bar + y
            return x_bar, x
        """, """
        def f(x, y):
            x_bar = 0.0
            x_bar += 1.0 + y
            return x_bar, x
        """, runs=[(0.5, 2.5)])


def test_seed_after_one_that_cannot_fold():
    # s_bar * i would turn an int into a float: s_bar stays, u_bar (later in the block) folds
    _check(seeds, """
        def f(x, i):
            s_bar = 1.0
            _t1_bar = s_bar * i
            u_bar = 1.0
            x_bar = u_bar * x
            return x_bar, _t1_bar
        """, """
        def f(x, i):
            s_bar = 1.0
            _t1_bar = s_bar * i
            x_bar = x
            return x_bar, _t1_bar
        """, runs=[(0.5, 3)])


def copies(fn):
    return propagate_copies(fn, lambda name: name.startswith("_"))


def test_copy_only_inside_a_loop():
    # nothing to propagate in the function's own block: the loop's block is still searched
    _check(copies, """
        def f(x, n):
            y = 0.0
            for i in range(n):
                _t1 = x
                y += _t1 * i
            return y, n
        """, """
        def f(x, n):
            y = 0.0
            for i in range(n):
                y += x * i
            return y, n
        """, runs=[(0.5, 3), (0.5, 0)])


def held(fn):
    return reuse_held(fn, lambda name: name.startswith("_"), FLOATS)


def test_held_value_read_as_a_call_argument():
    _check(held, """
        def f(x, y):
            _t8 = x * y
            return math.sin(x * y) + _t8
        """, """
        def f(x, y):
            _t8 = x * y
            return math.sin(_t8) + _t8
        """, runs=[(0.3, 1.7)])


def test_held_not_for_a_negated_element_nor_other_arguments():
    # -A[0] reads an element, which changes without A being bound
    _check(held, """
        def f(A):
            A = A.copy()
            _t8 = -A[0] * 2.0
            A[0] = 5.0
            return -A[0] * 2.0 + _t8
        """, None, runs=[(np.array([1.0]),)])
    # the same call with its arguments in another order is another value
    _check(held, """
        def f(x, y):
            _t8 = math.atan2(x, y)
            return math.atan2(y, x) + _t8
        """, None, runs=[(0.3, 1.7)])
    # one more or one fewer argument: another value
    for a, b in (("x, y", "x, y, 2.0"), ("x, y, 2.0", "x, y")):
        _check(held, f"""
            def f(x, y):
                _t8 = math.hypot({a})
                return math.hypot({b}) + _t8
            """, None, runs=[(0.3, 1.7)])


def test_unused_import_dropped_from_a_shared_statement():
    mod = gast.parse("import math, numpy as np\n\ndef entry(x):\n    return np.sqrt(x)\n")
    out = drop_unused_helpers(mod)
    text = ast.unparse(gast.gast_to_ast(out))
    assert text.splitlines()[0] == "import numpy as np", text


def test_clone_shares_immutable_values_and_copies_the_rest():
    from coarsen.ad.tidy.nodes import clone
    from coarsen.ir.nodes import Loc

    fn = _fn("""
        def f(x):
            y = x * 2.0
            return y
        """)
    st = fn.body[0]
    st._coarsen_loc = Loc("f.py", 3, 4, "y = x * 2.0")
    st.held = ([1.0], 2)            # a tuple holding a list: copied, not shared
    st.seen = {"x": 1}              # any other value: deep-copied
    new = clone(fn)
    assert new is not fn and new.body is not fn.body and new.body[0] is not st
    assert _text(new) == _text(fn)
    assert new.body[0]._coarsen_loc is st._coarsen_loc       # immutable: shared
    assert new.body[0].held == st.held and new.body[0].held[0] is not st.held[0]
    assert new.body[0].seen == st.seen and new.body[0].seen is not st.seen


def test_tidy_function_never_rewrites_user_or_driver_names():
    from coarsen.ad.tidy import tidy_function

    floats = FloatFacts.of({"x": F64, "y": F64, "z": F64, "s": F64, "_value": F64, "_t1": F64})
    src = """
        def f(x):
            s = 1.0
            y = x
            z = s * y
            _value = z
            _t1 = _value
            return _t1, z
        """
    _check(lambda fn: tidy_function(fn, floats), src, """
        def f(x):
            s = 1.0
            y = x
            z = s * y
            _value = z
            return _value, z
        """, runs=[(0.7,)])
    # nothing to do: the function itself
    _check(lambda fn: tidy_function(fn, floats), """
        def f(x):
            y = x * 2.0
            return y
        """, None)


def test_removed_statement_hands_on_its_source_line_only_to_the_same_line():
    from coarsen.ad.tidy.flow import remove
    from coarsen.ir.nodes import Loc

    def handed(next_line):
        fn = _fn("""
            def f(x):
                _t1 = x * 2.0
                y = _t1
                return y
            """)
        fn.body[0]._coarsen_loc = Loc("f.py", 3, 4, "y = x * 2.0")
        fn.body[0].coarsen_comment = "y = x * 2.0\nforward sweep"
        fn.body[1]._coarsen_loc = Loc("f.py", next_line, 4, "y = x * 2.0 + 1.0")
        return remove(fn, {id(fn.body[0])}).body[0].coarsen_comment

    assert handed(3) == "y = x * 2.0\nforward sweep"
    assert handed(4) == "forward sweep"


def test_a_statement_the_analyses_do_not_cover_leaves_the_function_alone():
    from coarsen.ad.tidy import tidy_function

    floats = FloatFacts.of({"x": F64, "y": F64, "_t1": F64})
    fn = _fn("""
        def f(x):
            _t1 = x
            try:
                y = _t1
            except ValueError:
                y = 0.0
            return y
        """)
    assert tidy_function(fn, floats) is fn
