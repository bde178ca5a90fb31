"""The code-generation layer (coarsen.codegen): the fixed runtime helpers are real functions whose
text is what generated modules carry."""
import ast
import builtins
import io
import tokenize

import numpy as np
import pytest

from coarsen.codegen import helpers, runtime


def test_the_tape_cap_in_grow_is_max_tape_bytes():
    src = runtime.fixed_source("_grow")
    assert f"if size * 8 > {helpers.MAX_TAPE_BYTES}:" in src
    assert f"exceed {helpers.MAX_TAPE_BYTES // 1024 ** 3} GiB" in src


@pytest.mark.parametrize("name", sorted(helpers.HELPERS))
def test_a_helper_is_one_plain_function(name):
    """Its whole text is copied into generated modules: one ``def`` of its name, no docstring,
    no comment, nothing but NumPy, builtins and other helpers."""
    src = runtime.fixed_source(name)
    (fn,) = ast.parse(src).body
    assert isinstance(fn, ast.FunctionDef) and fn.name == name and not fn.decorator_list
    assert ast.get_docstring(fn) is None
    assert not [t for t in tokenize.generate_tokens(io.StringIO(src).readline)
                if t.type == tokenize.COMMENT]
    free = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local = {a.arg for a in fn.args.args} | {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)
                                              and isinstance(n.ctx, ast.Store)}
    outside = free - local - set(dir(builtins)) - {"np"}
    assert outside <= set(helpers.HELPERS), outside
    assert set(runtime.calls(name)) == outside - {name}


def test_helper_source_adds_what_a_helper_calls_in_a_fixed_order():
    src = runtime.helper_source(["_solve_adj_a2", "_push"])
    names = [f.name for f in ast.parse(src).body]
    assert names == sorted(["_solve_adj_a2", "_solve2", "_bmm22", "_mm22", "_push", "_grow"])
    assert runtime.helper_source(["_push", "_solve_adj_a2"]) == src


def test_the_emitted_text_runs_as_the_function_does():
    scope = {"np": np}
    exec(compile(runtime.helper_source(["_solve1"]), "<helpers>", "exec"), scope)
    a = np.array([[4.0, 1.0], [2.0, 3.0]])
    b = np.array([1.0, 2.0])
    assert np.array_equal(scope["_solve1"](a, b), helpers.HELPERS["_solve1"](a, b))
