"""Loop-invariant transcendental calls hoisted out of an outer loop into a table.

GMM evaluates ``math.exp(icf[k, j])`` for every data point ``i``, although it depends on ``k``
and ``j`` only: ``n`` times the ``K * d`` exponentials it needs.  Hand-written gradients hoist
them (``Qd = np.exp(icf[:, :d])``); this pass does the same for any such call, before AD, so
that both sweeps read the table (and the reverse sweep needs neither the call again nor a tape
of its result).

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer.infer`` has run), on the cpu target
(Numba's math raises nothing; the table is filled before the loop runs).
Guarantees: ``hoist_invariant_calls(fn)`` returns a new ``Function`` (``fn`` is not modified).
A statement ``t = f(a)`` (``f`` a ``hoistable`` op: a unary element-wise primitive whose cost in
the registry is a square root or dearer, ``CostClass`` ``SQRT``, ``EXP``, ``TRIG`` or ``POW``;
``t`` and ``a`` float scalars) is hoisted out of a ``for`` loop ``L`` when

* ``a = A[...]`` is assigned in the same block before it, ``A`` a float64 array that nothing in
  ``L`` assigns or stores into (nor any view of it), its index items constants and the loop
  variables of ``for`` loops between ``L`` and the statement, each used once;
* every block from ``L``'s body down to the statement is a ``for`` loop's body (no ``if``, no
  ``while``: the statement runs in every trip of those loops), and those loops whose variables
  the index uses run over ``range(c, stop)`` with ``c`` a constant ``>= 0``, step 1 and ``stop``
  the same in every trip of ``L`` (a constant, a variable ``L`` never assigns, or one ``L``
  assigns only as a copy of such a value).

Before ``L`` the table ``T = empty((stop, ...))`` is filled by a nest of the same ranges with
``T[v, ...] = f(A[v, ...])``, and the statement becomes ``t = T[v, ...]``: the same values (the
same call on the same element), once per element instead of once per trip of ``L``.  The
table's elements are those the loops index, so its size is at most ``A``'s.  The new names are
compiler temporaries (``fn.temps``), its loop indices in range by construction
(``fn.in_range``).  Loops are tried outermost first, so a call is hoisted out of the
outermost loop it does not depend on.  Nothing is hoisted out of a ``prange`` loop (its trips are reversed in
parallel blocks, whose sums must not change with the target: ``coarsen.ad.reverse.parallel``).
"""
from __future__ import annotations

import copy
from dataclasses import replace

from .nodes import (Array, Assign, Const, For, I64, If, Scalar, Store, Var, While,
                    keep_records, walk)
from .primitives import REGISTRY, CostClass

__all__ = ["hoistable", "hoist_invariant_calls"]

#: the cost classes of a call worth a table (transcendental, or a square root)
DEAR = frozenset({CostClass.SQRT, CostClass.EXP, CostClass.TRIG, CostClass.POW})
F64 = Scalar("f64")


def hoistable(op: str) -> bool:
    """Whether a call of ``op`` is worth a table: a pure unary element-wise primitive whose
    cost is ``DEAR`` (``exp``, ``sqrt``, ``sin``, ``lgamma``...)."""
    prim = REGISTRY.get(op)
    return prim is not None and prim.elementwise and prim.arity == 1 and \
        any(c in DEAR for c in prim.cost)


def hoist_invariant_calls(fn):
    return _Hoister(fn).run()


