"""Parallel loops outlined into functions of their own, for Numba's ``parallel=True``.

Requires: a ``gast.Module`` of generated code whose parallel loops are ``gast.For`` nodes marked
``coarsen_parallel = True`` (printed as ``numba.prange`` on the cpu target), each iterating over
``range(...)`` and holding no ``return``.

Guarantees: ``outline_parallel_loops(module)`` returns a new module (the input is not changed)
in which each outermost parallel loop of a top-level function is the body of a new top-level
function ``_parallel<k>_<function>``, called where the loop stood. Its parameters are the
function's variables that the loop reads or writes and that are defined outside it (arguments,
or assigned elsewhere in the function), in the order the loop first names them; it returns those
it assigns that are read outside it (or again in a later trip of an enclosing loop), as a tuple
assigned back. Arrays are passed by reference, so the loop's element writes land in the
caller's arrays, as before. A loop whose variables cannot be split this way (none here so far)
stays where it is.

Why: Numba compiles a whole ``parallel=True`` function through its parfor passes, whose array
analysis inserts run-time checks of array sizes around every array expression, not only inside
the ``prange`` loop. Adjoint code reassigns arrays (tape pops, ``np.empty((0,))`` initial
values) and updates them with broadcasting (``A_bar += np.expand_dims(s0_bar, 0)``), which those
checks reject: "AssertionError: Sizes of A_bar, ... do not match", with the serial build of the
same source correct (found by a probe: a ``prange`` sum after ``np.sum(A, axis=0)``, and slice
stencils with ``parallel=True``). Outlined, only the loop is compiled with ``parallel=True``.
"""
from __future__ import annotations

import copy

import gast

__all__ = ["outline_parallel_loops"]


def outline_parallel_loops(module: gast.Module) -> gast.Module:
    module = copy.deepcopy(module)
    taken = {st.name for st in module.body if isinstance(st, gast.FunctionDef)}
    body = []
    count = 0
    for st in module.body:
        if isinstance(st, gast.FunctionDef) and _has_parallel(st):
            made = []
            count = _outline_in(st, st.body, made, taken, count, depth=0)
            body.extend(made)
        body.append(st)
    module.body = body
    return module


def _has_parallel(node) -> bool:
    return any(getattr(n, "coarsen_parallel", False) for n in gast.walk(node))


def _outline_in(fn, block, made, taken, count, depth):
    """Replace the outermost parallel loops in ``block`` (a statement list of ``fn``)."""
    for i, st in enumerate(block):
        if isinstance(st, gast.For) and getattr(st, "coarsen_parallel", False):
            new = _outline(fn, st, taken, count, nested=depth > 0)
            if new is not None:
                call, func = new
                block[i] = call
                made.append(func)
                count += 1
            continue
        for field in ("body", "orelse"):
            sub = getattr(st, field, None)
            if isinstance(sub, list) and sub and isinstance(sub[0], gast.stmt):
                count = _outline_in(fn, sub, made, taken, count,
                                    depth + isinstance(st, (gast.For, gast.While)))
    return count


def _names(node):
    """``(loads, stores)``: the names ``node`` reads and assigns, each in first-seen order."""
    loads, stores = {}, {}
    for _, n, store in _events(node):
        (stores if store else loads).setdefault(n, None)
    return list(loads), list(stores)


def _events(node, out=None):
    """``(node id, name, is_store)`` for every ``Name`` under ``node``, in execution order
    (an assignment's value before its targets, an augmented assignment's target read first)."""
    out = [] if out is None else out
    if isinstance(node, gast.Name):
        out.append((id(node), node.id, isinstance(node.ctx, (gast.Store, gast.Param))))
    elif isinstance(node, gast.Assign):
        _events(node.value, out)
        for t in node.targets:
            _events(t, out)
    elif isinstance(node, gast.AugAssign):
        if isinstance(node.target, gast.Name):
            out.append((id(node.target), node.target.id, False))
        _events(node.value, out)
        _events(node.target, out)
    elif isinstance(node, gast.For):
        _events(node.iter, out)
        _events(node.target, out)
        for st in node.body + node.orelse:
            _events(st, out)
    else:
        for field in node._fields:
            value = getattr(node, field, None)
            for v in (value if isinstance(value, list) else [value]):
                if isinstance(v, gast.AST):
                    _events(v, out)
    return out


def _outline(fn, loop, taken, count, nested):
    if any(isinstance(n, (gast.Return, gast.Yield, gast.Global, gast.Nonlocal)) for n in gast.walk(loop)):
        return None
    inside = {id(n) for n in gast.walk(loop)}
    events = _events(fn)
    first = next(i for i, e in enumerate(events) if e[0] in inside)
    last = max(i for i, e in enumerate(events) if e[0] in inside)
    before = {a.id for a in fn.args.args} | {n for _, n, st in events[:first] if st}
    after = {}
    for _, n, st in events[last + 1:]:
        after.setdefault(n, not st)               # read after the loop before any new value
    loads, stores = _names(loop)
    target = loop.target.id if isinstance(loop.target, gast.Name) else None
    if any(v not in before and after.get(v) for v in stores if v != target):
        return None                                # a value first made in the loop, read after it
    params = [v for v in dict.fromkeys(loads + stores) if v in before]
    back = [v for v in stores if v in before and v != target
            and (after.get(v) or (nested and v in loads))]
    name = f"_parallel{count}_{fn.name}"
    while name in taken:
        name = "_" + name
    taken.add(name)
    ret = None
    if back:
        ret = gast.Return(value=gast.Tuple(elts=[gast.Name(id=v, ctx=gast.Load(), annotation=None,
                                                           type_comment=None) for v in back],
                                           ctx=gast.Load()))
    func = gast.FunctionDef(
        name=name,
        args=gast.arguments(args=[gast.Name(id=v, ctx=gast.Param(), annotation=None, type_comment=None)
                                  for v in params],
                            posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                            defaults=[]),
        body=[loop] + ([ret] if ret is not None else []),
        decorator_list=[], returns=None, type_comment=None, type_params=[])
    func.coarsen_comment = (f"a parallel loop of {fn.name}, outlined: Numba compiles only this "
                            "function with parallel=True")
    call = gast.Call(func=gast.Name(id=name, ctx=gast.Load(), annotation=None, type_comment=None),
                     args=[gast.Name(id=v, ctx=gast.Load(), annotation=None, type_comment=None)
                           for v in params], keywords=[])
    if back:
        stmt = gast.Assign(targets=[gast.Tuple(elts=[gast.Name(id=v, ctx=gast.Store(), annotation=None,
                                                               type_comment=None) for v in back],
                                               ctx=gast.Store())], value=call, type_comment=None)
    else:
        stmt = gast.Expr(value=call)
    comment = getattr(loop, "coarsen_comment", None)
    if comment is not None:
        stmt.coarsen_comment = comment
        loop.coarsen_comment = None
    return stmt, func
