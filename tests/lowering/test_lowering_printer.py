"""The printer: comments, layout, determinism, decorators per target, exact round-trip."""

import ast
import copy
import math
import pathlib
import struct
import textwrap

import gast
import numpy as np
import pytest

from coarsen.lowering import LoweringError, build, render


# -- hand-built gast helpers ------------------------------------------------------------------

def name(id_, ctx=None):
    return gast.Name(id=id_, ctx=ctx or gast.Load(), annotation=None, type_comment=None)


def store(id_):
    return name(id_, gast.Store())


def const(v):
    return gast.Constant(value=v, kind=None)


def assign(target, value, comment=None):
    node = gast.Assign(targets=[store(target)], value=value, type_comment=None)
    if comment is not None:
        node.coarsen_comment = comment
    return node


def aug(target, op, value, comment=None):
    node = gast.AugAssign(target=store(target), op=op, value=value)
    if comment is not None:
        node.coarsen_comment = comment
    return node


def binop(a, op, b):
    return gast.BinOp(left=a, op=op, right=b)


def func(fname, params, body, comment=None):
    args = gast.arguments(
        args=[gast.Name(id=p, ctx=gast.Param(), annotation=None, type_comment=None) for p in params],
        posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[],
    )
    node = gast.FunctionDef(
        name=fname, args=args, body=body, decorator_list=[], returns=None,
        type_comment=None, type_params=[],
    )
    if comment is not None:
        node.coarsen_comment = comment
    return node


def imports():
    return [
        gast.Import(names=[gast.alias(name="math", asname=None)]),
        gast.Import(names=[gast.alias(name="numpy", asname="np")]),
    ]


def sample_module():
    """f(x, n): nested for/if/elif/else/while with comments at every depth; helper g."""
    loop_if = gast.If(
        test=gast.Compare(left=gast.Subscript(value=name("x"), slice=name("i"), ctx=gast.Load()),
                          ops=[gast.Gt()], comparators=[const(0.0)]),
        body=[aug("s", gast.Add(), binop(const(-2.0), gast.Pow(), const(2)),
                  comment="x[i] > 0: add (-2)**2")],
        orelse=[gast.If(
            test=gast.Compare(left=name("i"), ops=[gast.Eq()], comparators=[const(1)]),
            body=[aug("s", gast.Mult(), const(0.1))],
            orelse=[aug("s", gast.Sub(), const(1.0), comment="otherwise\nsubtract one")],
        )],
    )
    loop_if.coarsen_comment = "branch on the sign"
    for_loop = gast.For(
        target=store("i"),
        iter=gast.Call(func=name("range"), args=[name("n")], keywords=[]),
        body=[loop_if], orelse=[], type_comment=None,
    )
    for_loop.coarsen_comment = "line 3: for i in range(n)"
    while_loop = gast.While(
        test=gast.Compare(left=name("s"), ops=[gast.Gt()], comparators=[const(10.0)]),
        body=[assign("s", binop(name("s"), gast.Div(), const(3.0)), comment="shrink")],
        orelse=[],
    )
    ret = gast.Return(value=gast.Tuple(elts=[name("s"), binop(name("s"), gast.Mult(), const(-0.0))],
                                       ctx=gast.Load()))
    ret.coarsen_comment = "# already a comment"
    f = func("f", ["x", "n"], [assign("s", const(0.0)), for_loop, while_loop, ret],
             comment="gradient of f")
    g = func("g", ["a"], [gast.Return(value=binop(name("a"), gast.Add(), const(1)))])
    return gast.Module(body=imports() + [f, g], type_ignores=[])


EXPECTED_PYTHON = textwrap.dedent('''\
    # header line
    #
    # third line

    import math

    import numpy as np


    # gradient of f
    def f(x, n):
        s = 0.0
        # line 3: for i in range(n)
        for i in range(n):
            # branch on the sign
            if x[i] > 0.0:
                # x[i] > 0: add (-2)**2
                s += (-2.0) ** 2
            elif i == 1:
                s *= 0.1
            else:
                # otherwise
                # subtract one
                s -= 1.0
        while s > 10.0:
            # shrink
            s = s / 3.0
        # already a comment
        return (s, s * -0.0)


    def g(a):
        return a + 1
    ''')


