"""Scratch adjoints on the float tape: the reverse sweep's own arrays, reused call after call.

The reverse sweep allocates the adjoint of every array it differentiates through, and the
adjoint of a large array is as large (heat's ``u_bar`` is the adjoint of the whole history).
Freed at the end of each call, two such arrays leave enough free memory at the top of glibc's
heap that it hands the pages back to the system, and the next call's arrays are fresh pages:
one page fault per 4 KiB.  The heat app at size l (4001 x 400) took 16 ms a call that way and
3.6 ms with glibc told to keep its memory (``MALLOC_TRIM_THRESHOLD_``), its primal 0.3 ms.  The
gradient keeps its float tape across calls (``coarsen.transforms.gradient``: kept tapes), so arrays carved from
the tape, above its last entry, reuse the same warm memory on every call.

Requires: the generated function's top-level statements (gast), the names the compiler made,
and a float tape ``_ftape`` with its position ``_fpos`` (``coarsen.ad.reverse.tapes``).
Guarantees: ``scratch_arrays(body, made)`` returns ``(statements, helpers)``: a new list (the
input is not modified) and the runtime helpers it uses.  A top-level ``X = np.zeros(S)`` or
``X = np.empty(S)``, with ``S`` ``Y.shape`` or a tuple, becomes
``_ftape, X, _wtop = _scratch_zeros(_ftape, _wtop, S, size)`` (``_scratch_empty``; a
first write decided at runtime, ``X = np.empty(S) if c else np.zeros(S)``, takes the one or
the other by ``c``) where

* ``X`` is compiler-made, assigned only there, and appears otherwise only indexed element by
  element or as the whole target of ``X += ...`` / ``X -= ...``
  (``cleanup.elementwise_uses``), every read indexing all of its axes (its rank is the
  tuple's length, or ``Y``'s in ``ranks``): no view of it is made, so none outlives the
  statements, and it is not returned;
* from that statement on, ``_fpos`` only decreases (the reverse sweep's pops) and ``_ftape``
  is neither stored into nor assigned (but by these statements): the entries the pops read lie
  below ``_fpos``, the arrays above it.

``_wtop = _fpos`` is inserted before the first such statement (``_wtop = np.int64(0)`` where the
function had no float tape: ``taped=False``, the caller then adds ``_ftape``).  The helper grows the tape where
it must (keeping its entries) and returns the array as a C-contiguous view of it, zeroed for
``np.zeros``; the values computed are unchanged.  Where nothing qualifies the statements are
returned as they are.
"""
from __future__ import annotations

import copy

import gast

from ...codegen import build as B
from .cleanup import elementwise_uses, fresh_allocation, index_elts, np_allocation

__all__ = ["SCRATCH_HELPERS", "scratch_arrays"]

#: the runtime helpers of this pass (``coarsen.codegen.runtime``); a module that calls them keeps
#: its tapes across calls once they have grown (``coarsen.transforms.gradient``)
SCRATCH_HELPERS = ("_scratch_empty", "_scratch_zeros")

FT, FP, TOP = "_ftape", "_fpos", "_wtop"


def _allocation(st, made, ranks):
    """``(X, kind, shape, size, rank)`` of a top-level ``X = np.zeros/empty(S)`` (``S``
    ``Y.shape`` with ``Y``'s rank in ``ranks``, or a tuple; no other argument) with ``X``
    compiler-made, else None."""
    alloc = np_allocation(st, made)
    if alloc is None and isinstance(st, gast.Assign) and len(st.targets) == 1 and \
            isinstance(st.targets[0], gast.Name) and st.targets[0].id in made and \
            fresh_allocation(st.value) and isinstance(st.value, gast.IfExp):
        alloc = st.targets[0].id, st.value.test, st.value.body.args[0]
    if alloc is None:
        return None
    name, kind, shape = alloc
    if isinstance(shape, gast.Attribute) and shape.attr == "shape" and \
            isinstance(shape.value, gast.Name):
        size = B.attr(f"{shape.value.id}.size")
        rank = ranks.get(shape.value.id)
        if rank is None:
            return None
    elif isinstance(shape, gast.Tuple) and shape.elts:
        size = shape.elts[0]
        for e in shape.elts[1:]:
            size = B.binop(size, "*", e)
        rank = len(shape.elts)
    else:
        return None
    return name, kind, shape, size, rank


