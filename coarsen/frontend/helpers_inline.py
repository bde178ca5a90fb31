"""Inlining calls to user functions, including helpers that return tuples.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) in the middle of lowering a function, and
a call node whose callee resolved to a plain Python function.
Guarantees: ``inline_call`` binds the arguments as Python does (positional, keyword, numeric
defaults; arrays by reference unless the helper rebinds its parameter), lowers the helper's
body into the caller's statement list under fresh names (``<helper><k>_<local>``), and returns
its value: one operand for a helper that returns one value, or a ``TupleValue`` with one
fresh result variable per element (``_<helper>_result_<k>``) for a helper that returns a tuple
on every path (``return a, b``, ``return other_helper(...)`` of a tuple helper, or a name bound
to such a call).  Recursion, missing or duplicate arguments, a helper that returns tuples of
different lengths, or a tuple on one path and one value on another, are ``CoarsenError``s
raised at the call or the ``return`` before any code is generated.  ``inline_with`` inlines a
helper on operands lowered already, and passes a ``TupleValue`` as a parameter that the helper
unpacks or indexes (the custom rules' residuals, primals and tangents:
``coarsen.frontend.custom_calls``).

A ``TupleValue`` exists only inside the frontend: it never reaches the IR.  The lowering
accepts it where Python code uses a tuple without making it a value of its own (unpacking
``a, b = f(...)``, ``return f(...)`` from a helper, a name bound once ``t = f(...)`` and read
as ``t[0]`` with a constant index, or unpacked) and refuses it everywhere else.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import gast

from ..ir.nodes import Assign, Const, Var
from .source import get_source

Operand = Var | Const


@dataclass(frozen=True)
class TupleValue:
    """A tuple of operands known element by element at lowering time; ``what`` names where
    it came from (``rhs()``, ``t``) for error messages."""
    items: tuple[Operand, ...]
    what: str

    def __len__(self):
        return len(self.items)


def constant_index(node, length):
    """The element a constant subscript ``t[k]`` (``k`` an int literal, maybe negative) picks
    from a tuple of ``length`` elements, or ``None`` when ``node`` is not such a constant or
    is out of range (the caller raises)."""
    k = None
    if isinstance(node, gast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        k = node.value
    elif isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub) \
            and isinstance(node.operand, gast.Constant) and isinstance(node.operand.value, int) \
            and not isinstance(node.operand.value, bool):
        k = -node.operand.value
    if k is None or not -length <= k < length:
        return None
    return k % length


def _bind_arguments(lw, node, fn, params):
    """The argument node for each parameter of ``fn``, as Python binds them."""
    bound = [None] * len(params)
    if len(node.args) > len(params):
        raise lw.err(node, f"{fn.__name__}() takes {len(params)} arguments, got {len(node.args)}")
    for j, a in enumerate(node.args):
        bound[j] = a
    for kw in node.keywords:
        if kw.arg is None:
            raise lw.err(kw.value, "**-unpacking of keyword arguments is not supported",
                         "pass the arguments by name or position")
        if kw.arg not in params:
            raise lw.err(node, f"{fn.__name__}() has no parameter {kw.arg!r}",
                         f"its parameters are {', '.join(params)}")
        j = params.index(kw.arg)
        if bound[j] is not None:
            raise lw.err(node, f"{fn.__name__}() got two values for {kw.arg!r}")
        bound[j] = kw.value
    defaults = fn.__defaults__ or ()
    for j in range(len(params)):
        if bound[j] is None:
            d = j - (len(params) - len(defaults))
            if d < 0:
                raise lw.err(node, f"{fn.__name__}() is missing the argument {params[j]!r}")
            dv = defaults[d]
            if not isinstance(dv, (int, float, bool)):
                raise lw.err(node, f"the default of {params[j]!r} is not a number",
                             "pass the argument explicitly")
            bound[j] = gast.Constant(value=dv, kind=None)
    return bound


def bind_arguments(lw, node, fn, params):
    """The argument node for each parameter of ``fn`` at the call ``node``, as Python binds
    them (numeric defaults as constants)."""
    return _bind_arguments(lw, node, fn, params)


def inline_call(lw, node, fn, target, discard=False):
    """Inline the call ``node`` of the user function ``fn`` into ``lw``'s output; returns the
    result operand (assigned to ``target`` when given and the helper returns one value), a
    ``TupleValue`` for a tuple-returning helper, or ``Const(0.0)`` for a discarded call of a
    helper without ``return``."""
    sub, sub_src = _sub_lowerer(lw, node, fn)
    bound = _bind_arguments(lw, node, fn, sub.params)
    args = [lw.lower_expr(a) for a in bound]
    return _inline_body(lw, node, fn, sub, sub_src, args, target, discard)


def inline_with(lw, node, fn, args, transform=None):
    """Inline ``fn`` called at ``node`` with the lowered ``args`` (one per parameter: an
    operand, or a ``TupleValue`` the helper may unpack or index but not rebind); returns its
    value as ``inline_call`` does.  ``transform``, when given, maps the helper's
    ``FunctionSource`` to the gast ``FunctionDef`` to lower instead of its own (a new node,
    line numbers kept)."""
    sub, sub_src = _sub_lowerer(lw, node, fn, transform)
    if len(args) != len(sub.params):
        raise lw.err(node, f"{fn.__name__}() takes {len(sub.params)} arguments here, "
                     f"got {len(args)}")
    return _inline_body(lw, node, fn, sub, sub_src, list(args), None, False)


def inline_lowered(lw, node, fn, sub, sub_src, args, target, discard=False):
    """Inline the body of ``sub`` (a ``Lowerer`` of ``sub_src`` made by the caller: a nested
    ``def``, ``coarsen.frontend.nested_defs``) with the lowered ``args``, as ``inline_call``
    does; ``fn`` names it in errors (``__name__``)."""
    return _inline_body(lw, node, fn, sub, sub_src, list(args), target, discard)


def _sub_lowerer(lw, node, fn, transform=None):
    if fn in lw.stack:
        raise lw.err(node, f"recursive call to {fn.__name__}() is not supported",
                     "rewrite the recursion as a loop")
    sub_src = get_source(fn, lw.src.deps)     # its reads join this lowering's record
    if transform is not None:
        sub_src = replace(sub_src, node=transform(sub_src))
    k = lw.namer.inline_count(fn.__name__)
    sub = type(lw)(sub_src, lw.namer, prefix=f"{fn.__name__.strip('_')}{k}_", stack=lw.stack)
    sub.source_names = lw.source_names
    return sub, sub_src


def _inline_body(lw, node, fn, sub, sub_src, args, target, discard):
    rebound = set()
    for n in gast.walk(sub_src.node):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
            rebound.add(n.id)
    loc = lw.loc(node)
    for p, a in zip(sub.params, args):
        if isinstance(a, TupleValue):
            if p in rebound:
                raise lw.err(node, f"{fn.__name__}() assigns to its parameter {p!r}, which "
                             f"holds the tuple {a.what}", "assign to another name")
            sub.tuples[p] = TupleValue(a.items, repr(p))
        elif isinstance(a, Var) and p not in rebound:
            sub.rename[p] = a.name          # arrays pass by reference, as in Python
        else:
            sub.rename[p] = lw.namer.user_fresh(sub.prefix + p)
            sub.source_names.setdefault(sub.rename[p], p)
            lw.emit(Assign(sub.rename[p], "copy", (a,), loc))
    body = sub.lower_function()
    lw.out.extend(body)
    if not sub.has_return:
        if not discard:
            raise lw.err(node, f"{fn.__name__}() returns nothing, so its value cannot be used")
        return Const(0.0)
    if sub.tuple_results is not None:
        return TupleValue(tuple(Var(r) for r in sub.tuple_results), f"{fn.__name__}()")
    res = Var(sub.result)
    if target is not None:
        lw.emit(Assign(target, "copy", (res,), loc))
        return Var(target)
    return res