class _Hoister:
    def __init__(self, fn):
        self.fn = fn
        self.types = dict(fn.types)
        self.temps = set(fn.temps)
        self.in_range = set(fn.in_range)
        fn.names.reserve(set(fn.params) | set(fn.types))
        fn.names.reserve(st.var for st in walk(fn.body) if isinstance(st, For))
        self.counter = 0
        self.changed = False

    def new(self, prefix, t):
        name = self.fn.names.numbered(prefix, "hoist", start=self.counter + 1)
        self.counter = int(name[len(prefix):])
        self.types[name] = t
        self.temps.add(name)
        return name

    def run(self):
        body = self.block(copy.deepcopy(self.fn.body))
        if not self.changed:
            return self.fn
        return keep_records(replace(self.fn, body=body, types=self.types,
                                    temps=frozenset(self.temps), in_range=frozenset(self.in_range)),
                            self.fn)

    def block(self, stmts):
        out = []
        for st in stmts:
            if isinstance(st, For):
                if not st.parallel:
                    out += self.hoist_from(st)
                st.body = self.block(st.body)
            elif isinstance(st, If):
                st.body = self.block(st.body)
                st.orelse = self.block(st.orelse)
            elif isinstance(st, While):
                st.test_body = self.block(st.test_body)
                st.body = self.block(st.body)
            out.append(st)
        return out

    # ------------------------------------------------------------------ one loop
    def hoist_from(self, loop):
        """The tables of the calls hoisted out of ``loop`` (its statements rewritten)."""
        assigned = {s.target for s in walk(loop.body) if isinstance(s, Assign)} | \
            {s.var for s in walk(loop.body) if isinstance(s, For)} | {loop.var}
        stored = {s.array for s in walk(loop.body) if isinstance(s, Store)}
        views = self.fn.views
        counts = {}
        for s in walk(loop.body):
            if isinstance(s, Assign):
                counts[s.target] = counts.get(s.target, 0) + 1
        # per loop of the nest, the definitions that run before it in every trip of the
        # loops around it (its enclosing blocks, before it, not under an if): ``dominating``
        dominating = {}

        def invariant(op, dom, depth=0):
            """``(operand, statements)``: ``op``'s value, the same in every trip of ``loop``, as
            an operand valid before it once ``statements`` (new, to run before the loop) have
            run; or None.  A constant, a variable ``loop`` never assigns, or one it assigns
            once (``dom``: where that assignment runs before the use in every trip), as a
            copy of such a value or as a dimension of an array it never assigns."""
            if isinstance(op, Const) or op.name not in assigned:
                return op, []
            d = dom.get(op.name)
            if d is None or counts.get(op.name) != 1 or len(d.args) < 1 or depth > 8:
                return None
            inner = d.args[0]
            if d.op == "copy" and len(d.args) == 1:
                return invariant(inner, dom, depth + 1)
            if d.op == "dim" and len(d.args) == 2 and isinstance(inner, Var) and \
                    inner.name not in assigned and isinstance(d.args[1], Const):
                e = self.new("_t", I64)
                return Var(e), [Assign(e, "dim", d.args, d.loc, attrs=d.attrs)]
            return None

        def base(v):
            seen = set()
            while v in views and v not in seen:
                seen.add(v)
                v = views[v]
            return v

        def written(array):
            """Whether ``loop`` may change ``array``'s elements: it assigns or stores into
            it, or into anything that shares its base array."""
            b = base(array)
            return any(base(v) == b for v in stored | assigned)

        pre = []

        def visit(stmts, nest, dom):
            dom = dict(dom)
            defs = {}
            for k, st in enumerate(stmts):
                if isinstance(st, Assign):
                    got = self.candidate(st, defs, nest, invariant, written, dominating)
                    if got is not None:
                        new_st, table = got
                        stmts[k] = new_st
                        pre.extend(table)
                    defs[st.target] = st
                    dom[st.target] = st
                elif isinstance(st, For):
                    dominating[id(st)] = dict(dom)
                    visit(st.body, nest + [st], dom)
                    defs = {}
                else:
                    defs = {}
        visit(loop.body, [], {})
        return pre

    def candidate(self, st, defs, nest, invariant, written, dominating):
        """``(t = T[...], the table's statements)`` for a hoistable ``st``, else None."""
        types = self.types
        if not hoistable(st.op) or len(st.args) != 1 or not isinstance(st.args[0], Var) or \
                types.get(st.target) != F64:
            return None
        a = st.args[0].name
        read = defs.get(a)
        if read is None or read.op != "getitem" or types.get(a) != F64:
            return None
        # a getitem indexes an array variable (the IR has no array constants), and its element
        # is f64 (checked above) only where the array's dtype is f64
        assert isinstance(read.args[0], Var), read.args
        array = read.args[0].name
        at = types.get(array)
        if not isinstance(at, Array) or written(array):
            return None
        assert at.dtype == "f64", (array, at)
        by_var = {lp.var: lp for lp in nest}
        seen, dims, prelude = set(), [], []
        for item in read.index:
            if isinstance(item, Const) and type(item.value) is int:
                continue
            if not isinstance(item, Var) or item.name not in by_var or item.name in seen:
                return None
            lp = by_var[item.name]
            seen.add(item.name)
            if not (isinstance(lp.step, Const) and lp.step.value == 1 and
                    isinstance(lp.start, Const) and type(lp.start.value) is int and
                    lp.start.value >= 0):
                return None
            got = invariant(lp.stop, dominating[id(lp)])
            if got is None:
                return None
            stop, pre = got
            prelude += pre
            dims.append((item.name, lp.start, stop))
        if not dims:
            return None
        use, stmts = self.table(st, read, array, dims)
        return use, prelude + stmts

    def table(self, st, read, array, dims):
        loc = st.loc
        nd = len(dims)
        tab = self.new("_tab", Array("f64", nd))
        fill_vars = {v: self.new("_h", I64) for v, _, _ in dims}
        x = self.new("_t", F64)
        y = self.new("_t", F64)
        index = tuple(Var(fill_vars[it.name]) if isinstance(it, Var) else it for it in read.index)
        inner = [Assign(x, "getitem", read.args, loc, index=index, attrs=read.attrs),
                 Assign(y, st.op, (Var(x),), loc, attrs=st.attrs),
                 Store(tab, tuple(Var(fill_vars[v]) for v, _, _ in dims), Var(y), None, loc)]
        for v, start, stop in reversed(dims):
            inner = [For(fill_vars[v], start, stop, Const(1), inner, loc)]
        extents, sizes = [], []
        for v, _, stop in dims:
            if isinstance(stop, Const):
                extents.append(Const(max(int(stop.value), 0)))
            else:       # (a negative stop runs no trip; np.empty refuses it)
                e = self.new("_t", I64)
                sizes.append(Assign(e, "maximum", (stop, Const(0)), loc))
                extents.append(Var(e))
        alloc = Assign(tab, "empty", tuple(extents), loc, attrs=(("dtype", "f64"), ("ndim", nd)))
        for axis, (v, _, _) in enumerate(dims):
            self.in_range.add((tab, axis, fill_vars[v]))
            self.in_range.add((tab, axis, v))
        self.changed = True
        use = Assign(st.target, "getitem", (Var(tab),), loc,
                     index=tuple(Var(v) for v, _, _ in dims))
        return use, sizes + [alloc] + inner
