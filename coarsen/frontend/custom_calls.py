"""Lowering calls of functions with custom derivative rules (``coarsen.frontend.custom``): the rule
takes precedence over inlining the function.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) and a call whose callee resolved to a
``coarsen.custom_vjp`` or ``coarsen.custom_jvp`` object (``source.CustomFunction``).
Guarantees: the call's arguments are bound as Python binds them (the decorated function's
signature), and then, with the primitives of ``coarsen.ir.primitives.custom``:

* ``custom_vjp``: ``f_fwd`` is inlined on ``custom_stop`` copies of the arguments (so nothing
  it computes is differentiated), giving ``out`` and the residuals (its ``return out, (r1,
  r2)`` is read as the flat ``return out, r1, r2``); ``f_bwd`` is lowered apart, into a
  ``BackwardRule`` on placeholders for the residuals (a tuple, or the one value ``f_fwd``
  returned) and ``g``, which the reverse sweep runs (``coarsen.ad.custom_backward``); the
  call's value is ``custom_vjp_out(out, residuals..., arguments...)``;
* ``custom_jvp``: the rule is inlined on ``primals`` (``custom_stop`` copies) and ``tangents``
  (``custom_seed``: zero, derivative 1), both tuples, giving ``(primal_out, tangent_out)``;
  the call's value is ``custom_jvp_out(primal_out, tangent_out)``.

The rules are read like any inlined helper (``get_source`` on the lowering's ``Dependencies``:
their sources are part of the cache key).  Inside one of its own rules, a call of the function
is inlined as a plain helper (``f_fwd`` may compute ``f(x)``).  A missing rule, a rule that
returns the wrong kind of value, or the wrong number of cotangents raises ``CoarsenError`` at
the call (or at the rule's ``return``), naming the rule, before any code is generated.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass

import gast

from ..ir.nodes import Assign, Var, walk
from ..ir.primitives.custom import BackwardRule
from .helpers_inline import TupleValue, bind_arguments, inline_call, inline_with
from .source import get_source, unwrap


@dataclass
class _Residuals:
    """How ``f_fwd`` returns its residuals: ``count`` values, as a tuple literal or not."""
    count: int | None = None
    tupled: bool = False


def _rules(obj):
    if obj.kind == "custom_vjp":
        return tuple(unwrap(r) for r in (obj.fwd, obj.bwd) if r is not None)
    return tuple(unwrap(r) for r in (obj.jvp,) if r is not None)


def _flat_returns(shape):
    """A transform for ``inline_with``: ``f_fwd``'s ``FunctionDef`` with every ``return out,
    (r1, ..., rk)`` flattened to ``return out, r1, ..., rk``; ``shape`` records ``k`` and
    whether the residuals were a tuple (every return must agree)."""
    def transform(src):
        node = copy.deepcopy(src.node)
        name = src.fn.__name__
        for ret in gast.walk(node):
            if not isinstance(ret, gast.Return):
                continue
            v = ret.value
            if not (isinstance(v, gast.Tuple) and len(v.elts) == 2):
                raise src.error(ret, f"the custom_vjp forward rule {name} must return "
                                "(out, residuals)", "return out, (r1, r2, ...)")
            _refuse_tuple_output(src, ret, "custom_vjp forward")
            res = v.elts[1]
            tupled = isinstance(res, gast.Tuple)
            count = len(res.elts) if tupled else 1
            if shape.count is not None and (shape.count, shape.tupled) != (count, tupled):
                raise src.error(ret, f"the custom_vjp forward rule {name} returns residuals "
                                "of different forms on different paths",
                                "return the same tuple of residuals on every path")
            shape.count, shape.tupled = count, tupled
            v.elts = [v.elts[0]] + (list(res.elts) if tupled else [res])
        return node
    return transform


def _refuse_tuple_output(src, ret, kind):
    """A rule's ``return (a, b), ...``: the function's output must be one value."""
    v = ret.value
    if isinstance(v, gast.Tuple) and v.elts and isinstance(v.elts[0], gast.Tuple):
        raise src.error(ret, f"the {kind} rule {src.fn.__name__} returns a tuple as the "
                        "function's output: a function with a custom rule returns one float "
                        "or one float array",
                        "return the outputs as one array (np.array([a, b])), or give each "
                        "output a custom function of its own")


def _single_output(src):
    """A transform for ``inline_with``: a custom_jvp rule, checked by
    ``_refuse_tuple_output`` (its ``FunctionDef`` as it is)."""
    for ret in gast.walk(src.node):
        if isinstance(ret, gast.Return):
            _refuse_tuple_output(src, ret, "custom_jvp")
    return src.node


def _site(lw, node):
    return f"{os.path.basename(lw.src.filename)}:{node.lineno}:{node.col_offset + 1}"


def _tuple_result(lw, node, value, rule, kind, expected):
    if not isinstance(value, TupleValue):
        raise lw.err(node, f"the {kind} rule {rule.__name__} returns one value, not a tuple",
                     expected)
    return value


def _backward_rule(lw, node, bwd, nres, tupled):
    """``f_bwd`` lowered apart (a ``BackwardRule``): on placeholders for its ``nres`` residuals
    (a tuple, or the one value) and the output's adjoint ``g``, to run in the reverse sweep."""
    n = lw.namer.inlines.get(bwd.__name__, 0) + 1      # the inlining's number, as its locals'
    base = "_" + bwd.__name__.strip("_") + ("" if n == 1 else str(n))
    residuals = tuple(lw.namer.fresh(f"{base}_res{k}") for k in range(nres))
    g = lw.namer.fresh(f"{base}_g")
    res = TupleValue(tuple(Var(r) for r in residuals), "the residuals") if tupled else Var(residuals[0])
    saved, lw.out = lw.out, []
    try:
        cts = inline_with(lw, node, bwd, [res, Var(g)])
        body = tuple(lw.out)
    finally:
        lw.out = saved
    cts = _tuple_result(lw, node, cts, bwd, "custom_vjp backward",
                        "return a tuple with one cotangent per float argument: (ct,)")
    return BackwardRule(bwd.__name__, residuals, g, body, cts.items, lw.src.filename,
                        frozenset(lw.namer.temps))


