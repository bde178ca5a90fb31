"""Invariant sums: an element a loop only adds into is held in a local for the loop's trips.

In the reverse sweep an inner loop often adds into one element of an adjoint at every trip,
at an index the loop does not change: GMM's triangular reverse adds
``_acc8[k, j] += _t17_bar`` for every ``l``.  Numba cannot keep that element in a register
(the store may alias the loop's other arrays), so every trip waits for the last trip's store
to reach memory and be loaded again.  GMM's gradient spent about a tenth of its time there.

Requires: the generated function's top-level statements (gast) and the names the compiler
made (``made``).
Guarantees: ``invariant_sums(body, made)`` returns the statements (a new list; the input is
not modified: a rewritten loop and the statements holding it are new nodes) with each loop ``for v in range(...)`` (start, stop and step pure: names,
constants, arithmetic, ``.shape``, ``max``/``min``; step 1 or -1) rewritten, for every
statement ``X[i] += e`` (or ``-=``) at the top level of its body such that

* ``X`` is a compiler-made array that appears in the function only allocated fresh
  (``np.zeros``/``np.empty``), indexed without slices, updated as a whole (``X += ...``), as
  an operand of arithmetic, for its ``.shape`` or in a ``return`` (``no_alias``: no other
  name reaches its elements), and the loop holds no ``return``,
* the index ``i`` is pure (names, constants, arithmetic) and reads no name the loop assigns,
* ``X`` appears in the loop only as the target of such top-level ``+=``/``-=`` statements,
  and every other index there provably names another element during the loop (``_apart``:
  at some axis the same name plus different constants, as ``X[i, 0]`` and ``X[i, 1]``; or the
  loop's variable kept away by the loop's bounds, as ``X[j, 0]`` for ``j`` in
  ``range(i + 1, n)`` against ``X[i, 0]``: Lennard-Jones' pair loop; either way with indices
  known not negative there, since ``X[-1]`` is ``X[0]`` on a one-element axis),

as ``if <the loop runs at least once>: s = X[i]; for ...: ... s += e ...; X[i] = s`` with a
fresh local ``s`` per element (statements with the same index share it).  The loop adds the
same terms to the same starting value in the same order, so the result is the same, bit for
bit, and the element is touched only where the loop has trips (where it had none, the index
may be out of range).  Inner loops are rewritten first.
"""
from __future__ import annotations

import copy

import gast

from .cleanup import (FreshNames, affine, elementwise_uses, index_elts, int_value, nonnegative_names, pure_index,
                      runs_test, same_side)

__all__ = ["invariant_sums", "no_alias"]

def _name(id_, store=False):
    return gast.Name(id=id_, ctx=gast.Store() if store else gast.Load(), annotation=None,
                     type_comment=None)


class _Rewriter:
    def __init__(self, body, made):
        self.top, self.made = body, made
        self.fresh = FreshNames(body, "_sum")
        # no_alias per array, walked once: a rewrite only adds element loads and stores
        self.unaliased = {}
        self.nonneg = nonnegative_names(body)

    def no_alias(self, x):
        if x not in self.unaliased:
            self.unaliased[x] = no_alias(self.top, x)
        return self.unaliased[x]

    def block(self, stmts):
        """The statements rewritten; a statement that changes is a new node (copy on write:
        the input is shared where nothing changes, never modified)."""
        out = []
        for st in stmts:
            if isinstance(st, (gast.For, gast.While, gast.If)):
                body, orelse = self.block(st.body), self.block(st.orelse)
                # ``loop`` gives one statement for one: the blocks keep their lengths
                assert len(body) == len(st.body) and len(orelse) == len(st.orelse)
                if any(a is not b for a, b in zip(body + orelse, st.body + st.orelse)):
                    st = copy.copy(st)
                    st.body, st.orelse = body, orelse
            out.extend(self.loop(st) if isinstance(st, gast.For) else [st])
        return out

    def candidates(self, loop):
        """The loop's invariant elements: ``[(element, [statement positions])]``."""
        names = {}
        for n in gast.walk(loop):
            if isinstance(n, gast.Name):
                names[n.id] = names.get(n.id, 0) + 1
        assigned = {n.id for n in gast.walk(loop)
                    if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        adds = {}
        for k, st in enumerate(loop.body):
            if isinstance(st, gast.AugAssign) and isinstance(st.op, (gast.Add, gast.Sub)) \
                    and isinstance(st.target, gast.Subscript) \
                    and isinstance(st.target.value, gast.Name):
                adds.setdefault(st.target.value.id, []).append(k)
        out = []
        for x, ks in adds.items():
            # every mention of x in the loop is one of these statements' targets
            if x not in self.made or names.get(x) != len(ks) or not self.no_alias(x):
                continue
            inv, var = {}, []
            for k in ks:
                idx = loop.body[k].target.slice
                if pure_index(idx) and not _names(idx) & assigned:
                    inv.setdefault(gast.dump(idx), (loop.body[k].target, []))[1].append(k)
                else:
                    var.append(loop.body[k].target.slice)
            elements = list(inv.values())
            # an element held in a local meets no other access of x in the loop
            ok = all(_apart(a.slice, b.slice, None, assigned, self.nonneg)
                     for n, (a, _) in enumerate(elements) for b, _ in elements[n + 1:])
            ok = ok and all(_apart(a.slice, v, loop, assigned, self.nonneg)
                            for a, _ in elements for v in var)
            if ok:
                out.extend(elements)
        return out

    def loop(self, loop):
        runs = runs_test(loop)
        if runs is None or any(isinstance(n, gast.Return) for n in gast.walk(loop)):
            return [loop]
        picked = self.candidates(loop)
        if not picked:
            return [loop]
        loop = copy.copy(loop)
        loop.body = list(loop.body)
        before, after = [], []
        for element, ks in picked:
            s = self.fresh()
            before.append(gast.Assign(targets=[_name(s, True)], value=_load(element), type_comment=None))
            after.append(gast.Assign(targets=[_store(element)], value=_name(s), type_comment=None))
            for k in ks:
                st = loop.body[k]
                loop.body[k] = gast.AugAssign(target=_name(s, True), op=st.op,
                                              value=copy.deepcopy(st.value))
                for attr in ("coarsen_comment", "_coarsen_loc"):
                    if hasattr(st, attr):
                        setattr(loop.body[k], attr, getattr(st, attr))
        return [gast.If(test=runs, body=before + [loop] + after, orelse=[])]


def _names(node):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}


