"""Scaled reads: an adjoint array set once by ``_set_scaled<N>(X, s, A)`` and then only read
element by element is read as ``0.0 + s * A[I]`` where it is read.

A loss ``np.sum(f(Y))`` is a reduction loop reversed trip by trip (``coarsen.ad.reverse.fused``):
it leaves the accumulator ``A`` of ``f(Y)``'s adjoint, and ``scaled_adds`` turns the
reverse sweep's ``Y_bar = s_bar * A`` into the one pass ``_set_scaled<N>(Y_bar, s_bar, A)``.
Where the next loop only reads ``Y_bar`` element by element (softmax's division, gemm's
``C``), that pass writes a whole array for one read of each element: at 400 x 500, 1.6 MB
written and read again.  Here each read ``X[I]`` computes the element's value itself.

Requires: the generated function's statements (gast), after every pass (it runs last: the
other passes read the element reads as they were); the cpu target (``_set_scaled<N>`` is
``scaled_adds``').
Guarantees: ``scaled_reads(body)`` returns the statements (a new list, the input not
modified; a statement that changes is a copy) in which each top-level statement
``_set_scaled<N>(X, s, A)`` (three distinct names) is ``if X.shape != A.shape: raise
ValueError(...)`` (the helper's own check) and every read ``X[I]`` (an index of ``N``
elements, none a slice) is ``0.0 + s * A[I]``, where

* ``X`` is mentioned before the call only where it is bound, by ``np.empty``/``np.zeros``
  or ``_scratch_empty``/``_scratch_zeros`` (a fresh array no other name reaches; the call
  writes every element), and after it only in such element reads: no store, no view, no
  call, no other name bound to it;
* after the call ``s`` is only read (never bound) and ``A`` only read, element by element or
  for its ``.shape``: neither changes after the call.

The helper computes ``out[I] = 0.0 + a * x[I]`` for every element of one shape, so each read
gets the value the element held, bit for bit; an index outside the shape fails the same
(Numba checks neither; the shapes are equal).
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from ...codegen.gast_queries import mentions, substitute
from .cleanup import FreshNames, index_elts

__all__ = ["scaled_reads", "STEM"]

_HELPER = "_set_scaled"
#: the stem of a scale's copy
STEM = "_scale"
_ALLOCATORS = ("_scratch_empty", "_scratch_zeros")


def scaled_reads(body):
    fresh = FreshNames(body, STEM)
    out = list(body)
    k = -1
    while k + 1 < len(out):
        k += 1
        st = out[k]
        ops = _call(st)
        if ops is None:
            continue
        x, s, a = ops
        rank = int(st.value.func.id[len(_HELPER):])
        if not (_before_ok(out[:k], x) and _after_ok(out[k + 1:], x, a, rank)):
            continue
        head = [_shape_check(st, x, a)]
        if _rebound(out[k + 1:], s):
            # the scale as it is at the call (the reverse sweep resets an adjoint it has used)
            scale = fresh()
            head.append(B.assign(scale, B.name(s)))
        else:
            scale = s
        tail = [_rewritten(t, x, scale, a) for t in out[k + 1:]]
        if any(mentions(t, x) for t in tail):
            continue        # a read of X inside the index of another
        out[k:] = head + tail
    return out


def _call(st):
    """``(X, s, A)`` of the statement ``_set_scaled<N>(X, s, A)`` (three distinct names)."""
    v = st.value if isinstance(st, gast.Expr) else None
    if not (isinstance(v, gast.Call) and isinstance(v.func, gast.Name)
            and v.func.id.startswith(_HELPER) and v.func.id[len(_HELPER):].isdigit()
            and len(v.args) == 3 and not v.keywords
            and all(isinstance(a, gast.Name) for a in v.args)):
        return None
    names = tuple(a.id for a in v.args)
    return names if len(set(names)) == 3 else None


def _before_ok(stmts, x):
    """Does a fresh-array call bind ``x`` in ``stmts``, and is that its only mention there?"""
    bindings = 0
    for st in stmts:
        if not mentions(st, x):
            continue
        if not (isinstance(st, gast.Assign) and len(st.targets) == 1 and _fresh(st.value)):
            return False
        t = st.targets[0]
        bound = [t] if isinstance(t, gast.Name) else \
            list(t.elts) if isinstance(t, gast.Tuple) else []
        if not any(isinstance(b, gast.Name) and b.id == x for b in bound) \
                or mentions(st, x) != 1:
            return False
        bindings += 1
    return bindings >= 1


def _fresh(v):
    if not isinstance(v, gast.Call):
        return False
    f = v.func
    if isinstance(f, gast.Name):
        return f.id in _ALLOCATORS
    return isinstance(f, gast.Attribute) and f.attr in ("empty", "zeros") and \
        isinstance(f.value, gast.Name) and f.value.id == "np"


def _element_reads(stmts, name, rank):
    """``(reads, mentions)``: how many element reads ``name[I]`` (``rank`` indices, no slice)
    and how many mentions of ``name`` ``stmts`` hold (a node two statements share counts
    twice, as a walk meets it)."""
    reads = total = 0
    for st in stmts:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and n.id == name:
                total += 1
            if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Load) \
                    and isinstance(n.value, gast.Name) and n.value.id == name:
                idx = index_elts(n.slice)
                if len(idx) == rank and not any(isinstance(i, gast.Slice) for i in idx):
                    reads += 1
    return reads, total


def _after_ok(stmts, x, a, rank):
    reads, total = _element_reads(stmts, x, rank)
    if reads != total:
        return False
    # A only read, element by element or for its .shape: nothing binds it, stores through it,
    # or hands it to a call
    a_reads, a_total = _element_reads(stmts, a, rank)
    shapes = sum(1 for st in stmts for n in gast.walk(st)
                 if isinstance(n, gast.Attribute) and n.attr == "shape"
                 and isinstance(n.value, gast.Name) and n.value.id == a)
    return a_reads + shapes == a_total


def _rebound(stmts, name):
    return any(isinstance(n, gast.Name) and n.id == name and not isinstance(n.ctx, gast.Load)
               for st in stmts for n in gast.walk(st))


def _shape_check(st, x, a):
    raise_ = gast.Raise(exc=B.call(B.name("ValueError"),
                                   B.const("coarsen: an adjoint accumulator of another shape")),
                        cause=None)
    test = gast.Compare(left=B.attr(f"{x}.shape"), ops=[gast.NotEq()],
                        comparators=[B.attr(f"{a}.shape")])
    node = gast.If(test=test, body=[raise_], orelse=[])
    node.coarsen_comment = (f"{x} = 0.0 + {st.value.args[1].id} * {a}, computed where each element is "
                            f"read (scaled_reads)")
    return node


def _rewritten(st, x, s, a):
    """A copy of ``st`` with every read ``x[I]`` as ``0.0 + s * a[I]`` (``st`` itself where it
    reads none)."""
    if not mentions(st, x):
        return st
    st = copy.deepcopy(st)

    def swap(node):
        if isinstance(node, gast.Subscript) and isinstance(node.value, gast.Name) \
                and node.value.id == x:
            read = gast.Subscript(value=B.name(a), slice=node.slice, ctx=gast.Load())
            return B.binop(B.const(0.0), "+", B.binop(B.name(s), "*", read))
        return None

    return substitute(st, swap)
