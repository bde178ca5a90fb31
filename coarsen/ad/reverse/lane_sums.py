"""Lane sums: an adjoint that a loop only adds into is summed in four lanes after the loop.

The adjoint of a scalar used at every element (a stencil's ``kappa``, softmax's row sum) is a
reduction in the reverse sweep: ``kappa_bar += g * s`` in a loop that also stores other
adjoints.  Numba may not reorder a float sum, so the whole loop runs at the latency of one
addition per trip and is not vectorized (heat's reverse step: 235 us of its 540).  Here each
trip stores its term into a buffer instead, and ``_sum_acc`` (``coarsen.codegen.helpers``)
adds the buffer after the loop in four partial sums (lane ``k % 4``, the accumulator's value
first in lane 0), as ``_dot_acc`` does for ``dot_loops``; below eight terms, in the loop's
order.  The loop is then free of the chain, and LLVM vectorizes it where its other statements
allow.

Requires: the generated function's statements (gast) and the names of its float64 scalar
adjoints (``ReverseContext.adjoint_floats``).  Meant for the cpu target.
Guarantees: ``lane_sums(body, adjoints)`` returns ``(statements, helpers)``: a new list (the
input not modified; a statement that changes is a new node) in which every loop

``for v in range(...)`` (one to three arguments, a step of 1 or -1 when given, no ``else``)

whose body only assigns (``=`` with one target, or augmented), does not assign ``v``, carries
no name from one trip to the next but the adjoints below (every other name it assigns, it
assigns in a trip before reading it there: a loop that carries a state, as a time loop or a
tape's position does, runs one trip after another whatever its sums), does not add into one
array at two indices or more (a stencil's adjoint that ``distribute_scatters`` could not
split: the trips run one after another through memory), and adds into an
adjoint ``acc`` of ``adjoints`` in exactly one statement (``acc += p``, ``acc = acc + p`` or
``acc = p + acc``) that is the only mention of ``acc`` in the loop, becomes

    _lanes<k>[<trip>] = p                 (in place of that statement; <trip> = v - lo, or
                                           lo - v counting down)
    acc = _sum_acc(acc, _lanes<k>, <trips>)   (just after the loop)

with ``_lanes<k> = np.empty(max(<trips>, 0))`` allocated once, before the outermost loop
around it (before the loop itself when it is in none).  Where the loop is in another and
that outermost loop mentions ``acc`` nowhere but in this statement (heat's ``kappa_bar``, one
sum per time step), the buffer gathers every run's terms instead: ``np.zeros``, each trip
``_lanes<k>[<trip>] += p``, and the one ``_sum_acc`` after the outermost loop (a sum per time
step was a chain of additions per step: 50 us of heat-loop's 450).  So the range's bounds must be integer
arithmetic (``+``, ``-``, ``*``, unary ``-``) of constants, names and ``x.shape[c]`` that
nothing in that outermost loop assigns: the buffer's length, and the trips the sum reads,
are then those of every run of the loop.  Several adjoints of one loop get a buffer each.

The terms are the same values, computed by the same statements at the same point of each
trip (``acc`` is read by nothing else in the loop, or in the outer loops where the sum moves
after them); only the order of the additions changes (gathered across runs: each element's
terms in run order, then the lanes), and within one run only from eight terms on: a sum's
rounding, as NumPy's own ``sum`` (pairwise) has its own.  Values that are not the gradient's (the primal's sums, the function's value) are
never reordered: ``acc`` must be an adjoint.  ``_lanes<k>`` names no other name of the
function (``coarsen.ir.fresh_check``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import gast

from ...codegen import build as B
from ...codegen.gast_queries import mentions, name_counts, names_read
from .cleanup import FreshNames, carried_names, int_value, plain_range

__all__ = ["lane_sums", "HELPER", "STEM"]

HELPER = "_sum_acc"
STEM = "_lanes"

_ARITH = (gast.Add, gast.Sub, gast.Mult)


def lane_sums(body, adjoints):
    state = _State(adjoints, FreshNames(body, STEM))
    out = state.block(list(body), None)
    return out, (frozenset({HELPER}) if state.fresh.count else frozenset())


@dataclass(frozen=True)
class _Outer:
    """The outermost loop around a statement: the allocations to put before it, the sums to put
    after it, the names it assigns and how often it mentions each name."""
    loop: object
    allocs: list
    after: list
    assigned: frozenset
    mentions: dict


def _outer(loop):
    return _Outer(loop, [], [], frozenset(names_read([loop], gast.Store)), name_counts([loop]))


class _State:
    def __init__(self, adjoints, fresh):
        self.adjoints = adjoints
        self.fresh = fresh

    def block(self, stmts, outer):
        """``stmts`` rewritten; ``outer`` is the outermost loop around them (None: they are in
        no loop)."""
        out = []
        for st in stmts:
            if isinstance(st, (gast.For, gast.While)):
                here = outer or _outer(st)
                new = self.lanes(st, here) if isinstance(st, gast.For) else None
                new = new or [self.nested(st, here)]
                if outer is None:
                    out.extend(here.allocs)
                out.extend(new)
                if outer is None:
                    out.extend(here.after)
            elif isinstance(st, gast.If):
                out.append(self.nested(st, outer))
            else:
                out.append(st)
        return out

    def nested(self, st, outer):
        body, orelse = self.block(st.body, outer), self.block(st.orelse, outer)
        # a rewrite puts a new node where the statement it replaces stood
        if any(a is not b for a, b in zip(body + orelse, st.body + st.orelse)):
            st = copy.copy(st)      # copy on write: the input is not modified
            st.body, st.orelse = body, orelse
        return st

    def lanes(self, loop, outer):
        """The loop with its adjoint sums in lanes, and the sums after it; None where the
        module docstring's conditions do not hold."""
        trip = _trip(loop)
        if trip is None or (names_read([loop.iter]) & outer.assigned):
            return None
        index, trips = trip
        if not all(_assigns(s) for s in loop.body) \
                or loop.target.id in names_read(loop.body, gast.Store):
            return None
        counts = name_counts([loop])
        found = {}
        for s in loop.body:
            acc, term = _accumulation(s)
            if acc is not None and acc in self.adjoints and counts[acc] == mentions(s, acc) \
                    and acc not in names_read([term]):
                found[id(s)] = acc, term
        if not found or carried_names(loop.body) - {acc for acc, _ in found.values()} \
                or _scatters(loop.body):
            return None
        body, sums = [], []
        for s in loop.body:
            if id(s) not in found:
                body.append(s)
                continue
            acc, term = found[id(s)]
            buf = self.fresh()
            # the outer loops mention acc nowhere else: the buffer gathers every run's terms,
            # summed once after the outermost loop
            across = outer.loop is not loop and outer.mentions.get(acc) == counts[acc]
            target = B.subscript(B.name(buf), copy.deepcopy(index))
            store = B.augassign(target, "+", copy.deepcopy(term)) if across else \
                B.assign(target, copy.deepcopy(term))
            comment = getattr(s, "coarsen_comment", None)
            if comment:
                store.coarsen_comment = comment
            body.append(store)
            total = B.assign(acc, B.call(HELPER, B.name(acc), B.name(buf), copy.deepcopy(trips)))
            if across:
                outer.allocs.append(B.assign(
                    buf, B.call("np.zeros", B.call("max", copy.deepcopy(trips), 0)),
                    comment=f"the terms of {acc}'s sum in a loop below, each run's added in, "
                            f"summed in lanes after the outermost loop (lane_sums)"))
                outer.after.append(total)
            else:
                outer.allocs.append(B.assign(
                    buf, B.call("np.empty", B.call("max", copy.deepcopy(trips), 0)),
                    comment=f"the terms of {acc}'s sum in a loop below, added in lanes after it "
                            f"(lane_sums)"))
                sums.append(total)
        new = copy.copy(loop)
        new.body = body
        return [new] + sums