def _names(node, name):
    return [n for n in gast.walk(node) if isinstance(n, gast.Name) and n.id == name]


def _tape_untouched(rest):
    """From the statements ``rest`` on, ``_fpos`` only decreases (``_fpos -= k``) and
    ``_ftape`` is only read: no push, reservation or store of the tape."""
    for st in rest:
        pops = {id(n.target) for n in gast.walk(st) if isinstance(n, gast.AugAssign)
                and isinstance(n.target, gast.Name) and n.target.id == FP
                and isinstance(n.op, gast.Sub)}
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and n.id in (FT, FP) and id(n) not in pops and \
                    not isinstance(n.ctx, gast.Load):
                return False
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                    n.value.id == FT and not isinstance(n.ctx, gast.Load):
                return False
            if isinstance(n, gast.Call) and any(isinstance(a, gast.Name) and a.id == FT
                                                for a in n.args):
                return False        # a helper that may push or grow it (``_push``, ``_reserve``)
    return True


def _qualifies(body, name, rank):
    """``name`` is assigned once and otherwise used element by element (or ``+=``/``-=``),
    every read of it indexing all its ``rank`` axes: a read with fewer indices is a view."""
    allowed, _ = elementwise_uses(body, name)
    if any(id(n) not in allowed for st in body for n in _names(st, name)):
        return False
    for st in body:
        for n in gast.walk(st):
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name) and \
                    n.value.id == name and isinstance(n.ctx, gast.Load) and \
                    len(index_elts(n.slice)) != rank:
                return False
    return sum(1 for st in body for n in gast.walk(st)
               if isinstance(n, gast.Assign)
               and any(isinstance(t, gast.Name) and t.id == name for t in n.targets)) == 1


def scratch_arrays(body, made, taped=True, ranks=None):
    """See the module docstring.  ``taped=False``: the function has no float tape yet (its
    caller adds the parameter and returns it); the arrays then start at 0.  ``ranks``: the
    rank of each array name (an array shaped ``Y.shape`` with ``Y`` not in it is left alone)."""
    ranks = ranks or {}
    found = []
    for pos, st in enumerate(body):
        a = _allocation(st, made, ranks)
        if a is not None and _qualifies(body, a[0], a[4]):
            found.append((pos, a[:4]))
    # only where the tape is left alone from the first of them on (the pops are allowed)
    while found and not _tape_untouched(body[found[0][0]:]):
        found.pop(0)
    if not found:
        return list(body), set()
    at = {pos: a for pos, a in found}
    out, used = [], set()
    for pos, st in enumerate(body):
        if pos == found[0][0]:
            # np.int64(0), not 0: Numba would compile the helpers again for a literal's type
            out.append(B.assign(TOP, B.name(FP) if taped else B.call("np.int64", 0)))
        if pos in at:
            name, kind, shape, size = at[pos]
            if isinstance(kind, str):
                helper = "_scratch_zeros" if kind == "zeros" else "_scratch_empty"
                used.add(helper)
                value = B.call(helper, B.name(FT), B.name(TOP), shape, size)
            else:       # np.empty(S) if test else np.zeros(S)
                used |= {"_scratch_empty", "_scratch_zeros"}
                value = B.ifexp(kind, B.call("_scratch_empty", B.name(FT), B.name(TOP), shape, size),
                                B.call("_scratch_zeros", B.name(FT), B.name(TOP), copy.deepcopy(shape),
                                       copy.deepcopy(size)))
            new = B.assign(B.tuple_(B.name(FT), B.name(name), B.name(TOP)), value)
            for attr in ("coarsen_comment", "_coarsen_loc"):
                if hasattr(st, attr):
                    setattr(new, attr, getattr(st, attr))
            out.append(new)
        else:
            out.append(st)
    return out, used
