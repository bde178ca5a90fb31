"""Forward mode: from a typed IR function to the JVP program as a gast module.

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer.infer``), the IR names of the
differentiated parameters, and activity ``Facts`` for them
(``coarsen.analysis.activity.analyze``).
Guarantees: ``jvp_ir(fn, wrt, facts, entry_name, options)`` (``options``: the transform's
``JvpOptions``, one object) returns ``(module, emitter)``: a
``gast.Module`` with the runtime helpers it needs and the entry
``<entry_name>(*fn.params, *tangents)`` (one tangent per ``wrt`` parameter, shaped like it,
named ``<name>_dot``) returning ``(value, tangent of the result)``: two floats, or two new
float64 arrays for a function that returns an array.  The entry runs
the primal and the tangents together in one pass, with no tape.  With ``coarsen=True`` the
segments are planned and lifted as reverse mode lifts them (``coarsen.ad.lift_planned``) and
the tangents go through their local Jacobians (``coarsen.ad.forward.segments``: a loop in
closed form gets a closed-form tangent); otherwise forward mode is fine-grained, one tangent
statement per statement.  The prologue copies the arrays the function writes
(and their tangents), so the caller's arrays are never modified, and sets the tangents of
active parameters outside ``wrt`` to zero.  With ``boundscheck=True`` every index is checked
before its access, as in the gradient (``coarsen.analysis.bounds``).  With
``directions=K`` (a vector JVP) the entry takes, per ``wrt`` parameter, the tangents of K
directions packed along a leading axis (``<name>_dots``, shape ``(K,) + shape``) and returns
``(value, tangents of the result)`` with the same leading axis: the primal runs once and each
statement's tangent code is emitted once per direction (lanes ``<name>_dot<k>_``), so lane k
computes what ``directions=0`` computes for direction k, operation for operation.  With
``directions=K`` and ``simd=True`` the entry is the same, but its body is the single-direction
code made K lanes wide (``coarsen.ad.forward.simd``: float tangents ``Lanes(K)`` vectors, array
tangents lane-last, the packed tangents transposed in the prologue and back in the epilogue;
``NotVectorized`` where the rewrite does not know a tangent form), lane k still operation for
operation the single-direction code.  With
``input_language=True`` matrix products, ``solve`` and ``einsum`` are emitted as NumPy calls
(``a @ b``, ``np.linalg.solve``, ``np.einsum``), not as the runtime helpers whose shape checks
``raise``, so that the module is in coarsen's input language (``coarsen.hessian`` reads it back
for reverse mode).  The entry's statements then go through the passes of
``coarsen.ad.forward.pipeline.FORWARD`` (the SIMD form's ``jam``), but those named in
``options.disable``; ``emitter.passes_run`` names those that ran.  The IR is not modified.
"""
from __future__ import annotations

import copy
from dataclasses import replace

import gast

from ...analysis.bounds import plan_bounds
from ...ir import fresh_check
from ...ir.nodes import Array
from ...codegen import build as B
from ...codegen.gast_queries import comment_pass
from ..lift_planned import lift_planned, lifted_names
from ...codegen.runtime import helper_source
from ..passes import Fact
from . import lanes
from .emitter import ForwardEmitter
from ...ir.tangent_names import tangent_names
from .pipeline import FORWARD, ForwardCode, ForwardContext, ForwardModule
from .simd import LANE_HELPERS, NotVectorized, simd_body


