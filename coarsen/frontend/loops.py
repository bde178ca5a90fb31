"""Loops: ``while`` and ``for`` statements lowered to the IR's ``While`` and ``For``.

Requires: the ``Lowerer`` this mixin is part of (``coarsen.frontend.lower``): its ``emit``,
``tmp``, ``name``, ``err``, ``loc``, ``lower_block``, ``lower_cond``, ``flags`` and ``loops``.
Guarantees: ``range`` loops whose variable stays inside them and that neither break nor return
become ``For``; every other loop (``break``, ``return``, a leaked loop variable, iteration over
an array) becomes a ``While`` with an explicit counter and boolean flags, with the same
meaning.  ``contains``/``stmts_contain``/``contains_or_is``/``assigns`` are the syntactic
queries lowering asks of statements.
"""
from __future__ import annotations

import gast

from ..ir.nodes import Assign, Const, For, If, Var, While
from .source import Known

class Loop:
    """The flags of the loop being lowered: its ``break`` and ``continue`` flag names."""

    def __init__(self, brk, cont):
        self.brk = brk
        self.cont = cont


def contains(node, types_, stop_at_loops=False):
    for child in gast.iter_child_nodes(node):
        if isinstance(child, types_):
            return True
        if stop_at_loops and isinstance(child, (gast.For, gast.While)):
            continue
        if isinstance(child, (gast.FunctionDef, gast.Lambda)):
            continue
        if contains(child, types_, stop_at_loops):
            return True
    return False


def stmts_contain(stmts, types_, stop_at_loops=False):
    return any(isinstance(s, types_) or contains(s, types_, stop_at_loops) for s in stmts)


def contains_or_is(node, types_, stop_at_loops=False):
    return isinstance(node, types_) or contains(node, types_, stop_at_loops)


def assigns(stmts, name):
    for s in stmts:
        for n in gast.walk(s):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store) and n.id == name:
                return True
    return False