def test_golden_python_target():
    text = render(sample_module(), target="python", header="header line\n\nthird line")
    assert text == EXPECTED_PYTHON


def test_golden_cpu_target_adds_decorators_and_numba_import():
    text = render(sample_module(), target="cpu", header="header line\n\nthird line")
    # imports in isort's order: the standard library, a blank line, then numba and numpy
    expected = EXPECTED_PYTHON.replace(
        "import numpy as np\n", "import numba\nimport numpy as np\n"
    ).replace("# gradient of f\ndef f", "# gradient of f\n@numba.njit(cache=True, error_model='numpy')\ndef f").replace(
        "\ndef g", "\n@numba.njit(cache=True, error_model='numpy')\ndef g"
    )
    assert text == expected
    assert text.count("@numba.njit(cache=True, error_model='numpy')") == 2
    assert text.count("import numba\n") == 1
    assert "numba" not in render(sample_module(), target="python")


def test_numba_import_not_duplicated():
    mod = sample_module()
    mod.body.insert(2, gast.Import(names=[gast.alias(name="numba", asname=None)]))
    text = render(mod, target="cpu")
    assert text.count("import numba\n") == 1
    assert text.startswith("import math\n\nimport numba\nimport numpy as np\n\n\n# gradient of f\n@numba.njit")


def test_comment_indentation_nested():
    """Each comment line sits directly above its statement with the statement's indentation."""
    text = render(sample_module(), target="python")
    lines = text.splitlines()
    for comment, stmt in [
        ("# line 3: for i in range(n)", "for i in range(n):"),
        ("# branch on the sign", "if x[i] > 0.0:"),
        ("# x[i] > 0: add (-2)**2", "s += (-2.0) ** 2"),
        ("# subtract one", "s -= 1.0"),
        ("# shrink", "s = s / 3.0"),
    ]:
        idx = [i for i, line in enumerate(lines) if line.strip() == comment]
        assert len(idx) == 1, comment
        below = lines[idx[0] + 1]
        assert below.strip() == stmt
        indent = len(below) - len(below.lstrip())
        assert lines[idx[0]] == " " * indent + comment


def test_commented_elif_is_not_collapsed():
    mod = sample_module()
    inner_if = mod.body[2].body[1].body[0].orelse[0]
    inner_if.coarsen_comment = "second branch"
    text = render(mod, target="python")
    assert "elif" not in text
    assert "        else:\n            # second branch\n            if i == 1:\n" in text
    ns = {}
    exec(compile(text, "<test>", "exec"), ns)
    ref = {}
    exec(compile(EXPECTED_PYTHON, "<ref>", "exec"), ref)
    x = np.array([0.5, -1.0, -2.0, 3.0])
    assert ns["f"](x, 4) == ref["f"](x, 4)


def test_deterministic_bytes(run_python):
    mod = sample_module()
    first = render(mod, target="cpu", header="h")
    assert render(mod, target="cpu", header="h") == first
    assert render(copy.deepcopy(mod), target="cpu", header="h") == first
    # A fresh interpreter with a different hash seed prints the same bytes.
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from test_lowering_printer import sample_module\n"
        "from coarsen.lowering import render\n"
        "sys.stdout.write(render(sample_module(), target='cpu', header='h'))\n"
    ) % (str(pathlib.Path(__file__).parent),)
    proc = run_python(code, env_extra={"PYTHONHASHSEED": "12345"})
    assert proc.stdout == first


def _bits(v):
    return struct.pack("<d", v)


TRICKY_FLOATS = [0.1, 1.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, 2.0 ** -1074 * 3,
                 -0.0, -2.5, 123456789.123456789, math.pi, -math.e, 1e16, 1e22]


def test_round_trip_constants_exact():
    """Every float prints so that the executed program returns its exact bits."""
    body = [gast.Return(value=gast.Tuple(elts=[const(v) for v in TRICKY_FLOATS], ctx=gast.Load()))]
    mod = gast.Module(body=[func("consts", [], body)], type_ignores=[])
    text = render(mod, target="python")
    ns = {}
    exec(compile(text, "<consts>", "exec"), ns)
    got = ns["consts"]()
    assert [_bits(v) for v in got] == [_bits(v) for v in TRICKY_FLOATS]