CUSTOM_RESULTS = frozenset({"custom_jvp_out", "custom_vjp_out"})


def custom_calls(fn_ir):
    """The statements of ``fn_ir`` (lowered IR) that are calls of functions with custom rules,
    in program order (a transform that cannot honour the rules refuses them)."""
    return [s for s in walk(fn_ir.body) if isinstance(s, Assign) and s.op in CUSTOM_RESULTS]


def lower_custom_call(lw, node, obj, target):
    """Lower the call ``node`` of the ``custom_vjp``/``custom_jvp`` object ``obj`` (see the
    module docstring); returns the result operand."""
    fun = unwrap(obj.fun)
    if any(r in lw.stack for r in _rules(obj)):
        return inline_call(lw, node, fun, target)       # inside its own rule: plain Python
    src = get_source(fun, lw.src.deps)
    a = src.node.args
    if a.vararg is not None or a.kwarg is not None or a.kwonlyargs:
        raise lw.err(node, f"{fun.__name__} has *args, **kwargs or keyword-only parameters, "
                     f"which {obj.kind} functions cannot have here", "list the parameters explicitly")
    params = [p.id for p in a.args]
    args = [lw.lower_expr(b) for b in bind_arguments(lw, node, fun, params)]
    name = fun.__name__
    base = (("kind", obj.kind), ("params", tuple(params)), ("primal", name),
            ("site", _site(lw, node)))
    stopped = tuple(lw.op(node, None, "custom_stop", [x]) for x in args)
    if obj.kind == "custom_vjp":
        if obj.fwd is None:
            raise lw.err(node, f"{name} is a custom_vjp function without rules",
                         f"call {name}.defvjp(f_fwd, f_bwd) before differentiating")
        fwd, bwd = unwrap(obj.fwd), unwrap(obj.bwd)
        shape = _Residuals()
        got = inline_with(lw, node, fwd, stopped, transform=_flat_returns(shape))
        got = _tuple_result(lw, node, got, fwd, "custom_vjp forward", "return out, (r1, r2, ...)")
        out, rest = got.items[0], got.items[1:]
        rule = _backward_rule(lw, node, bwd, len(rest), shape.tupled)
        attrs = tuple(sorted(base + (("backward", rule), ("fwd", fwd.__name__),
                                     ("rule", bwd.__name__))))
        return lw.op(node, target, "custom_vjp_out", [out, *rest, *args], attrs=attrs)
    if obj.jvp is None:
        raise lw.err(node, f"{name} is a custom_jvp function without a rule",
                     f"call {name}.defjvp(rule) before differentiating")
    rule = unwrap(obj.jvp)
    seeds = tuple(lw.op(node, None, "custom_seed", [x]) for x in args)
    got = inline_with(lw, node, rule, [TupleValue(stopped, "primals"), TupleValue(seeds, "tangents")],
                      transform=_single_output)
    got = _tuple_result(lw, node, got, rule, "custom_jvp", "return primal_out, tangent_out")
    if len(got) != 2:
        raise lw.err(node, f"the custom_jvp rule {rule.__name__} returns {len(got)} values",
                     "return primal_out, tangent_out")
    attrs = tuple(sorted(base + (("rule", rule.__name__),)))
    return lw.op(node, target, "custom_jvp_out", list(got.items), attrs=attrs)
