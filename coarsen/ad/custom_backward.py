"""The backward rule of a ``custom_vjp`` call, typed and emitted where the reverse sweep runs it.

Requires: a ``BackwardRule`` (``coarsen.ir.primitives.custom``: the rule's body lowered apart
from the function, on placeholder parameters for the residuals and the output's adjoint), the
types of the residuals and of the output; for emission, the reverse emitter of the function.
Guarantees: the body is typed for those types (``coarsen.ir.backward_typing``; the rule object
is never changed); ``backward_code`` returns the statements that bind the placeholders
(to the residuals' values where the reverse sweep reads them, and to the output's adjoint;
copies of arrays the rule writes into) and then run the body: its primal code only (the
forward-mode emitter with nothing active: nothing a rule computes is differentiated), index
checks as the function's, helpers added to the emitter's.  The cotangents are then the body's
operands ``BackwardRule.cotangents``.  The body's variables are the frontend's fresh names,
which no variable of the function shares, and every name its typing and emission make
(in-place rewriting's temporaries, the forward emitter's) comes from the reverse emitter's
supply (``coarsen.ir.fresh``), which knows every name of the gradient: the rule's block runs
first in the reverse sweep and cannot overwrite a value the reverse of earlier statements
still reads.
"""
from __future__ import annotations

import gast

from ..analysis.activity import analyze
from ..analysis.bounds import plan_bounds
from ..codegen import build as B
from ..ir.backward_typing import typed_backward
from ..ir.nodes import Array, Store, walk
from ..ir.primitives.custom import operand_type
from ..ir.typeinfer import infer
from .forward.emitter import ForwardEmitter


def backward_code(em, rule, residuals, g, out_type):
    """The reverse-sweep statements that run ``rule`` on the operands ``residuals`` and the
    adjoint expression ``g`` (a ``codegen.build.X``) in the reverse emitter ``em``."""
    types = [operand_type(em.types, r) for r in residuals]
    fn = typed_backward(rule, types, out_type, infer, em.supply)
    written = {s.array for s in walk(fn.body) if isinstance(s, Store)}
    code = []
    for name, value in zip(fn.params, [em.val(r) for r in residuals] + [g]):
        node = B.ex(value)
        if name in written and isinstance(fn.types.get(name), Array):
            node = B.call(gast.Attribute(value=node, attr="copy", ctx=gast.Load()))
        code.append(B.assign(name, node))
    code[0].coarsen_comment = f"the custom_vjp rule {rule.name}"
    bounds = plan_bounds(fn) if getattr(em, "bounds", None) is not None else None
    fe = ForwardEmitter(fn, (), analyze(fn, ()), bounds, supply=em.supply)
    code += fe.block(fn.body)
    em.helpers |= fe.helpers
    return code, fn.types
