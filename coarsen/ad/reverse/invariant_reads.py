"""Invariant reads: what a loop reads from memory that no trip changes is read once, before it.

GMM's triangular reverse loop recomputed ``x[i, j] - means[k, j]`` at every trip ``l``, and
its forward loop ``x[i, j]`` and ``means[k, j]``: Numba (LLVM) may not move those loads out
of the loop, because the loop stores into other arrays (``qx``, the adjoints) that, for all
it knows, share memory with ``x`` and ``means``.  The compiler knows better: an array
allocated in the function and only indexed element by element shares memory with nothing.
GMM's gradient spent about a tenth of its time on those loads.

Requires: the generated function's top-level statements (gast), the names the compiler made
and the tape names (``tapes``: the float and int tapes, which scratch arrays are views of).
Guarantees: ``invariant_reads(body, made, tapes)`` returns the statements (a new list; the
input is not modified: a rewritten loop and the statements holding it are new nodes), in
which, for each loop ``for v in range(...)`` (pure bounds, step 1 or -1, no ``return``, no
call but ``math`` functions, the pure builtins and helpers of ``loop_order.PURE_CALLS``
and the exceptions of ``raise`` statements),
each statement ``t = e`` at the top level of its body is moved before the loop, under
``if <the loop runs at least once>:`` (or into the ``if`` of ``invariant_sums`` that already
tests that), when

* ``e`` reads an array element (or its operands are statements moved before it) and is
  pure: names, constants, arithmetic, comparisons, element reads with such indices,
  ``.shape``, the calls above;
* no name ``e`` reads is assigned in the loop (but by statements moved before it);
* no array ``e`` reads is stored into in the loop, and every array the loop stores into is
  one no other name reaches (``invariant_sums.no_alias``), a tape, or a scratch array (bound
  by ``scratch``'s helpers and by nothing else, and never bound to another name: a view of
  the float tape only); where the loop stores into a tape or a scratch array, ``e`` reads no
  array bound by a tuple assignment (the tapes and their views);
* ``t`` is assigned nowhere else in the loop and not read in the trip before it (so every
  read of ``t`` in the loop sees this trip's value, the same in every trip);
* no statement before it in the body raises with a test that reads an array ``e`` reads (the
  checks of ``e``'s reads are not in the loop, so they ran before it).

Then ``e`` has the same value in every trip, and it is computed when the loop runs at least
once, as before: the results are the same, bit for bit.  Inner loops are rewritten first.

A part of a statement's value that meets the conditions on ``e`` (softmax's reverse loop
``e_bar[i, j] = g * (1.0 / t[i])``: a division and a read each trip, LLVM moving neither) is
first assigned to a new name (``_inv<k>``) just before the statement, one name for each
distinct part of the loop, and moves with it.  Parts under a conditional expression or
``and``/``or`` stay (they are evaluated on one path only); a whole value that is invariant
moves as its statement.  Softmax's gradient: the same bits, about 15% faster.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import FreshNames, index_elts, plain_range, runs_test
from ...codegen.gast_queries import names_read, substitute
from .invariant_sums import no_alias
from .loop_order import pure_call
from .scratch import SCRATCH_HELPERS

__all__ = ["invariant_reads", "pure_read"]

_PURE = (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Compare, gast.Subscript,
         gast.Tuple, gast.Call, gast.Attribute, gast.Load, gast.operator, gast.unaryop,
         gast.cmpop, gast.expr_context)

#: the comment of the first statement moved before a loop
HOISTED = "read once: no trip of the loop below changes it"


def _call_ok(call):
    return not call.keywords and pure_call(call)


def pure_read(e):
    """Is the expression ``e`` made of names, constants, arithmetic, comparisons, element reads
    of names, ``.shape`` and ``math``'s functions only (its calls checked by the caller: those
    of ``loop_order.pure_call``)?"""
    for n in gast.walk(e):
        if not isinstance(n, _PURE):
            return False
        # (no impure call can be here: ``loop`` leaves alone a loop that makes one outside a
        # ``raise`` statement, and ``e`` is the value of an assignment in the loop's body)
        assert not isinstance(n, gast.Call) or _call_ok(n), "an impure call in the loop"
        if isinstance(n, gast.Attribute) and not (
                n.attr == "shape" or (isinstance(n.value, gast.Name) and n.value.id == "math")):
            return False
        if isinstance(n, gast.Subscript) and not isinstance(n.value, gast.Name):
            return False
    return True


def _arrays(e):
    return {n.value.id for n in gast.walk(e)
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)}


def _reads(node):
    return names_read([node])


def _whole(e):
    """The names ``e`` reads whole: not as the array of ``X[...]`` or of ``X.shape``
    (``pure_read`` allows no other attribute but ``math``'s functions)."""
    based = {id(n.value) for n in gast.walk(e) if isinstance(n, (gast.Subscript, gast.Attribute))}
    return {n.id for n in gast.walk(e) if isinstance(n, gast.Name) and id(n) not in based}


def _stores(node):
    return [n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)]


