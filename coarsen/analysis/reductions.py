"""Reduction loops: loops whose trips are independent except through one accumulation.

Requires: a typed (and planned) ``ir.Function`` and its activity ``Facts``.
Guarantees: ``find_reduction_loops`` returns, for each qualifying loop, a ``ReductionLoop``
(typed, frozen) naming its accumulator, the active variables it reads from outside (its
inputs), the active variables local to a trip, its private scratch arrays and the inputs each
trip reads only in its own row (``owned``: element reads ``X[i, j]`` with the loop variable
first; a parallel loop adds their adjoints in place, the trips' rows being disjoint).  It
changes nothing.

A range loop ``L`` outside every other loop qualifies when

- exactly one active variable carries a value from one trip to the next, the *accumulator*
  ``s``, and every assignment to ``s`` in ``L`` is ``s = s + e`` or ``s = s - e`` (``e`` free
  of ``s``), with no other read of ``s`` in ``L``: the adjoint of ``s`` is then the same at
  every trip, and the trips' contributions to the inputs' adjoints are linear in it.  Or ``s``
  heads an *accumulation chain* (``_chain``): SSA names the sum anew across an inner loop
  that adds to it (``s_2 = s + a``; the inner loop adds to ``s_2``; ``s = s_2 - b``), every
  assignment to a link is a link plus or minus a term free of the chain, and nothing else
  reads a link; the links are trip locals whose adjoint is the accumulator's;
- every other variable assigned in ``L`` (active or not) is assigned in each trip before it
  is read (a must-definition walk of the body), and is not read after ``L``, nor are the
  loop indices;
- every array ``L`` stores into (active or not) is a *private scratch array*: one-dimensional, made once
  before ``L`` by ``np.zeros``/``np.empty``/``np.ones`` of a length ``N``, read (only by
  element reads and in-place updates) after a loop ``for j in range(N)`` of the same trip
  has stored ``A[j]`` unconditionally, and not read after ``L``;
- every element read of an input array indexes each axis by a constant or a variable whose
  value changes from trip to trip (``_trip_varying``), or indexes an axis that another read
  of that array indexes so (the loop sweeps the array, and the per-loop adjoint
  accumulator, as large as the input, costs no more than the loop; ``u[nt + 1, i]``, with
  ``nt + 1`` a temporary of loop-invariant values and no read sweeping the rows, reads one
  row of it; ``a[m - 1]`` beside ``a[(i + 1) % m]`` is part of a sweep).

The reverse pass (``coarsen.ad.reverse.fused``) then reverses each trip right after its
forward, in the forward sweep, with the accumulator's adjoint seeded at 1: nothing is taped
across trips, and the reverse sweep scales the inputs' adjoints by the accumulator's.  This
is preaccumulation at the level of a loop: the loop's gradient with respect to its inputs,
for its one output.

A range loop directly in such a loop's body (or in a nested one's) that accumulates into
the same accumulator (or a link of its chain), reads only the outer loop's inputs (of the
active variables) and its own trip locals, and stores nowhere, is *nested* (``ReductionLoop.nested``): a double sum ``s += f(x[i, j])``.  Its
trips are reversed right after they run as well, adding into the outer loop's accumulators
(the accumulator's adjoint is 1 throughout the outer trip): nothing is taped for it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import Array, Assign, Const, For, If, Segment, Store, Var, While, uses, walk
from ..ir.primitives import primitive

_MAKERS = frozenset({"zeros", "empty", "ones"})


@dataclass(frozen=True)
class ReductionLoop:
    """A loop whose trips interact only through ``accumulator`` (see the module docstring)."""
    accumulator: str
    inputs: tuple       # active variables read in the loop and assigned outside it
    locals: tuple       # active variables assigned in each trip before they are read
    scratch: tuple      # private scratch arrays
    owned: tuple = ()   # input arrays each trip reads only in its own row (see ``_owned``)
    nested: bool = False    # a loop in a reduction loop's body into the same accumulator
    chain: tuple = ()       # the links of the accumulation chain (trip locals; see ``_chain``)


def find_reduction_loops(fn, facts):
    """``{id(loop): ReductionLoop}`` for the range loops of ``fn`` outside every other loop
    that qualify (module docstring)."""
    out = {}
    order = list(walk(fn.body))
    single = _single_defs(order)
    for pos, st in enumerate(order):
        if isinstance(st, For) and _outermost(fn.body, st):
            inside = list(walk(st.body))
            ids = {id(x) for x in inside}
            after = [x for x in order[pos + 1:] if id(x) not in ids]
            found = _qualify(fn, facts, single, st, inside, after)
            if found is not None:
                out[id(st)] = found
                _nest(fn, facts, single, found, st.body, order, out)
    return out


def _nest(fn, facts, single, outer, body, order, out):
    """The nested reduction loops of ``body`` (a reduction loop's, or a nested one's)."""
    for inner in body:
        nested = _qualify_nested(fn, facts, single, outer, inner, order)
        if nested is not None:
            out[id(inner)] = nested
            _nest(fn, facts, single, outer, inner.body, order, out)


def _qualify_nested(fn, facts, single, outer, loop, order):
    """A range loop in the body of the reduction loop ``outer`` (directly, not in a branch)
    that accumulates into the same accumulator and reads, of the active variables, only
    ``outer``'s inputs and its own trip locals, stores nowhere, and whose trip locals nothing
    after it reads: its trips are reversed right after they run too, their contributions
    added where ``outer``'s trip adds its own (``nested``; its accumulator's adjoint is 1
    throughout ``outer``'s trip)."""
    if not isinstance(loop, For):
        return None
    inside = list(walk(loop.body))
    assigned = {x.target for x in inside if isinstance(x, Assign)}
    # the sum it adds to: the outer accumulator or a link of its chain (a trip local)
    sums = [a for a in (outer.accumulator,) + outer.locals if a in assigned
            and _accumulates(a, inside)]
    if any(isinstance(x, Store) for x in inside) or len(sums) != 1 or \
            not _linked(outer, sums[0]):
        return None
    acc = sums[0]
    ids = {id(x) for x in inside}
    after = [x for x in order[next(k for k, x in enumerate(order) if x is loop) + 1:]
             if id(x) not in ids]
    trip_locals = assigned - {acc}
    inner_vars = {x.var for x in inside if isinstance(x, For)}
    if (trip_locals | inner_vars | {loop.var}) & _names(after):
        return None
    if not _defined_first(single, loop.body, set(), trip_locals, set(), set()):
        return None
    active = facts.active
    reads = {v for v in _names(inside) if v in active and v not in assigned}
    if not reads <= set(outer.inputs):
        return None
    return ReductionLoop(acc, tuple(sorted(reads)),
                         tuple(sorted(v for v in trip_locals if v in active)), (), (), True)


