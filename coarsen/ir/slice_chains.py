"""Slice chains: a slice ``u = t[s2]`` of a slice ``t = a[s1]`` as one slice ``u = a[s3]``.

``r[:k][::-1]`` (durbin's reversed prefix) is a view of a view.  Scalarization
(``coarsen.ir.scalarize``) reads a view's elements through the array it views only where the
outer index holds integers and full slices (``scalar_index.compose_index``); otherwise the nest
reads the intermediate view, which the reverse sweep cannot read again once a loop rebinds it,
so each element read was taped, with its index.  Composed, the nest reads ``a`` itself.

Requires: a typed ``ir.Function`` (``types``, ``views``), before scalarization.
Guarantees: ``compose_slice_chains(fn)`` returns ``fn`` itself where nothing qualifies, else a
new ``Function`` (the input is not modified) in which each ``u = getitem(t; s2)`` such that

* ``t = getitem(a; s1)`` comes before it in the same block, is ``t``'s only assignment, and
  ``a`` and the names ``s1`` reads are each assigned once at most (so they hold at ``u`` what
  they held at ``t``);
* ``s1`` and ``s2`` hold slices only (no integer, new axis or Ellipsis), each with integer
  bounds (or none) and a constant nonzero integer step (or none), at most one per axis of ``a``;

is ``u = getitem(a; s3)``, preceded by the integer statements that compute ``s3``'s bounds
(``dim``, ``chain_lower``, ``chain_upper``; names of the module's supply), with ``views[u] =
a``.  On an axis where ``s2`` is the full slice ``s3`` is ``s1``'s item, where ``s1`` is,
``s2``'s; otherwise, with ``m`` the length of ``a[s1]`` along the axis, ``first1`` its first
position in ``a``, ``first2`` and ``len2`` those of ``s2`` on ``m`` elements, the composed
slice starts at ``first3 = first1 + step1 * first2`` with the step ``step1 * step2`` and ends
after ``len2`` elements (the runtime's ``_chain_lower`` and ``_chain_upper``,
``coarsen.codegen.helpers``).  A positive step is written ``first3 : first3 + step3 * len2``
(both at least 0); a negative one ``first3 - n : first3 + step3 * len2 - n`` with ``n`` the
axis' length (both below 0, so NumPy's normalization adds ``n`` and clamps at -1: a slice that
reaches index 0, or an empty one, is written without a stop of -1, which would mean the last
element).  The same elements, in the same order, of the same memory.  ``t`` is
dropped where ``u`` was its only use (a view's creation has no effect).
"""
from __future__ import annotations

import copy
from dataclasses import replace

from .nodes import Array, Assign, Const, For, I64, If, Slice, Var, While, keep_records, uses, walk

__all__ = ["compose_slice_chains"]

#: a bound past any axis, as scalarization writes an omitted one
BIG = 2 ** 62


def compose_slice_chains(fn):
    return _Chains(fn).run()