def _scratch_views(body):
    """The scratch arrays: names every binding of which is the second of three targets of a
    ``scratch.SCRATCH_HELPERS`` call (or a conditional expression choosing between two): views
    of the float tape, which reach no memory but the tape's."""
    def scratch_call(v):
        if isinstance(v, gast.IfExp):
            return scratch_call(v.body) and scratch_call(v.orelse)
        return isinstance(v, gast.Call) and isinstance(v.func, gast.Name) and v.func.id in SCRATCH_HELPERS

    binds, views = {}, {}
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                binds[n.id] = binds.get(n.id, 0) + 1
            if isinstance(n, gast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], gast.Tuple) \
                    and len(n.targets[0].elts) == 3 and isinstance(n.targets[0].elts[1], gast.Name) \
                    and scratch_call(n.value):
                name = n.targets[0].elts[1].id
                views[name] = views.get(name, 0) + 1
    # a view bound to another name (``V = X``, ``V = X[0]`` of a matrix, ``V = f(X)``) would
    # reach the tape too: in an assigned value a view is read only as ``X.shape`` or as an
    # element, indexed without slices by as many indices as the stores into it have
    ranks = {}
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) and isinstance(n.value, gast.Name):
                ranks.setdefault(n.value.id, set()).add(len(index_elts(n.slice)))
    leaked = set()
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Assign) and not scratch_call(n.value):
                based = {id(x.value) for x in gast.walk(n.value)
                         if (isinstance(x, gast.Subscript) and isinstance(x.value, gast.Name)
                             and ranks.get(x.value.id) == {len(index_elts(x.slice))}
                             and not any(isinstance(i, gast.Slice) for i in gast.walk(x.slice)))
                         or (isinstance(x, gast.Attribute) and x.attr == "shape")}
                leaked |= {x.id for x in gast.walk(n.value)
                           if isinstance(x, gast.Name) and id(x) not in based}
    return frozenset(n for n, k in views.items() if binds.get(n) == k and n not in leaked)