def test_negative_constants_keep_precedence_and_special_values():
    # (-2.0) ** 2 == 4 (ast.unparse alone prints -2.0 ** 2 == -4); (-3) ** 2 == 9
    body = [gast.Return(value=gast.Tuple(elts=[
        binop(const(-2.0), gast.Pow(), const(2)),
        binop(const(-3), gast.Pow(), const(2)),
        const(float("inf")),
        const(float("-inf")),
        const(float("nan")),
        gast.Attribute(value=const(-1.5), attr="real", ctx=gast.Load()),
    ], ctx=gast.Load()))]
    mod = gast.Module(body=[func("h", [], body)], type_ignores=[])  # no `import math` given
    text = render(mod, target="python")
    assert text.startswith("import math\n\n\ndef h():")
    ns = {}
    exec(compile(text, "<h>", "exec"), ns)
    a, b, pinf, ninf, nan, real = ns["h"]()
    assert (a, b, pinf, ninf, real) == (4.0, 9, math.inf, -math.inf, -1.5)
    assert math.isnan(nan)


def test_round_trip_parsed_program_executes_identically():
    src = textwrap.dedent('''\
        import math
        import numpy as np
        def grad(x, w, n):
            out = np.zeros(n)
            acc = 0.0
            k = 0
            for i in range(n):
                t = x[i] * w[i % 2, 1:][0] if x[i] > 0.25 else -x[i] ** 2
                if t > 0.1 and not t > 5.0:
                    acc += math.exp(-t) / (1.0 + t)
                elif t < -0.5:
                    continue
                else:
                    acc -= 1e-3 * t
                out[i] = acc
            while k < 3:
                k += 1
                if acc > 100.0:
                    break
                acc *= 1.5
            return acc, (out[::-1], w[:, -1].sum())
        ''')
    mod = gast.parse(src)
    for stmt in gast.walk(mod):
        if isinstance(stmt, gast.stmt):
            stmt.coarsen_comment = f"{type(stmt).__name__} here"
    text = render(mod, target="python")
    assert text.count("# AugAssign here") == 4
    assert "        # If here\n        if t > 0.1" in text
    assert "        else:\n            # If here\n            if t < -0.5:" in text
    ast.parse(text)
    ns_ref, ns_new = {}, {}
    exec(compile(src, "<ref>", "exec"), ns_ref)
    exec(compile(text, "<new>", "exec"), ns_new)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1.0, 2.0, size=16)
    w = rng.normal(size=(2, 3))
    a1, (o1, s1) = ns_ref["grad"](x, w, 16)
    a2, (o2, s2) = ns_new["grad"](x, w, 16)
    assert a1 == a2 and s1 == s2
    assert np.array_equal(o1, o2)
    assert a1 != 0.0


def test_cpu_render_compiles_with_numba_and_matches_python():
    mod = sample_module()
    cpu = build(render(mod, target="cpu"), name="printer_sample", target="cpu")
    py = build(render(mod, target="python"), name="printer_sample", target="python")
    assert type(cpu.f).__name__ == "CPUDispatcher" and callable(py.f)
    x = np.array([0.5, -1.0, 2.0, 3.0, -0.25])
    for n in range(6):
        assert cpu.f(x, n) == py.f(x, n)
    assert cpu.g(2) == 3


def test_errors():
    mod = sample_module()
    with pytest.raises(LoweringError, match="unknown target"):
        render(mod, target="gpu")
    with pytest.raises(LoweringError, match="gast.Module"):
        render(mod.body[2], target="python")
    with_stmt = gast.parse("def w():\n    with open('x') as f:\n        pass\n")
    with pytest.raises(LoweringError, match="With"):
        render(with_stmt, target="python")
    bad = sample_module()
    bad.body[2].coarsen_comment = 3
    with pytest.raises(LoweringError, match="coarsen_comment"):
        render(bad, target="python")