class _Chains:
    def __init__(self, fn):
        self.fn = fn
        self.types = dict(fn.types)
        self.views = dict(fn.views)
        self.temps = set(fn.temps)
        self.defs = {p: 1 for p in fn.params}      # a parameter's binding is a definition
        self.nuses = {}
        for st in walk(fn.body):
            if isinstance(st, Assign):
                self.defs[st.target] = self.defs.get(st.target, 0) + 1
            elif isinstance(st, For):
                self.defs[st.var] = self.defs.get(st.var, 0) + 1
            for u in uses(st):
                if isinstance(u, Var):
                    self.nuses[u.name] = self.nuses.get(u.name, 0) + 1
        for name in fn.live_out | {fn.result}:
            self.nuses[name] = self.nuses.get(name, 0) + 1
        fn.names.reserve(set(fn.params) | set(fn.types) | set(self.defs))
        self.changed = False

    def run(self):
        body = self.block(copy.deepcopy(self.fn.body))
        if not self.changed:
            return self.fn
        return keep_records(replace(self.fn, body=body, types=self.types, views=self.views,
                                    temps=frozenset(self.temps)), self.fn)

    def new(self):
        name = self.fn.names.numbered("_t", "slice_chains")
        self.types[name] = I64
        self.temps.add(name)
        return name

    def block(self, stmts):
        for st in stmts:
            if isinstance(st, If):
                st.body, st.orelse = self.block(st.body), self.block(st.orelse)
            elif isinstance(st, For):
                st.body = self.block(st.body)
            elif isinstance(st, While):
                st.test_body, st.body = self.block(st.test_body), self.block(st.body)
        out, where, dropped = [], {}, set()
        for pos, st in enumerate(stmts):
            inner = self.chain(stmts, pos, where)
            if inner is not None:
                t = stmts[inner]
                pre, index = self.composed(t, st)
                out.extend(pre)
                out.append(replace(st, args=(t.args[0],), index=index))
                self.views[st.target] = t.args[0].name
                self.changed = True
                if self.nuses.get(t.target, 0) == 1:
                    dropped.add(id(t))
                    self.views.pop(t.target, None)
                continue
            if isinstance(st, Assign):
                where[st.target] = pos
            out.append(st)
        return [s for s in out if id(s) not in dropped]

    def slices(self, index, ndim):
        """Whether ``index`` holds only slices with integer bounds and constant steps, at most
        one per axis."""
        for it in index:
            if not isinstance(it, Slice):
                return False
            if it.step is not None and not (isinstance(it.step, Const) and type(it.step.value) is int
                                            and it.step.value != 0):
                return False
            for part in (it.lower, it.upper):
                if part is not None and not self.is_int(part):
                    return False
        # slices alone (no new axis): typed IR has at most one per axis (and ``chain`` asks
        # of ``u``'s index only once ``t``'s holds slices alone, so ``t`` has ``a``'s rank)
        assert len(index) <= ndim, (index, ndim)
        return True

    def is_int(self, operand):
        if isinstance(operand, Const):
            return type(operand.value) is int
        return isinstance(operand, Var) and self.types.get(operand.name) == I64

    def chain(self, stmts, pos, where):
        """The position of ``t = a[s1]`` that ``stmts[pos]`` (``u = t[s2]``) composes with."""
        st = stmts[pos]
        if not (isinstance(st, Assign) and st.op == "getitem" and not st.attrs
                and len(st.args) == 1 and isinstance(st.args[0], Var)):
            return None
        t = st.args[0].name
        k = where.get(t)
        if k is None or self.defs.get(t) != 1:
            return None
        inner = stmts[k]
        if not (inner.op == "getitem" and not inner.attrs and len(inner.args) == 1
                and isinstance(inner.args[0], Var)):
            return None
        at = self.types.get(inner.args[0].name)
        if not isinstance(at, Array) or not isinstance(self.types.get(t), Array):
            return None
        if not (self.slices(inner.index, at.ndim) and self.slices(st.index, at.ndim)):
            return None
        # ``a`` and the bounds hold at ``u`` what they held at ``t``: each is assigned once at
        # most (the SSA form's versions: ``a = a * 2.0`` between the two makes ``a_2``)
        read = {inner.args[0].name} | {u.name for u in uses(inner) if isinstance(u, Var)}
        if any(self.defs.get(v, 0) > 1 for v in read):
            return None
        return k

    def composed(self, t, u):
        """``(statements, s3)``: the statements computing the composed index, and the index."""
        a = t.args[0]
        nd = self.types[a.name].ndim
        full = Slice(None, None, None)
        outer = list(t.index) + [full] * (nd - len(t.index))
        inner = list(u.index) + [full] * (nd - len(u.index))
        pre, index = [], []
        for axis, (s1, s2) in enumerate(zip(outer, inner)):
            if s2 == full:
                index.append(s1)
            elif s1 == full:
                index.append(s2)
            else:
                index.append(self.axis(pre, a, axis, s1, s2, t.loc))
        while index and index[-1] == full:
            index.pop()
        return pre, tuple(index)

    def axis(self, pre, a, axis, s1, s2, loc):
        def let(op, *args):
            name = self.new()
            pre.append(Assign(name, op, tuple(args), loc))
            return Var(name)

        step1 = s1.step.value if s1.step is not None else 1
        step2 = s2.step.value if s2.step is not None else 1
        args = (let("dim", a, Const(axis)), *_bounds(s1, step1), Const(step1),
                *_bounds(s2, step2), Const(step2))
        return Slice(let("chain_lower", *args), let("chain_upper", *args), Const(step1 * step2))


def _bounds(s, step):
    """The bounds of ``s`` with the omitted ones written as scalarization writes them."""
    lo = s.lower if s.lower is not None else Const(0 if step > 0 else BIG)
    hi = s.upper if s.upper is not None else Const(BIG if step > 0 else -BIG)
    return lo, hi