class _Rewriter:
    def __init__(self, body, tapes):
        self.top, self.tapes = body, frozenset(tapes)
        self.fresh = FreshNames(body, "_inv")
        self.unaliased = {}
        # names bound by a tuple assignment (``_ftape, X, _wtop = _scratch_zeros(...)``)
        self.tuple_bound = {n.id for st in body for n in gast.walk(st)
                            if isinstance(n, gast.Assign) for t in n.targets
                            if isinstance(t, gast.Tuple) for n in t.elts if isinstance(n, gast.Name)}
        self.scratch = _scratch_views(body)

    def no_alias(self, x):
        if x not in self.unaliased:
            self.unaliased[x] = no_alias(self.top, x)
        return self.unaliased[x]

    def block(self, stmts, guard=None):
        """The statements rewritten (copy on write); ``guard``: the test of the ``if`` the
        statements are the body of."""
        out = []
        for st in stmts:
            if isinstance(st, (gast.For, gast.While, gast.If)):
                inner = gast.dump(st.test) if isinstance(st, gast.If) else None
                body, orelse = self.block(st.body, inner), self.block(st.orelse)
                if len(body) != len(st.body) or len(orelse) != len(st.orelse) or \
                        any(a is not b for a, b in zip(body + orelse, st.body + st.orelse)):
                    st = copy.copy(st)
                    st.body, st.orelse = body, orelse
            out.extend(self.loop(st, guard) if isinstance(st, gast.For) else [st])
        return out

    def loop(self, loop, guard):
        runs = runs_test(loop)
        if runs is None or not plain_range(loop):
            return [loop]
        nodes = list(gast.walk(loop))
        if any(isinstance(n, (gast.Return, gast.Break, gast.Continue, gast.Lambda, gast.NamedExpr))
               for n in nodes):
            return [loop]
        raised = {id(n) for r in nodes if isinstance(r, gast.Raise) for n in gast.walk(r)}
        if any(isinstance(n, gast.Call) and not _call_ok(n) and id(n) not in raised for n in nodes):
            return [loop]
        stored = set()
        for n in nodes:
            if isinstance(n, (gast.Assign, gast.AugAssign)):
                for t in (n.targets if isinstance(n, gast.Assign) else [n.target]):
                    if isinstance(t, gast.Subscript):
                        if not isinstance(t.value, gast.Name):
                            return [loop]
                        stored.add(t.value.id)
                    elif not isinstance(t, gast.Name):
                        return [loop]
        if not all(a in self.tapes or a in self.scratch or self.no_alias(a) for a in stored):
            return [loop]
        counts = {}
        for name in _stores(loop):
            counts[name] = counts.get(name, 0) + 1
        assigned = set(counts)
        tape_stores = bool(stored & (self.tapes | self.scratch))
        body = self.parts(loop.body, assigned, counts, stored, tape_stores)
        hoisted, kept, moved = [], [], set()
        pending = None          # the comment of a moved statement, for the next kept one
        for k, st in enumerate(body):
            if self.invariant(st, body[:k], assigned - moved, counts, stored, tape_stores,
                              moved):
                st = copy.copy(st)
                text = getattr(st, "coarsen_comment", None)
                if text:
                    del st.coarsen_comment
                    pending = text if pending is None else pending + "\n" + text
                hoisted.append(st)
                moved.add(st.targets[0].id)
            else:
                if pending is not None:
                    st = copy.copy(st)
                    own = getattr(st, "coarsen_comment", None)
                    st.coarsen_comment = pending + ("\n" + own if own else "")
                    pending = None
                kept.append(st)
        if not hoisted or not kept:
            return [loop]
        hoisted[0].coarsen_comment = HOISTED if pending is None else pending + "\n" + HOISTED
        loop = copy.copy(loop)
        loop.body = kept
        if guard is not None and guard == gast.dump(runs):
            return hoisted + [loop]
        return [gast.If(test=runs, body=hoisted + [loop], orelse=[])]

    def parts(self, body, assigned, counts, stored, tape_stores):
        """``body`` with each invariant part of a statement's value (``1.0 / t[i]`` in
        ``x_bar[i, j] = g * (1.0 / t[i])``: an element read, or arithmetic on element reads
        and names the loop does not assign) assigned to a new name just before the statement,
        where ``invariant`` would move that assignment; ``counts`` gets the new names.  The
        parts of a whole value that is invariant are left (the statement moves), and so are
        those under a conditional expression or ``and``/``or`` (evaluated only on one path)."""
        out, names = [], {}
        for st in body:
            if not isinstance(st, (gast.Assign, gast.AugAssign)) or \
                    (isinstance(st, gast.Assign) and len(st.targets) == 1 and
                     isinstance(st.targets[0], gast.Name) and self.hoistable(st.value, assigned, stored, tape_stores)):
                out.append(st)
                continue
            made = []

            def replace(node):
                if isinstance(node, (gast.IfExp, gast.BoolOp)):
                    return node         # (not entered: evaluated only on one path)
                if isinstance(node, gast.expr) and not isinstance(node, (gast.Name, gast.Constant)) \
                        and self.hoistable(node, assigned, stored, tape_stores):
                    key = gast.dump(node)
                    if key not in names:
                        name = self.fresh()
                        new = gast.Assign(targets=[gast.Name(id=name, ctx=gast.Store(), annotation=None,
                                                             type_comment=None)],
                                          value=copy.deepcopy(node), type_comment=None)
                        if not self.invariant(new, out + made, assigned, {name: 1}, stored,
                                              tape_stores, set()):
                            return None
                        names[key] = name
                        counts[name] = 1
                        made.append(new)
                    return gast.Name(id=names[key], ctx=gast.Load(), annotation=None, type_comment=None)
                return None

            value = substitute(copy.deepcopy(st.value), replace)
            if made:
                st = copy.copy(st)
                st.value = value
                out.extend(made)
            out.append(st)
        return out

    def hoistable(self, e, assigned, stored, tape_stores):
        """Is the expression ``e`` pure, an element read or arithmetic on some, reading no
        name the loop assigns and no array it stores into?"""
        if not pure_read(e) or not _arrays(e):
            return False
        read = _arrays(e) | _whole(e)
        return not (_reads(e) & assigned or read & stored or
                    (tape_stores and read & self.tuple_bound))

    def invariant(self, st, before, assigned, counts, stored, tape_stores, moved):
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1 and
                isinstance(st.targets[0], gast.Name)):
            return False
        t, e = st.targets[0].id, st.value
        if counts.get(t) != 1 or not pure_read(e):
            return False
        arrays = _arrays(e)
        if not arrays and not (_reads(e) & moved):
            return False                # scalar arithmetic: LLVM moves it itself
        # (an array read whole, ``Y[j] + P``, is read as much as one read element by element)
        read = arrays | _whole(e)
        if _reads(e) & assigned or t in _reads(e) or read & stored:
            return False
        if tape_stores and read & self.tuple_bound:
            return False
        for prev in before:
            if t in _reads(prev):
                return False
            for n in gast.walk(prev):
                if isinstance(n, gast.If) and any(isinstance(x, gast.Raise) for x in n.body) \
                        and _reads(n.test) & arrays:
                    return False
        return True


def invariant_reads(body, made, tapes):
    """See the module docstring; ``made`` is accepted for the passes' common signature."""
    out = list(body)
    return _Rewriter(out, tapes).block(out)