def _linked(outer, name):
    """Is ``name`` the outer loop's accumulator, or a link of its accumulation chain (so its
    adjoint is the accumulator's, 1, throughout the outer trip)?"""
    return name == outer.accumulator or name in outer.chain


def _outermost(block, loop):
    """Is ``loop`` in ``block`` outside every loop (in branches and segments only)?"""
    for st in block:
        if st is loop:
            return True
        if isinstance(st, If) and (_outermost(st.body, loop) or _outermost(st.orelse, loop)):
            return True
        if isinstance(st, Segment) and _outermost(st.stmts, loop):
            return True
    return False


def _names(stmts):
    return {u.name for x in stmts for u in uses(x) if isinstance(u, Var)}


def _qualify(fn, facts, single, loop, inside, after):
    active = facts.active
    assigned = {x.target for x in inside if isinstance(x, Assign)}
    stored = {x.array for x in inside if isinstance(x, Store)}
    for a in stored:
        if not _scratch_ok(fn, facts, single, a, inside):
            return None
    # the accumulator: the one active scalar assigned in the loop that a trip reads before
    # assigning it; every other variable the loop assigns (active or not) is assigned
    # first in every trip, so restoring it at a trip's end (the trip's reverse pops what
    # its forward pushed) changes nothing the next trip or the code after the loop reads
    found = []
    for c in sorted(v for v in assigned if v in active):
        if isinstance(fn.types.get(c), Array) or not _accumulates(c, inside):
            continue
        if _defined_first(single, loop.body, set(), assigned - {c}, stored, set()):
            found.append(c)
    if not found:
        # an accumulation chain: SSA names the sum anew across an inner loop that adds to
        # it (s_2 = s + a; for ...: s_2 += ...; s = s_2 - b); its links are trip locals
        for c in sorted(v for v in assigned if v in active):
            chain = _chain(c, inside)
            if chain is not None and len(chain) > 1 and \
                    not isinstance(fn.types.get(c), Array) and \
                    _defined_first(single, loop.body, set(), assigned - {c}, stored, set()):
                found.append(c)
    if len(found) != 1:
        return None
    acc = found[0]
    trip_locals = assigned - {acc}
    inner_vars = {x.var for x in inside if isinstance(x, For)}
    if (trip_locals | stored | inner_vars | {loop.var}) & _names(after):
        return None
    stored_active = {a for a in stored if a in active}
    trip_locals = {v for v in trip_locals if v in active}
    inputs = sorted(v for v in _names(inside) if v in active and v not in assigned
                    and v not in stored)
    varying = _trip_varying(inside, inner_vars | {loop.var})
    reads = [x for x in inside if isinstance(x, Assign) and x.op == "getitem"
             and isinstance(fn.types.get(x.args[0].name), Array) and x.args[0].name in inputs]
    # the axes of each input the loop sweeps (some read indexes them by a trip-varying
    # variable): there, a read at any index is part of the sweep (``a[m - 1]`` beside
    # ``a[(i + 1) % m]``); elsewhere only a constant is
    swept = {(x.args[0].name, d) for x in reads for d, it in enumerate(x.index)
             if not isinstance(it, Const) and _varies(it, varying)}
    for x in reads:
        if not all(_varies(it, varying) or (x.args[0].name, d) in swept
                   for d, it in enumerate(x.index)):
            return None
    owned = tuple(a for a in inputs if _owned(fn, loop, inside, a))
    links = tuple(sorted((_chain(acc, inside) or {acc}) - {acc}))
    return ReductionLoop(acc, tuple(inputs), tuple(sorted(trip_locals)),
                         tuple(sorted(stored_active)), owned, chain=links)


