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
  one no other name reaches (``invariant_sums.no_alias``) or a tape; where the loop stores
  into a tape, ``e`` reads no array bound by a tuple assignment (scratch arrays are views of
  the float tape);
* ``t`` is assigned nowhere else in the loop and not read in the trip before it (so every
  read of ``t`` in the loop sees this trip's value, the same in every trip);
* no statement before it in the body raises with a test that reads an array ``e`` reads (the
  checks of ``e``'s reads are not in the loop, so they ran before it).

Then ``e`` has the same value in every trip, and it is computed when the loop runs at least
once, as before: the results are the same, bit for bit.  Inner loops are rewritten first.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import plain_range, runs_test
from ...codegen.gast_queries import names_read
from .invariant_sums import no_alias
from .loop_order import pure_call

__all__ = ["invariant_reads"]

_PURE = (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Compare, gast.Subscript,
         gast.Tuple, gast.Call, gast.Attribute, gast.Load, gast.operator, gast.unaryop,
         gast.cmpop, gast.expr_context)

#: the comment of the first statement moved before a loop
HOISTED = "read once: no trip of the loop below changes it"


def _call_ok(call):
    return not call.keywords and pure_call(call)


def _pure(e):
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
    (``_pure`` allows no other attribute but ``math``'s functions)."""
    based = {id(n.value) for n in gast.walk(e) if isinstance(n, (gast.Subscript, gast.Attribute))}
    return {n.id for n in gast.walk(e) if isinstance(n, gast.Name) and id(n) not in based}


def _stores(node):
    return [n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)]


class _Rewriter:
    def __init__(self, body, tapes):
        self.top, self.tapes = body, frozenset(tapes)
        self.unaliased = {}
        # names bound by a tuple assignment (``_ftape, X, _wtop = _scratch_zeros(...)``)
        self.tuple_bound = {n.id for st in body for n in gast.walk(st)
                            if isinstance(n, gast.Assign) for t in n.targets
                            if isinstance(t, gast.Tuple) for n in t.elts if isinstance(n, gast.Name)}

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
        if not all(a in self.tapes or self.no_alias(a) for a in stored):
            return [loop]
        counts = {}
        for name in _stores(loop):
            counts[name] = counts.get(name, 0) + 1
        assigned = set(counts)
        tape_stores = bool(stored & self.tapes)
        hoisted, kept, moved = [], [], set()
        pending = None          # the comment of a moved statement, for the next kept one
        for k, st in enumerate(loop.body):
            if self.invariant(st, loop.body[:k], assigned - moved, counts, stored, tape_stores,
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

    def invariant(self, st, before, assigned, counts, stored, tape_stores, moved):
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1 and
                isinstance(st.targets[0], gast.Name)):
            return False
        t, e = st.targets[0].id, st.value
        if counts.get(t) != 1 or not _pure(e):
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
