"""A transposed matrix times a vector, ``A.T @ v``, becomes ``v @ A``.

``(A.T @ v)[i] = sum_p A[p, i] v[p] = (v @ A)[i]``: the same products, summed over the same
index.  As ``v @ A`` the product reads ``A`` in its own layout, and the reverse sweep's matrix
adjoint is ``A_bar += outer(v, y_bar)``, one pass in place (``_outer_add``), where ``A.T @ v``
built ``outer(y_bar, v)`` as a new matrix and then added its transpose to ``A_bar`` (a strided
pass: four times the time on a 420 x 380 matrix).

Requires: a typed ``ir.Function`` (``coarsen.ir.typeinfer.infer`` has run), on the cpu target,
after scalarization (a product whose tree computes something is a loop nest by then).
Guarantees: ``transposed_products(fn)`` returns a new ``Function`` (``fn`` is not modified).
A statement ``y = matmul(t, v)`` or ``y = dot(t, v)`` becomes ``y = matmul(v, A)`` (``dot``
stays ``dot``) when

* ``t = transpose(A)`` (no ``axes``: a 2-D ``A`` reversed) is an earlier statement of the same
  block, ``t`` a compiler temporary assigned there only and read by this product only;
* ``v`` is a 1-D array and ``y`` 1-D;
* no statement between them assigns ``A`` (a view reads the array at the product either way;
  only a rebinding of the name would part them).

The transpose statement goes (``t`` leaves ``fn.views``).  The values are the same sums of
the same products; their rounding is that of the product's kernel (BLAS or the loop), as for any
``@``.  Everything else is left as it was.
"""
from __future__ import annotations

import copy
from dataclasses import replace

from .nodes import Array, Assign, For, If, Var, While, assigned, keep_records, uses, walk

__all__ = ["transposed_products"]


def _reads(fn):
    """How many times each variable is read in ``fn``."""
    count = {}
    for st in walk(fn.body):
        for u in uses(st):
            if isinstance(u, Var):
                count[u.name] = count.get(u.name, 0) + 1
    return count


def _defs(fn):
    count = {}
    for st in walk(fn.body):
        if isinstance(st, Assign):
            count[st.target] = count.get(st.target, 0) + 1
        elif isinstance(st, For):
            count[st.var] = count.get(st.var, 0) + 1
    return count


class _Rewriter:
    def __init__(self, fn):
        self.fn = fn
        self.reads = _reads(fn)
        self.defs = _defs(fn)
        self.dropped = set()

    def rank(self, operand):
        t = self.fn.types.get(operand.name) if isinstance(operand, Var) else None
        return t.ndim if isinstance(t, Array) else None

    def transpose_of(self, stmts, k, name):
        """``(position, A)`` of ``name = transpose(A)`` earlier in ``stmts`` (before ``k``)
        that qualifies, else None."""
        if name not in self.fn.temps or self.defs.get(name) != 1 or self.reads.get(name) != 1:
            return None
        for j in range(k - 1, -1, -1):
            s = stmts[j]
            if isinstance(s, Assign) and s.target == name:
                if s.op != "transpose" or s.attrs or len(s.args) != 1 \
                        or not isinstance(s.args[0], Var) or self.rank(s.args[0]) != 2:
                    return None
                base = s.args[0].name
                if any(base in assigned([b]) for b in stmts[j + 1:k]):
                    return None
                return j, base
        return None

    def block(self, stmts):
        out = list(stmts)
        for k, st in enumerate(stmts):
            if isinstance(st, If):          # (statements of the caller's deep copy)
                st.body, st.orelse = self.block(st.body), self.block(st.orelse)
            elif isinstance(st, For):
                st.body = self.block(st.body)
            elif isinstance(st, While):
                st.test_body, st.body = self.block(st.test_body), self.block(st.body)
            elif isinstance(st, Assign) and st.op in ("matmul", "dot") and len(st.args) == 2 \
                    and not st.attrs and isinstance(st.args[0], Var) \
                    and self.rank(st.args[0]) == 2 and self.rank(st.args[1]) == 1 \
                    and isinstance(self.fn.types.get(st.target), Array) \
                    and self.fn.types[st.target].ndim == 1:
                found = self.transpose_of(stmts, k, st.args[0].name)
                if found is None:
                    continue
                j, base = found
                out[k] = replace(st, args=(st.args[1], Var(base)))
                out[j] = None
                self.dropped.add(st.args[0].name)
        return [s for s in out if s is not None]


def transposed_products(fn):
    rw = _Rewriter(fn)
    body = rw.block(copy.deepcopy(fn.body))
    if not rw.dropped:
        return fn
    views = {v: b for v, b in fn.views.items() if v not in rw.dropped}
    return keep_records(replace(fn, body=body, types=dict(fn.types), views=views), fn)