def jvp_ir(fn, wrt, facts, entry_name, options, *, budget_seconds=10.0):
    """The JVP module of ``fn`` (see the module docstring) and its emitter (``names``: the
    tangents' names; ``tangent_statements``, ``zero_tangents``, ``loop_notes`` for reports;
    ``segments``: the planned segments, ``timed_out``: the locations of those whose symbolic
    stage ran past ``budget_seconds``, with ``options.coarsen``; ``passes_run``).  The
    driver reads ``boundscheck``, ``input_language``, ``directions``, ``coarsen``, ``simd``
    and ``disable`` from ``options``."""
    boundscheck, input_language = options.boundscheck, options.input_language
    directions, coarsen, simd = options.directions, options.coarsen, options.simd
    segments, budgets, names = [], [], {}
    if coarsen:
        # planning puts Segment nodes into the body and closed forms replace loops: a copy
        fn = replace(fn, body=copy.deepcopy(fn.body), types=dict(fn.types),
                     names=fn.names.fork())
        facts = replace(facts, defs=dict(facts.defs), in_loop=set(facts.in_loop))
        segments, budgets = lift_planned(fn, facts, budget_seconds)
        names = lifted_names(segments)
    bounds = plan_bounds(fn) if boundscheck else None
    if simd and directions:
        # the single-direction code, its tangents then made K lanes wide (raises
        # NotVectorized where it cannot be)
        if coarsen:
            raise NotVectorized("coarse forward mode")
        return _simd_module(fn, wrt, facts, entry_name, bounds, options)
    em = ForwardEmitter(fn, wrt, facts, bounds, input_language, directions)
    em.lifted_names = names
    em.segments = segments
    em.timed_out = tuple(loc for loc, budget in budgets if budget.timed_out)
    body = em.block(fn.body)
    comment_pass(body)
    types = fn.types
    if directions:
        taken = set(em.types) | set(fn.params)
        packed = tangent_names(fn, wrt, "_dots", taken)
    prologue = []
    for p in fn.params:
        arr = isinstance(types.get(p), Array)
        if arr and p in facts.stored:
            prologue.append(B.assign(p, _copy(B.name(p))))
        if p in em.wrt:
            if directions:
                # lane k's tangent: row k of the packed tangents (a copy where it is written)
                for k, lane in enumerate(em.lanes):
                    row = B.subscript(B.name(packed[p]), B.const(k))
                    prologue.append(B.assign(lane[p], _copy(row) if arr and p in facts.stored
                                             else row))
            elif arr and p in facts.stored:
                prologue.append(B.assign(em.dot(p), _copy(B.name(em.dot(p)))))
        if p in em.active and p not in em.wrt:
            prologue += [B.assign(lane[p], em.zero_of(p, B.name(p))) for lane in em.lanes]
    if prologue:
        prologue[0].coarsen_comment = "prologue: copies of written inputs, zero tangents"
    if body:
        first = getattr(body[0], "coarsen_comment", None)
        body[0].coarsen_comment = ("tangent sweep: the primal and its tangents, in one pass"
                                   + (f"\n{first}" if first else ""))
    result_arr = isinstance(types.get(fn.result), Array)
    active_result = fn.result in em.active
    epilogue = []
    if directions:
        # the lanes' tangents of the result stacked along a leading axis of length K
        out = em.fresh("_dots_out")
        shape = B.binop(B.tuple_(B.const(directions)), "+", B.attr(f"{fn.result}.shape")) \
            if result_arr else B.tuple_(B.const(directions))
        epilogue.append(B.assign(out, B.call("np.zeros", shape)))
        if active_result:
            for k, lane in enumerate(em.lanes):
                epilogue.append(B.assign(B.subscript(B.name(out), B.const(k)),
                                         B.name(lane[fn.result])))
        value = B.call("np.copy", B.name(fn.result)) if result_arr \
            else B.call("float", fn.result)
        ret = B.return_(B.tuple_(value, B.name(out)))
    elif result_arr:
        # an array result: copies, so that neither aliases an argument or its tangent
        result_dot = (B.call("np.copy", B.name(em.dot(fn.result))) if active_result
                      else B.call("np.zeros_like", B.name(fn.result)))
        ret = B.return_(B.tuple_(B.call("np.copy", B.name(fn.result)), result_dot))
    else:
        result_dot = B.name(em.dot(fn.result)) if active_result else B.const(0.0)
        ret = B.return_(B.tuple_(B.call("float", fn.result), B.call("float", result_dot)))
    params = list(fn.params) + [packed[w] if directions else em.dot(w) for w in wrt]
    code = _passes(ForwardCode(prologue + body + epilogue + [ret], tuple(params), []), em,
                   options, frozenset())
    func = B.funcdef(entry_name, params, code.stmts)
    return _tidied(_module(func, em), em, options), em


def _passes(code, em, options, start):
    """``code`` through the pipeline ``FORWARD`` (``start``: the facts established); the
    names of the passes that ran in ``em.passes_run``, the loops jammed in ``em.jammed``."""
    code, em.passes_run = FORWARD.run(code, ForwardContext(options), options.disable, start)
    em.jammed = code.jammed
    return code


def _tidied(module, em, options):
    """``module`` through the module's stage (``FORWARD.then``), the names of the passes that
    ran added to ``em.passes_run``."""
    assembled, ran = FORWARD.then.run(ForwardModule(module), ForwardContext(options, em.types),
                                      options.disable)
    em.passes_run = tuple(em.passes_run) + tuple(ran)
    return assembled.module


def _module(func, em, imports=""):
    """The module of the entry ``func``: its imports and the runtime helpers it calls."""
    helpers = helper_source(sorted(em.helpers)) if em.helpers else ""
    helper_mod = gast.parse(helpers) if helpers else gast.Module(body=[], type_ignores=[])
    used = {n.id for node in [func] + list(helper_mod.body) for n in gast.walk(node)
            if isinstance(n, gast.Name)}
    header = gast.parse("".join(line for mod, line in (("math", "import math\n"),
                                                       ("np", "import numpy as np\n"))
                                if mod in used) + imports or "\n")
    module = gast.Module(body=header.body + helper_mod.body + [func], type_ignores=[])
    if fresh_check.ENABLED:
        fresh_check.check_names(module, em.supply, {func.name})
    return module