def _owned(fn, loop, inside, a):
    """Does each trip read the input array ``a`` only in its own row: every use in the loop an
    element read ``a[i, ...]`` (ints) with the loop variable ``i`` itself first (or its length),
    and the loop's indices distinct rows (a constant start >= 0, a constant step >= 1)?  The
    trips' adjoint contributions to ``a`` then touch disjoint rows, one trip each."""
    t = fn.types.get(a)
    if not isinstance(t, Array) or not (isinstance(loop.start, Const) and isinstance(loop.step, Const)
                                        and loop.start.value >= 0 and loop.step.value >= 1):
        return False
    for x in inside:
        if not any(isinstance(u, Var) and u.name == a for u in uses(x)):
            continue
        if not isinstance(x, Assign) or not x.args or x.args[0] != Var(a) or Var(a) in x.args[1:]:
            return False
        if x.op == "dim":
            continue
        if x.op != "getitem" or len(x.args) != 1 or len(x.index) != t.ndim or x.index[0] != Var(loop.var) \
                or not all(isinstance(it, (Var, Const)) for it in x.index):
            return False
    return True


def _trip_varying(inside, indices):
    """The variables whose value may differ from trip to trip: the loop indices, variables
    assigned more than once in the loop or from themselves (``idx = idx + 1``), and, to a
    fixed point, those assigned from any of them.  A temporary of loop-invariant values
    (``_t = nt + 1``, assigned in each trip) is not among them: ``u[_t, i]`` reads one row."""
    count = {}
    for x in inside:
        if isinstance(x, Assign):
            count[x.target] = count.get(x.target, 0) + 1
    out = set(indices) | {v for v, n in count.items() if n > 1}
    changed = True
    while changed:
        changed = False
        for x in inside:
            if isinstance(x, Assign) and x.target not in out and \
                    any(isinstance(u, Var) and (u.name in out or u.name == x.target)
                        for u in uses(x)):
                out.add(x.target)
                changed = True
    return out


def _varies(item, varying):
    """Does an index item sweep its axis as the loop runs (a constant, or a variable the loop
    assigns; a full slice)?  An input read at a fixed row (``u[nt, i]``) is touched in part:
    its adjoint accumulator, as large as the input, would cost more than the loop."""
    if isinstance(item, Const):
        return True
    if isinstance(item, Var):
        return item.name in varying
    return getattr(item, "lower", 0) is None and getattr(item, "upper", 0) is None


def _accumulates(acc, inside):
    """Is every assignment to ``acc`` in the loop ``acc = acc + e`` or ``acc - e`` (``e``
    free of ``acc``), and every other statement free of it?  (A chain of ``acc`` alone.)"""
    return _chain(acc, inside) == {acc}


def _chain(acc, inside):
    """The accumulation chain of ``acc`` in a loop's statements: ``acc`` and the variables
    assigned ``v = c + e`` or ``c - e`` from a member ``c`` (``e`` free of the chain), when
    every assignment to a member has that form and no other statement reads a member (the
    adjoint of each member is then that of ``acc``); else None."""
    chain, grew = {acc}, True
    while grew:
        grew = False
        for x in inside:
            if isinstance(x, Assign) and x.target not in chain and x.op in ("add", "sub") \
                    and x.args and isinstance(x.args[0], Var) and x.args[0].name in chain:
                chain.add(x.target)
                grew = True
    for x in inside:
        refs = [u for u in uses(x) if isinstance(u, Var) and u.name in chain]
        if isinstance(x, Assign) and x.target in chain:
            if x.op not in ("add", "sub") or x.index or len(refs) != 1 or \
                    not (isinstance(x.args[0], Var) and x.args[0].name in chain) or \
                    primitive(x.op).accumulates == 0:
                return None
        elif refs:
            return None
    return chain