def _apart(inv, other, loop, assigned, nonneg=frozenset()):
    """Do the index ``inv`` (the loop does not change it) and ``other`` never name the same
    element during ``loop``?  At some axis both are one name the loop does not assign (or
    none) plus different constants; or (``loop`` given) ``other`` is the loop's variable plus
    ``q`` and the loop's bounds keep it away from ``inv``'s ``a + p`` (``range(a + c, ...)``
    with ``c + q > p``; ``range(..., a + c, -1)``, whose trips are above ``a + c``).  Either
    way both indices must be known not negative at that axis (constants >= 0, or a name of
    ``nonneg`` plus an offset >= 0), or both negative constants: Python reads a negative
    index from the end, so ``X[-1]`` and ``X[0]`` are one element of a one-element axis, and
    ``X[i - 1]`` at ``i = 0`` is ``X[n - 1]`` (fuzz seed 80000137)."""
    a_elts, b_elts = index_elts(inv), index_elts(other)
    if len(a_elts) != len(b_elts):
        return False

    for a, b in zip(a_elts, b_elts):
        fa, fb = affine(a), affine(b)
        if fa is None or fb is None:
            continue
        if fa[0] == fb[0] and fa[1] != fb[1] and fa[0] not in assigned and \
                same_side(fa, fb, nonneg):
            return True
        if loop is not None and fb[0] == loop.target.id and fa[0] is not None \
                and fa[0] not in assigned and same_side(fa, fa, nonneg):
            low = _lowest(loop)
            if low is not None and low[0] == fa[0] and low[1] + fb[1] > fa[1]:
                return True
    return False


def _lowest(loop):
    """``(name, c)``: the loop's variable is at least ``name + c`` in every trip, or None."""
    args = loop.iter.args
    if len(args) == 1:
        return None
    step = 1 if len(args) == 2 else int_value(args[2])
    if step == 1:
        return affine(args[0])
    low = affine(args[1])              # range(a, b, -1): every trip is above b
    return None if low is None else (low[0], low[1] + 1)


def no_alias(body, name, returned=True, added=False):
    """Does no other name reach the elements of ``name`` (the module docstring's uses only;
    allocated in ``body``, so not a parameter that may share memory with another)?
    ``returned=False``: not in a ``return`` either; ``added``: read whole as the value of
    ``x += name`` too (a read that binds nothing)."""
    allowed, allocated = elementwise_uses(body, name)
    for st in body:
        for n in gast.walk(st):
            if added and isinstance(n, gast.AugAssign) and isinstance(n.value, gast.Name) \
                    and n.value.id == name:
                allowed.add(id(n.value))
            if isinstance(n, gast.BinOp):
                for side in (n.left, n.right):
                    if isinstance(side, gast.Name) and side.id == name:
                        allowed.add(id(side))
            elif isinstance(n, gast.UnaryOp) and isinstance(n.operand, gast.Name) and \
                    n.operand.id == name:
                allowed.add(id(n.operand))
            elif returned and isinstance(n, gast.Return) and n.value is not None:
                # returned (the function ends: ``invariant_sums`` skips loops that return)
                for x in gast.walk(n.value):
                    if isinstance(x, gast.Name) and x.id == name:
                        allowed.add(id(x))
            elif isinstance(n, gast.Attribute) and n.attr == "shape" and \
                    isinstance(n.value, gast.Name) and n.value.id == name:
                allowed.add(id(n.value))
    return allocated and all(id(n) in allowed for st in body for n in gast.walk(st)
                             if isinstance(n, gast.Name) and n.id == name)


def _load(subscript):
    return _with_ctx(subscript, gast.Load())


def _store(subscript):
    return _with_ctx(subscript, gast.Store())


def _with_ctx(subscript, ctx):
    out = copy.deepcopy(subscript)
    out.ctx = ctx
    return out


def invariant_sums(body, made):
    out = list(body)
    return _Rewriter(out, made).block(out)
