"""Forward mode: from a typed IR function to the JVP program as a gast module.

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer.infer``), the IR names of the
differentiated parameters, and activity ``Facts`` for them
(``coarsen.analysis.activity.analyze``).
Guarantees: ``jvp_ir(fn, wrt, facts, entry_name)`` returns ``(module, emitter)``: a
``gast.Module`` with the runtime helpers it needs and the entry
``<entry_name>(*fn.params, *tangents)`` (one tangent per ``wrt`` parameter, shaped like it,
named ``<name>_dot``) returning ``(value, tangent of the result)``: two floats, or two new
float64 arrays for a function that returns an array.  The entry runs
the primal and the tangents together in one pass, with no tape: fine-grained forward mode
(segments are not lifted to SymPy here).  The prologue copies the arrays the function writes
(and their tangents), so the caller's arrays are never modified, and sets the tangents of
active parameters outside ``wrt`` to zero.  With ``boundscheck=True`` every index is checked
before its access, as in the gradient (``coarsen.analysis.bounds``).  With
``input_language=True`` matrix products, ``solve`` and ``einsum`` are emitted as NumPy calls
(``a @ b``, ``np.linalg.solve``, ``np.einsum``), not as the runtime helpers whose shape checks
``raise``, so that the module is in coarsen's input language (``coarsen.hessian`` reads it back
for reverse mode).  The IR is not modified.
"""
from __future__ import annotations

import gast

from ...analysis.bounds import plan_bounds
from ...ir.nodes import Array
from .. import build as B
from ..reverse.cleanup import comment_pass
from ..runtime import helper_source
from .emitter import ForwardEmitter


def jvp_ir(fn, wrt, facts, entry_name, *, boundscheck=True, input_language=False):
    """The JVP module of ``fn`` (see the module docstring) and its emitter (``names``: the
    tangents' names; ``tangent_statements``, ``zero_tangents``, ``loop_notes`` for reports)."""
    bounds = plan_bounds(fn) if boundscheck else None
    em = ForwardEmitter(fn, wrt, facts, bounds, input_language)
    body = em.block(fn.body)
    comment_pass(body)
    types = fn.types
    prologue = []
    for p in fn.params:
        arr = isinstance(types.get(p), Array)
        if arr and p in facts.stored:
            prologue.append(B.assign(p, B.call(gast.Attribute(value=B.name(p), attr="copy",
                                                              ctx=gast.Load()))))
            if p in em.wrt:
                d = em.dot(p)
                prologue.append(B.assign(d, B.call(gast.Attribute(value=B.name(d), attr="copy",
                                                                  ctx=gast.Load()))))
        if p in em.active and p not in em.wrt:
            prologue.append(B.assign(em.dot(p), em.zero_of(p, B.name(p))))
    if prologue:
        prologue[0].coarsen_comment = "prologue: copies of written inputs, zero tangents"
    if body:
        first = getattr(body[0], "coarsen_comment", None)
        body[0].coarsen_comment = ("tangent sweep: the primal and its tangents, in one pass"
                                   + (f"\n{first}" if first else ""))
    if isinstance(types.get(fn.result), Array):
        # an array result: copies, so that neither aliases an argument or its tangent
        result_dot = (B.call("np.copy", B.name(em.dot(fn.result))) if fn.result in em.active
                      else B.call("np.zeros_like", B.name(fn.result)))
        ret = B.return_(B.tuple_(B.call("np.copy", B.name(fn.result)), result_dot))
    else:
        result_dot = B.name(em.dot(fn.result)) if fn.result in em.active else B.const(0.0)
        ret = B.return_(B.tuple_(B.call("float", fn.result), B.call("float", result_dot)))
    params = list(fn.params) + [em.dot(w) for w in wrt]
    func = B.funcdef(entry_name, params, prologue + body + [ret])
    helpers = helper_source(sorted(em.helpers)) if em.helpers else ""
    helper_mod = gast.parse(helpers) if helpers else gast.Module(body=[], type_ignores=[])
    used = {n.id for node in [func] + list(helper_mod.body) for n in gast.walk(node)
            if isinstance(n, gast.Name)}
    header = gast.parse("".join(line for mod, line in (("math", "import math\n"),
                                                       ("np", "import numpy as np\n"))
                                if mod in used) or "\n")
    module = gast.Module(body=header.body + helper_mod.body + [func], type_ignores=[])
    return module, em