def _simd_module(fn, wrt, facts, entry_name, bounds, options):
    """The vector JVP of ``k = options.directions`` directions in its SIMD form
    (``coarsen.ad.forward.simd``): the same entry as ``directions=k`` (packed tangents in,
    packed tangents out), each tangent K lanes wide inside."""
    k = options.directions
    em = ForwardEmitter(fn, wrt, facts, bounds, options.input_language, 0)
    em.lifted_names, em.segments, em.timed_out = {}, [], ()
    body = em.block(fn.body)
    comment_pass(body)
    body = simd_body(body, em, k)
    types = fn.types
    taken = set(em.types) | set(fn.params)
    packed = tangent_names(fn, wrt, "_dots", taken)
    K = B.const(k)

    def lane_last(packed_name, like):
        # (K,) + shape -> shape + (K,), C-contiguous
        rows = B.call(gast.Attribute(value=B.name(packed_name), attr="reshape", ctx=gast.Load()),
                      B.tuple_(K, B.attr(f"{like}.size")))
        cols = B.call("np.ascontiguousarray", gast.Attribute(value=rows, attr="T",
                                                             ctx=gast.Load()))
        return B.call(gast.Attribute(value=cols, attr="reshape", ctx=gast.Load()),
                      B.binop(B.attr(f"{like}.shape"), "+", B.tuple_(K)))

    prologue = []
    for p in fn.params:
        arr = isinstance(types.get(p), Array)
        if arr and p in facts.stored:
            prologue.append(B.assign(p, _copy(B.name(p))))
        if p in em.wrt:
            prologue.append(B.assign(em.dot(p), lane_last(packed[p], p) if arr else
                                     B.call("_lanes_at", B.name(packed[p]), B.tuple_(), K)))
        elif p in em.active:
            prologue.append(B.assign(em.dot(p), B.call("np.zeros", B.binop(
                B.attr(f"{p}.shape"), "+", B.tuple_(K))) if arr else
                B.call("_lanes_zeros", K)))
    if prologue:
        prologue[0].coarsen_comment = ("prologue: copies of written inputs, the tangents of "
                                       f"{k} directions, lanes last")
    if body:
        first = getattr(body[0], "coarsen_comment", None)
        body[0].coarsen_comment = (f"tangent sweep: the primal and its tangents, {k} lanes "
                                   "each, in one pass" + (f"\n{first}" if first else ""))
    r = fn.result
    result_arr = isinstance(types.get(r), Array)
    out = em.fresh("_dots_out")
    epilogue = []
    if r in em.active and result_arr:
        flat = B.call(gast.Attribute(value=B.call("np.ascontiguousarray", B.name(em.dot(r))),
                                     attr="reshape", ctx=gast.Load()),
                      B.tuple_(B.attr(f"{r}.size"), K))
        rows = B.call("np.ascontiguousarray", gast.Attribute(value=flat, attr="T",
                                                             ctx=gast.Load()))
        epilogue.append(B.assign(out, B.call(gast.Attribute(value=rows, attr="reshape",
                                                            ctx=gast.Load()),
                                             B.binop(B.tuple_(K), "+", B.attr(f"{r}.shape")))))
    else:
        shape = B.binop(B.tuple_(K), "+", B.attr(f"{r}.shape")) if result_arr else B.tuple_(K)
        epilogue.append(B.assign(out, B.call("np.zeros", shape)))
        if r in em.active:
            epilogue.append(gast.Expr(value=B.call("_lanes_put", B.name(out), B.tuple_(),
                                                   B.name(em.dot(r)))))
    value = B.call("np.copy", B.name(r)) if result_arr else B.call("float", r)
    ret = B.return_(B.tuple_(value, B.name(out)))
    params = list(fn.params) + [packed[w] for w in wrt]
    code = _passes(ForwardCode(prologue + body + epilogue + [ret], tuple(params), []), em,
                   options, frozenset({Fact.SIMD_ENTRY}))
    func = B.funcdef(entry_name, params, code.stmts)
    used = {n.id for n in gast.walk(func) if isinstance(n, gast.Name)}
    names = [f"{fname} as {alias}" for alias, fname in sorted(LANE_HELPERS.items())
             if alias in used]
    imports = f"from {lanes.__name__} import {', '.join(names)}\n" if names else ""
    return _tidied(_module(func, em, imports), em, options), em


def _copy(node):
    return B.call(gast.Attribute(value=node, attr="copy", ctx=gast.Load()))
