"""Run one reverse-sweep pass on a hand-written function: the shared helper of the pass tests."""
import ast
import textwrap

import gast
import numpy as np


def parse_body(src):
    """The statements of ``src`` (gast)."""
    return gast.parse(src).body


def body_text(body):
    """The source of the statements ``body``."""
    return ast.unparse(ast.fix_missing_locations(
        gast.gast_to_ast(gast.Module(body=body, type_ignores=[]))))


def rewrite(src, reverse_pass, made, scope=None):
    """The function in ``src`` before and after ``reverse_pass(body, made)``, both compiled
    (in a namespace with ``np`` and ``scope``), and the new function's source."""
    fn = gast.parse(textwrap.dedent(src)).body[0]
    new = gast.FunctionDef(name=fn.name, args=fn.args, body=reverse_pass(fn.body, set(made)),
                           decorator_list=[], returns=None, type_comment=None)
    out = []
    for f in (fn, new):
        mod = gast.Module(body=[f], type_ignores=[])
        code = compile(gast.gast_to_ast(gast.fix_missing_locations(mod)), "<test>", "exec")
        names = {"np": np, **(scope or {})}
        exec(code, names)      # noqa: S102 - the test's own text
        out.append(names[fn.name])
    return out[0], out[1], ast.unparse(gast.gast_to_ast(new))


def scalarized_ir(fn, args):
    """The IR text of ``fn`` typed for ``args`` after ``coarsen.ir.scalarize`` (checked to leave
    its input as it was)."""
    from coarsen.frontend.lower import lower
    from coarsen.ir.printer import format_function
    from coarsen.ir.scalarize import scalarize
    from coarsen.ir.typeinfer import infer
    from coarsen.transforms.artifact import arg_type

    fn_ir, _ = lower(fn)
    infer(fn_ir, [arg_type("a", a)[0] for a in args])
    before = format_function(fn_ir)
    out = scalarize(fn_ir)
    assert format_function(fn_ir) == before, "scalarize modified its input"
    return format_function(out)
