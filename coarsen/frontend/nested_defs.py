"""Functions defined inside the differentiated function (``def`` in its body), closing over its
local variables, and called there: inlined at each call, as the module-level helpers are.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) whose ``nested`` maps source names to the
``NestedDef``s defined so far, whose ``local_names`` leave out the nested functions' own
locals (``local_store_names``), and which calls ``define_nested`` at a ``def`` statement and
``call_nested`` at a call of a name in ``nested``; ``coarsen.frontend.helpers_inline``
(``bind_arguments``, ``inline_lowered``).
Guarantees, before any code is generated:

* a ``def`` at the top level of the function's body (not in a branch or a loop), without
  decorators, whose defaults are numbers, whose name is bound by that ``def`` alone and read
  only as the function of calls, is recorded where it stands; anything else is a
  ``CoarsenError`` at it (a ``def`` in a branch, a nested function passed or returned as a
  value, one rebound, called before its ``def``, or calling itself);
* a call of it is inlined where it stands, its arguments bound as Python binds them: its own
  locals (parameters and the names it assigns) get fresh names; every other name it reads
  that is a local of the function it is defined in (lexical scoping: not the caller's, where
  one nested function calls another) is that variable itself, read when the call runs,
  as Python's closures read their cells (late binding), so a closure over a loop variable sees
  each trip's value; arrays it writes through are the enclosing function's (a closure may
  mutate, never rebind: ``nonlocal`` is refused by the fence); a nested function it reads is
  the enclosing function's; names it reads that the enclosing function does not bind are the
  module's, as for the enclosing function;
* the fence runs over its body as over the rest of the function.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, replace

import gast

from .helpers_inline import bind_arguments, inline_lowered


@dataclass(frozen=True, eq=False)
class NestedDef:
    """A nested ``def``: its node, its defaults' values and the ``Lowerer`` of the function
    it is defined in (whose variables its free names are: lexical scoping)."""
    node: gast.FunctionDef
    defaults: tuple
    scope: object


def walk_outside_defs(node):
    """The nodes of ``node`` (of a function: of its body), not descending into nested
    ``def``s (each yielded as its ``FunctionDef`` node)."""
    stack = list(node.body) if isinstance(node, gast.FunctionDef) else [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)):
            continue
        stack.extend(gast.iter_child_nodes(n))


def local_store_names(node):
    """The names ``node`` (a function) binds itself: its parameters, the names it assigns and
    its nested ``def``s' names, not their locals."""
    out = {a.id for a in node.args.args}
    for n in walk_outside_defs(node):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
            out.add(n.id)
        elif isinstance(n, gast.FunctionDef):
            out.add(n.name)
    return out


def _free_reads(node):
    """The names a nested function reads (nested ``def``s inside it included) and does not
    bind itself."""
    own = local_store_names(node)
    reads = set()
    for n in gast.walk(node):
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
            reads.add(n.id)
    return reads - own


def _number(node):
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = _number(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    return None


def define_nested(lw, s):
    """The ``def`` statement ``s`` in ``lw``'s function: checked and recorded (``lw.nested``)."""
    body = lw.src.node.body
    if not any(st is s for st in body):
        raise lw.err(s, "a nested def is supported at the top level of the function only "
                     "(not inside a branch or a loop)", "move the def before the if or the loop")
    if s.decorator_list:
        raise lw.err(s.decorator_list[0], "a nested def with decorators is not supported",
                     "remove the decorator")
    defaults = []
    for d in s.args.defaults:
        v = _number(d)
        if v is None:
            raise lw.err(d, "a nested def's defaults must be numbers",
                         "pass the value at the call")
        defaults.append(v)
    for n in walk_outside_defs(lw.src.node):
        if n is s:
            continue
        if isinstance(n, gast.Name) and n.id == s.name and isinstance(n.ctx, gast.Store):
            raise lw.err(n, f"{s.name!r} is a nested function and is assigned here",
                         "give the variable another name")
        if isinstance(n, gast.FunctionDef) and n.name == s.name:
            raise lw.err(n, f"the nested function {s.name!r} is defined twice",
                         "give each its own name")
    called = {id(c.func) for c in gast.walk(lw.src.node) if isinstance(c, gast.Call)}
    for n in gast.walk(lw.src.node):
        if isinstance(n, gast.Name) and n.id == s.name and isinstance(n.ctx, gast.Load) \
                and id(n) not in called and not _shadowed(lw.src.node, n, s.name):
            raise lw.err(n, f"the nested function {s.name!r} is used as a value",
                         "call it where it is defined; pass its results instead")
    lw.nested[s.name] = NestedDef(s, tuple(defaults), lw)


def _shadowed(root, name_node, name):
    """Is ``name_node`` inside a nested function that binds ``name`` itself (a local of its
    own, not the nested function)?"""
    def visit(node, inside):
        for child in gast.iter_child_nodes(node):
            now = inside
            if isinstance(child, gast.FunctionDef):
                now = inside or name in local_store_names(child)
            if child is name_node:
                return now
            found = visit(child, now)
            if found is not None:
                return found
        return None
    return bool(visit(root, False))


def nested_name(lw, name):
    """Is ``name`` a local of ``lw``'s function that a ``def`` of its body binds?"""
    return name in lw.local_names and any(
        isinstance(s, gast.FunctionDef) and s.name == name for s in lw.src.node.body)


def call_nested(lw, node, target):
    """Inline the call ``node`` of a nested function of ``lw`` (``lw.nested``)."""
    name = node.func.id
    if name not in lw.nested:
        raise lw.err(node, f"the nested function {name}() is called before its def",
                     "define it before the call")
    nd = lw.nested[name]
    if any(d is nd.node for d in lw.active_defs):
        raise lw.err(node, f"recursive call to the nested function {name}() is not supported",
                     "rewrite the recursion as a loop")
    sub_src = replace(lw.src, node=nd.node)
    k = lw.namer.inline_count(name)
    sub = type(lw)(sub_src, lw.namer, prefix=f"{name.strip('_')}{k}_", stack=lw.stack)
    sub.source_names = lw.source_names
    sub.active_defs = lw.active_defs + (nd.node,)
    scope = nd.scope                            # where it is defined, not where it is called
    for v in _free_reads(nd.node):
        if v in scope.nested:
            sub.nested[v] = scope.nested[v]
        elif v in scope.tuples:
            sub.tuples[v] = scope.tuples[v]
        elif v in scope.local_names:
            sub.rename[v] = scope.name(v)       # the enclosing variable itself: late binding
            sub.local_names.add(v)
    fake = types.SimpleNamespace(__name__=name, __defaults__=nd.defaults)
    bound = bind_arguments(lw, node, fake, sub.params)
    args = [lw.lower_expr(a) for a in bound]
    return inline_lowered(lw, node, fake, sub, sub_src, args, target)
