"""Accumulations of adjoints known to be zero: ``_t5_bar = 0.0`` then ``acc[k, j] += _t5_bar``.

A segment step sets the adjoint of an input it has no partial for to zero (GMM's second read of
``icf[k, j]``, whose value CSE merged with the first); the reverse of that read then adds the
zero into the array's adjoint, a read-modify-write per trip that changes nothing.

Requires: the generated function's statements (gast) and the names the compiler made.
Guarantees: ``drop_zero_accumulations(body, made)`` returns the statements without each
``target += z`` (``target`` a name or a subscript) where ``z`` is a compiler-made scalar that
holds ``0.0`` on every path to it: assigned ``0.0`` earlier in the same block, or in an
enclosing block before the compound statement that holds it, and stored nowhere in between
(nor anywhere in that compound statement).  The input is not modified.  Adding ``0.0``
changes no value but the sign of a negative zero, which is kept as it was.
"""
from __future__ import annotations

import copy

import gast

__all__ = ["drop_zero_accumulations"]


def _zero_assign(st, made):
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
            isinstance(st.targets[0], gast.Name) and st.targets[0].id in made and \
            isinstance(st.value, gast.Constant) and type(st.value.value) is float and \
            st.value.value == 0.0:
        return st.targets[0].id
    return None


def _stored(node, memo):
    """The names ``node`` stores or deletes, memoized per compound statement (a statement
    nested ``d`` deep is asked about at every level above it)."""
    got = memo.get(id(node))
    if got is None:
        got = set()
        for field, value in gast.iter_fields(node):
            items = value if isinstance(value, list) else [value]
            for item in items:
                if not isinstance(item, gast.AST):
                    continue
                if isinstance(item, gast.stmt):
                    got |= _stored(item, memo)
                else:
                    got |= {n.id for n in gast.walk(item) if isinstance(n, gast.Name)
                            and isinstance(n.ctx, (gast.Store, gast.Del))}
        memo[id(node)] = got
    return got


def _block(stmts, zeros, made, memo):
    out, changed = [], False
    zeros = set(zeros)
    for st in stmts:
        if isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add) and \
                isinstance(st.value, gast.Name) and st.value.id in zeros:
            changed = True
            continue
        z = _zero_assign(st, made)
        if z is not None:
            out.append(st)
            zeros.add(z)
            continue
        if isinstance(st, (gast.For, gast.While, gast.If)):
            inner = zeros - _stored(st, memo)
            new = copy.copy(st)
            sub_changed = False
            for field in ("body", "orelse"):
                # For, While and If all hold both blocks as lists (an empty one changes nothing)
                nb, c = _block(getattr(st, field), inner, made, memo)
                if c:
                    setattr(new, field, nb or [gast.Pass()])
                    sub_changed = True
            out.append(new if sub_changed else st)
            changed |= sub_changed
            zeros -= _stored(st, memo)
            continue
        out.append(st)
        zeros -= _stored(st, memo)
    return out, changed


def drop_zero_accumulations(body, made):
    out, _ = _block(list(body), set(), made, {})
    return out