def _single_defs(stmts):
    """``{variable: its Assign}`` for the variables assigned by exactly one statement."""
    found = {}
    for x in stmts:
        if isinstance(x, Assign):
            found.setdefault(x.target, []).append(x)
    return {v: xs[0] for v, xs in found.items() if len(xs) == 1}


def _resolve(single, operand):
    """Follow copies (``_t = copy(n)``) of single-definition variables to their source."""
    seen = 0
    while isinstance(operand, Var) and seen < 16:
        d = single.get(operand.name)
        if d is None or d.op != "copy" or not isinstance(d.args[0], (Var, Const)):
            break
        operand = d.args[0]
        seen += 1
    return operand


def _scratch_ok(fn, facts, single, a, inside):
    t = fn.types.get(a)
    if not isinstance(t, Array) or t.ndim != 1 or a in fn.params or a in fn.views \
            or a in set(fn.views.values()) or facts.defs.get(a) != 1:
        return False
    d = single.get(a)
    if d is None or d.op not in _MAKERS or len(d.args) != 1 or any(x is d for x in inside):
        return False
    # the array is read only by element reads (and its length), written only by element stores
    for x in walk(fn.body):
        if isinstance(x, Assign) and x is not d and any(isinstance(u, Var) and u.name == a for u in x.args):
            if not (x.op == "getitem" and len(x.args) == 1 and _plain_index(x.index)) \
                    and x.op != "dim":
                return False
        if isinstance(x, Store) and x.array == a and not _plain_index(x.index):
            return False
        if isinstance(x, Store) and isinstance(x.value, Var) and x.value.name == a:
            return False
    return True


def _plain_index(index):
    return len(index) == 1 and isinstance(index[0], (Var, Const))


def _full_write(single, st, scratch):
    """The scratch array a loop ``for j in range(N)`` stores ``A[j]`` into, unconditionally,
    for ``A = zeros(N)`` (or ``N = A.shape[0]``); else None."""
    if not (isinstance(st, For) and isinstance(st.start, Const) and st.start.value == 0
            and isinstance(st.step, Const) and st.step.value == 1):
        return None
    stop = _resolve(single, st.stop)
    for x in _flat(st.body):
        if isinstance(x, Store) and x.array in scratch and x.aug is None and \
                isinstance(x.index[0], Var) and x.index[0].name == st.var:
            n = _resolve(single, single[x.array].args[0])
            if n == stop or (isinstance(n, Var) and isinstance(stop, Var) and n.name == stop.name):
                return x.array
            dim = single.get(stop.name) if isinstance(stop, Var) else None
            if dim is not None and dim.op == "dim" and dim.args[0] == Var(x.array) and \
                    dim.args[1] == Const(0):
                return x.array
    return None


def _flat(block):
    for st in block:
        if isinstance(st, Segment):
            yield from _flat(st.stmts)
        else:
            yield st


def _defined_first(single, block, defined, trip_locals, scratch, covered):
    """Must-definition walk of one trip: every read of a trip-local variable follows an
    assignment to it on every path, every read of a scratch array follows a full write of
    it.  ``defined`` and ``covered`` (sets) are updated in place for the rest of the block."""
    for st in _flat(block):
        for u in uses(st):
            if isinstance(u, Var) and u.name in trip_locals and u.name not in defined:
                return False
        if isinstance(st, Assign):
            if st.op == "getitem" and st.args and isinstance(st.args[0], Var) and \
                    st.args[0].name in scratch and st.args[0].name not in covered:
                return False
            defined.add(st.target)
        elif isinstance(st, Store):
            if st.array in scratch and st.aug is not None and st.array not in covered:
                return False
        elif isinstance(st, If):
            d1, d2 = set(defined), set(defined)
            c1, c2 = set(covered), set(covered)
            if not _defined_first(single, st.body, d1, trip_locals, scratch, c1) or \
                    not _defined_first(single, st.orelse, d2, trip_locals, scratch, c2):
                return False
            defined |= d1 & d2
            covered |= c1 & c2
        elif isinstance(st, (For, While)):
            body = st.body if isinstance(st, For) else st.test_body + st.body
            if not _defined_first(single, body, set(defined), trip_locals, scratch, set(covered)):
                return False
            full = _full_write(single, st, scratch) if isinstance(st, For) else None
            if full is not None:
                covered.add(full)
    return True