def _assigns(st):
    return (isinstance(st, gast.Assign) and len(st.targets) == 1) or isinstance(st, gast.AugAssign)


def _accumulation(st):
    """``(acc, p)`` for ``acc += p``, ``acc = acc + p`` or ``acc = p + acc``; else
    ``(None, None)``."""
    if isinstance(st, gast.AugAssign) and isinstance(st.op, gast.Add) \
            and isinstance(st.target, gast.Name):
        return st.target.id, st.value
    if isinstance(st, gast.Assign) and isinstance(st.targets[0], gast.Name) \
            and isinstance(st.value, gast.BinOp) and isinstance(st.value.op, gast.Add):
        acc, v = st.targets[0].id, st.value
        if isinstance(v.left, gast.Name) and v.left.id == acc:
            return acc, v.right
        if isinstance(v.right, gast.Name) and v.right.id == acc:
            return acc, v.left
    return None, None


def _scatters(body):
    """Does ``body`` add into one array at two indices or more (``A[i + 1] += a; A[i - 1] +=
    a``: a stencil's adjoint that ``distribute_scatters`` could not split)?"""
    at = {}
    for st in body:
        if isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Subscript) \
                and isinstance(st.target.value, gast.Name):
            at.setdefault(st.target.value.id, set()).add(gast.dump(st.target.slice))
    return any(len(indices) > 1 for indices in at.values())


def _trip(loop):
    """``(index, trips)``: the trip number of ``range``'s counter and the number of trips, as
    expressions; None unless the loop is a ``range`` loop of the module docstring."""
    if loop.orelse or not plain_range(loop) or not all(_bound(a) for a in loop.iter.args):
        return None
    args, v = loop.iter.args, B.name(loop.target.id)
    if len(args) == 1:
        return v, args[0]
    lo, hi = args[0], args[1]
    step = 1 if len(args) == 2 else int_value(args[2])
    if step == 1:
        if int_value(lo) == 0:
            return v, hi
        return B.binop(v, "-", copy.deepcopy(lo)), B.binop(copy.deepcopy(hi), "-", copy.deepcopy(lo))
    if step == -1:
        c = int_value(hi)
        # range(a, -c, -1): a + c trips, not a - -c
        trips = B.binop(copy.deepcopy(lo), "+", -c) if c is not None and c < 0 else \
            B.binop(copy.deepcopy(lo), "-", copy.deepcopy(hi))
        return B.binop(copy.deepcopy(lo), "-", v), trips
    return None


def _bound(node):
    """Integer arithmetic of constants, names and ``x.shape[c]`` (module docstring)."""
    if isinstance(node, gast.Constant):
        return type(node.value) is int
    if isinstance(node, gast.Name):
        return True
    if isinstance(node, gast.BinOp):
        return isinstance(node.op, _ARITH) and _bound(node.left) and _bound(node.right)
    if isinstance(node, gast.UnaryOp):
        return isinstance(node.op, gast.USub) and _bound(node.operand)
    if isinstance(node, gast.Subscript):
        return isinstance(node.value, gast.Attribute) and node.value.attr == "shape" \
            and isinstance(node.value.value, gast.Name) and isinstance(node.slice, gast.Constant) \
            and type(node.slice.value) is int
    return False