class LoopMixin:
    def stmt_While(self, s):
        if s.orelse:
            raise self.err(s, "while ... else is not supported", "use a flag after the loop")
        brk = self.namer.fresh("_brk")
        cont = self.namer.fresh("_cont")
        has_brk = stmts_contain(s.body, gast.Break, stop_at_loops=True)
        has_cont = stmts_contain(s.body, gast.Continue, stop_at_loops=True)
        has_ret = self.flags.ret is not None and stmts_contain(s.body, gast.Return)
        loc = self.loc(s)
        if has_brk:
            self.emit(Assign(brk, "copy", (Const(False),), loc))
        test_body = []
        saved = self.out
        self.out = test_body
        stops = ([brk] if has_brk else []) + ([self.flags.ret] if has_ret else [])
        test = self.tmp()
        if stops:
            g = self.not_any(stops, s)
            inner = []
            self.emit(If(g, inner, [Assign(test, "copy", (Const(False),), loc)], loc))
            self.out = inner
            self.lower_cond(s.test, target=test)
        else:
            self.lower_cond(s.test, target=test)
        self.out = saved
        self.emit_loop_body(s, [], test_body, test, brk, cont, has_cont, loc)

    def emit_loop_body(self, s, body, test_body, test, brk, cont, has_cont, loc):
        """Lower a loop's body (after ``body``'s first statements) and emit the ``While``."""
        self.loops.append(Loop(brk, cont))
        try:
            if has_cont:
                body.append(Assign(cont, "copy", (Const(False),), loc))
            self.lower_block(s.body, body)
        finally:
            self.loops.pop()
        self.emit(While(test_body, Var(test), body, loc))

    def desugar_iteration(self, s):
        """``for v in a`` / ``enumerate(a)`` / ``zip(a, b)`` over arrays become index loops."""
        it = s.iter
        kind = self.resolve_value(it.func, quiet=True) if isinstance(it, gast.Call) else None
        if isinstance(kind, Known) and kind.op in ("range", "prange"):
            return s
        fname = it.func.id if isinstance(it, gast.Call) and isinstance(it.func, gast.Name) else None
        if isinstance(it, gast.Call) and fname in ("enumerate", "zip") and fname not in self.local_names \
                and fname not in self.src.globals:
            seqs = list(it.args)
            if fname == "enumerate" and (len(seqs) == 2 or it.keywords):
                raise self.err(it, "enumerate() with a start is not supported",
                               "count from 0 and add the start: for k, v in enumerate(a): "
                               "i = k + start")
            if it.keywords or not seqs or (fname == "enumerate" and len(seqs) != 1):
                raise self.err(it, f"{fname}() is supported with plain array arguments only")
        elif isinstance(it, gast.Name) and it.id in self.local_names:
            fname, seqs = None, [it]
        else:
            raise self.err(it, "only `for ... in range(...)`, enumerate(array), zip(arrays) and "
                           "`for x in array` loops are supported",
                           "loop over an index: for i in range(len(a)): ...")
        for q in seqs:
            if not isinstance(q, gast.Name):
                if isinstance(q, gast.Call):
                    raise self.err(q, f"{fname or 'a for loop'} takes named arrays here, not a call",
                                   "loop over an index: for i in range(min(n, len(a))): v = a[i]")
                raise self.err(q, "iterate over a named array", "assign the array to a variable first")
        idx = self.namer.fresh("_idx")
        self.local_names.add(idx)

        def mk(node, like):
            return gast.copy_location(node, like)

        def length(q):
            return mk(gast.Call(func=gast.Name(id="len", ctx=gast.Load(), annotation=None, type_comment=None),
                                args=[q], keywords=[]), q)

        def elem(q):
            return mk(gast.Subscript(value=gast.Name(id=q.id, ctx=gast.Load(), annotation=None, type_comment=None),
                                     slice=gast.Name(id=idx, ctx=gast.Load(), annotation=None, type_comment=None),
                                     ctx=gast.Load()), q)

        stop = length(seqs[0])
        for q in seqs[1:]:
            stop = mk(gast.Call(func=gast.Name(id="min", ctx=gast.Load(), annotation=None, type_comment=None),
                                args=[stop, length(q)], keywords=[]), q)
        pre = []
        tgt = s.target
        if fname == "enumerate":
            if not (isinstance(tgt, gast.Tuple) and len(tgt.elts) == 2):
                raise self.err(tgt, "unpack enumerate() as `for i, v in enumerate(a)`")
            pre.append(mk(gast.Assign(targets=[tgt.elts[0]], value=gast.Name(id=idx, ctx=gast.Load(), annotation=None, type_comment=None), type_comment=None), s))
            pre.append(mk(gast.Assign(targets=[tgt.elts[1]], value=elem(seqs[0]), type_comment=None), s))
        elif fname == "zip":
            if not (isinstance(tgt, gast.Tuple) and len(tgt.elts) == len(seqs)):
                raise self.err(tgt, "unpack zip() into one name per array")
            for t, q in zip(tgt.elts, seqs):
                pre.append(mk(gast.Assign(targets=[t], value=elem(q), type_comment=None), s))
        else:
            pre.append(mk(gast.Assign(targets=[tgt], value=elem(seqs[0]), type_comment=None), s))
        rng = mk(gast.Call(func=gast.Name(id="range", ctx=gast.Load(), annotation=None, type_comment=None),
                           args=[stop], keywords=[]), s.iter)
        new = gast.For(target=gast.Name(id=idx, ctx=gast.Store(), annotation=None, type_comment=None),
                       iter=rng, body=pre + list(s.body), orelse=s.orelse, type_comment=None)
        return mk(new, s)

    def stmt_For(self, s):
        if s.orelse:
            raise self.err(s, "for ... else is not supported", "use a flag after the loop")
        s = self.desugar_iteration(s)
        if not isinstance(s.target, gast.Name):
            raise self.err(s.target, "only `for name in range(...)` loops are supported",
                           "loop over an index: for i in range(len(a)): ...")
        it = s.iter
        kind = self.resolve_value(it.func, quiet=True) if isinstance(it, gast.Call) else None
        if not (isinstance(kind, Known) and kind.op in ("range", "prange")):
            raise self.err(it, "only `for ... in range(...)` (or numba.prange) loops are supported",
                           "loop over an index: for i in range(len(a)): ...")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.err(it, f"{kind.op}() takes 1 to 3 positional arguments")
        args = [self.lower_expr(a) for a in it.args]
        if len(args) == 1:
            start, stop, step = Const(0), args[0], Const(1)
        elif len(args) == 2:
            start, stop, step = args[0], args[1], Const(1)
        else:
            start, stop, step = args
        if isinstance(step, Const) and step.value == 0:
            raise self.err(it, f"{kind.op}() step must not be zero")
        loc = self.loc(s)
        var_src = s.target.id
        has_brk = stmts_contain(s.body, gast.Break, stop_at_loops=True)
        has_cont = stmts_contain(s.body, gast.Continue, stop_at_loops=True)
        has_ret = self.flags.ret is not None and stmts_contain(s.body, gast.Return)
        leaks = self._var_used_outside(s, var_src) or assigns(s.body, var_src)
        brk = self.namer.fresh("_brk")
        cont = self.namer.fresh("_cont")
        # freeze the bounds: Python evaluates them once
        bounds = []
        for b in (start, stop, step):
            if isinstance(b, Var):
                t = self.tmp()
                self.emit(Assign(t, "copy", (b,), loc))
                b = Var(t)
            bounds.append(b)
        start, stop, step = bounds
        var = self.name(var_src)
        if not (has_brk or has_ret or leaks):
            body = []
            self.loops.append(Loop(brk, cont))
            saved_vars = self._for_vars
            self._for_vars = saved_vars + (var_src,)
            try:
                if has_cont:
                    body.append(Assign(cont, "copy", (Const(False),), loc))
                self.lower_block(s.body, body)
            finally:
                self.loops.pop()
                self._for_vars = saved_vars
            self.emit(For(var, start, stop, step, body, loc, parallel=kind.op == "prange"))
            return
        # while form: an explicit counter, the user's variable assigned from it each trip
        counter = self.namer.fresh("_" + var_src + "_next")
        self.emit(Assign(counter, "copy", (start,), loc))
        if has_brk:
            self.emit(Assign(brk, "copy", (Const(False),), loc))
        test_body = []
        saved = self.out
        self.out = test_body
        test = self.tmp()
        stops = ([brk] if has_brk else []) + ([self.flags.ret] if has_ret else [])
        if stops:
            g = self.not_any(stops, s)
            inner = []
            self.emit(If(g, inner, [Assign(test, "copy", (Const(False),), loc)], loc))
            inner.append(Assign(test, "range_cont", (Var(counter), stop, step), loc))
        else:
            self.emit(Assign(test, "range_cont", (Var(counter), stop, step), loc))
        self.out = saved
        body = [Assign(var, "copy", (Var(counter),), loc),
                Assign(counter, "add", (Var(counter), step), loc)]
        self.emit_loop_body(s, body, test_body, test, brk, cont, has_cont, loc)

    def _var_used_outside(self, loop, name):
        """Is the loop variable read where this loop's binding may reach it?  Reads inside
        another (non-enclosing) ``for`` over the same name see that loop's own binding, so the
        common reuse of ``i``/``j`` in consecutive loops keeps both loops in ``range`` form."""
        inside = {id(n) for n in gast.walk(loop)}
        other = set()
        for n in gast.walk(self.src.node):
            if isinstance(n, gast.For) and n is not loop and isinstance(n.target, gast.Name) \
                    and n.target.id == name and id(loop) not in {id(m) for m in gast.walk(n)}:
                other |= {id(m) for m in gast.walk(n)}
        for n in gast.walk(self.src.node):
            if isinstance(n, gast.Name) and n.id == name and id(n) not in inside and id(n) not in other:
                if isinstance(n.ctx, gast.Load):
                    return True
        return False

    # ------------------------------------------------------------------ inlining
