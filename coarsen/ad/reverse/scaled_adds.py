"""Scaled adds: the reverse sweep's ``X_bar += s_bar * _acc`` and ``X_bar += _outer(a, b)`` as
loop helper calls.

A reduction loop reversed in place (``coarsen.ad.reverse.fused``) leaves, per input array,
one whole-array update ``X_bar += s_bar * _acc<k>`` for the reverse sweep.  Numba compiles
each such array expression into a kernel of its own: about 0.45 s apiece on our machines,
which is most of the compile time of small array functions (six of them took 2.8 s of
``arrays.reductions_3d``'s 12 s).  ``_add_scaled<N>(X_bar, s_bar, _acc<k>)`` is one loop
nest, compiled once per module and rank, and allocates no temporary for ``s_bar * _acc``.

Requires: the generated function's statements (gast), in which ``fused`` marked each such
update with ``SCALED_MARK`` (the rank of the arrays; both have the input's shape).
Guarantees: ``scaled_add_calls(body)`` returns ``(statements, helpers)``: the statements (a
new list, the input not modified; a statement that changes is a new node) in which every
marked ``X += s * A`` (``X``, ``s``, ``A`` names) is the statement
``_add_scaled<N>(X, s, A)``, and the runtime helper names it used.  The helper
(``coarsen.codegen.runtime.add_scaled``) checks that the shapes agree and computes ``X[i...] += s * A[i...]`` per element: the operations of the array expression, so
the same bits.  Every ``X += _outer(a, b)`` (names; an adjoint of a matrix-vector product,
``coarsen.ir.primitives.linalg``) is ``_outer_add(X, a, b)``: ``X[i, j] += a[i] * b[j]`` in
place, the same operations without the temporary matrix (``X``, 2-D, is an adjoint; ``a`` and
``b``, 1-D, are an adjoint and a primal value, neither of which views it).  Other statements
are unchanged.  Meant for the cpu target (on the python
target a loop of Python statements would be slower than NumPy's expression).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.runtime import add_scaled

__all__ = ["SCALED_MARK", "scaled_add_calls"]

#: the attribute ``fused`` sets on a reduction loop's scaled update (the arrays' rank)
SCALED_MARK = "_coarsen_scaled_rank"


def _operands(st):
    """``(X, s, A)`` of a marked ``X += s * A`` with names only, else None."""
    v = st.value
    if isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add) and \
            isinstance(st.target, gast.Name) and isinstance(v, gast.BinOp) and \
            isinstance(v.op, gast.Mult) and isinstance(v.left, gast.Name) and \
            isinstance(v.right, gast.Name):
        return st.target.id, v.left.id, v.right.id
    return None


def _outer_operands(st):
    """``(X, a, b)`` of ``X += _outer(a, b)`` with names only, else None."""
    v = st.value if isinstance(st, gast.AugAssign) else None
    if isinstance(v, gast.Call) and isinstance(st.op, gast.Add) and \
            isinstance(st.target, gast.Name) and isinstance(v.func, gast.Name) and \
            v.func.id == "_outer" and len(v.args) == 2 and not v.keywords and \
            all(isinstance(a, gast.Name) for a in v.args):
        return st.target.id, v.args[0].id, v.args[1].id
    return None


def scaled_add_calls(body):
    helpers = set()

    def block(stmts):
        out = []
        for st in stmts:
            ops = _outer_operands(st)
            if ops is not None:
                helpers.add("_outer_add")
                call = gast.Expr(value=B.call(B.name("_outer_add"), *[B.name(n) for n in ops]))
                if getattr(st, "coarsen_comment", None):
                    call.coarsen_comment = st.coarsen_comment
                out.append(call)
                continue
            rank = getattr(st, SCALED_MARK, None)
            ops = _operands(st) if rank else None
            if ops is not None:
                name = add_scaled(rank)
                helpers.add(name)
                call = gast.Expr(value=B.call(B.name(name), *[B.name(n) for n in ops]))
                if getattr(st, "coarsen_comment", None):
                    call.coarsen_comment = st.coarsen_comment
                out.append(call)
                continue
            if isinstance(st, (gast.For, gast.While, gast.If)):
                body, orelse = block(st.body), block(st.orelse)
                if any(a is not b for a, b in zip(body + orelse, st.body + st.orelse)):
                    st = copy.copy(st)      # copy on write: the input is not modified
                    st.body, st.orelse = body, orelse
            out.append(st)
        return out

    return block(list(body)), helpers
