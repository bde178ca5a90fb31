"""Reduction loops run in parallel: the fused trips (``coarsen.ad.reverse.fused``) in blocks.

Requires: an emitter with the fused loop's pieces: one trip's code (forward, then reverse with
the accumulator's adjoint at 1) and its per-loop adjoint accumulators.
Guarantees: ``ParallelMixin.parallel_fused`` returns the forward code of the loop run as
``numba.prange`` over blocks (``range`` on the Python target: the same text otherwise, so both
targets give the same bits), or None where it cannot vouch for the trips' independence in the
emitted code (the loop is then emitted serially, as ``range``).  The result does not depend on
the number of threads or on scheduling:

* the ``n`` trips are split into ``B = min(n, 128)`` contiguous blocks ``[b*n//B, (b+1)*n//B)``
  (fewer, ``B <= 64 * n // (1 + size)``, where the per-block adjoint accumulators hold
  ``size`` floats in all, so copying them costs at most about 64 per trip); ``B`` depends on
  ``n`` and the arrays' sizes only;
* each block runs its trips in order, serially, into its own accumulators, made inside the
  block (private): the accumulator ``s`` itself (a partial sum from 0), the adjoint
  accumulators, the scratch arrays and their adjoints, and its own tapes (a trip pushes and
  pops within itself, so a block's tape never holds more than one trip);
* adjoints of inputs each trip reads only in its own row (``ReductionLoop.owned``:
  ``X[i, j]``) are added in place into one shared accumulator: the rows are disjoint, each
  element gets the contributions of one trip, in that trip's order;
* after the parallel loop the partials are added in block order, serially: ``s = s0 + p_0 +
  ... + p_{B-1}``.  The primal value is that blocked sum; it differs from the serial sum by
  rounding only, and it is the same for every thread count (and on both targets).

A trip's scalars that only a branch or an inner loop assigns are set to zero at the trip's
start (``definite``): Numba's parfors miscompile a variable defined on a path that may not run.

Exceptions: Numba runs a ``prange`` loop whose body contains a ``raise`` serially, and may drop
one raised on a worker thread (skipping that thread's remaining blocks).  Index checks in the
parallel body therefore call the helper ``_index_error``; each block marks itself done, and the
blocks left undone run again after the parallel loop, serially and in order (their rows of the
shared accumulators zeroed first), where the checks raise as written.
"""
from __future__ import annotations

import copy

import gast

from ...ir.nodes import Array, Scalar, Store, walk
from ...codegen import build as B
from ...codegen.build import X
from .cleanup import init_value
from ...codegen.gast_queries import names_read
from .tapes import FP, FT, IP, IT

MAX_BLOCKS = 128
COPY_BUDGET = 64        # floats of per-block accumulator copies per trip, at most


class ParallelMixin:
    parallel_all = False      # Options.parallel: every reduction loop, prange or range
    parallel_notes = ()       # [(line, text)] for the report, set per emission
    in_fused = 0              # > 0 while a reduction loop's trip is emitted

    def note_loop(self, s, text):
        notes = list(self.parallel_notes)
        if all(line != s.loc.lineno for line, _ in notes):     # the first reason stands
            notes.append((s.loc.lineno, text))
        self.parallel_notes = notes

    def parallel_fused(self, s, red, trip, accs, scratch_bars):
        """The loop's forward code in blocks (module docstring), or None.  ``trip``: one trip's
        code, with the inputs' adjoints renamed to their accumulators; ``accs``: ``[(input,
        accumulator)]``; ``scratch_bars``: the scratch arrays whose adjoints the trip uses."""
        acc = red.accumulator
        if not _only_accumulated(trip, acc) or any(isinstance(n, gast.Return) for st in trip
                                                   for n in gast.walk(st)):
            return None
        ntrips, nb = self.fresh("_ntrips"), self.fresh("_nblocks")
        blk, lo, hi, done = self.fresh("_blk"), self.fresh("_lo"), self.fresh("_hi"), self.fresh("_done")
        owned = [(x, a) for x, a in accs if x in red.owned]
        shared = [(x, a) for x, a in accs if x not in red.owned]
        rename, pre, inits, ends, combine = {}, [], [], [], []
        # the accumulator: a partial sum per block, from 0
        part, local = self.fresh("_parts"), self.fresh("_psum")
        rename[acc] = local
        pre.append(B.assign(part, B.call("np.zeros", B.name(nb))))
        inits.append(B.assign(local, 0.0))
        ends.append(B.assign(B.subscript(part, B.name(blk)), B.name(local)))
        combine.append(B.assign(acc, X(B.name(acc)) + X(B.subscript(part, B.name(blk)))))
        sizes = []
        for x, a in shared:
            part, local = self.fresh("_parts"), self.fresh("_acc")
            rename[a] = local
            is_arr = isinstance(self.types.get(x), Array)
            shape = X(B.tuple_(B.name(nb))) + X(B.attr(f"{x}.shape")) if is_arr else B.name(nb)
            pre.append(B.assign(part, B.call("np.zeros", shape)))
            inits.append(B.assign(local, self.zeros_like(x)))
            ends.append(B.assign(B.subscript(part, B.name(blk)), B.name(local)))
            combine.insert(0, B.assign(a, self.zeros_like(x)))
            combine.append(B.augassign(a, "+", B.subscript(part, B.name(blk))))
            sizes.append(B.attr(f"{x}.size") if is_arr else B.const(1))
        for x, a in owned:
            pre.append(B.assign(a, self.zeros_like(x)))
        # private scratch arrays (all the loop stores into, active or not) and their adjoints
        for a in sorted({x.array for x in walk(s.body) if isinstance(x, Store)}):
            rename[a] = self.fresh(f"_{a}_blk")
            inits.append(B.assign(rename[a], B.call("np.empty_like", B.name(a))))
        for a in scratch_bars:
            rename[self.bar(a)] = self.fresh(f"_{a}_bar_blk")
            inits.append(B.assign(rename[self.bar(a)], self.zeros_like(a)))
        # a tape per block
        used = names_read(trip) | names_read(trip, gast.Store)
        for tape, pos, dtype in ((FT, FP, ()), (IT, IP, (B.attr("np.int64"),))):
            if tape in used or pos in used:
                rename[tape], rename[pos] = self.fresh(tape), self.fresh(pos)
                inits.append(B.assign(rename[tape], B.call("np.empty", 64, *dtype)))
                inits.append(B.assign(rename[pos], 0))
        trip = self.definite(copy.deepcopy(trip))
        _Rename(rename).visit_all(trip)
        allowed = {blk, done} | {a for _, a in owned} | {p for p in names_read(pre, gast.Store)}
        if not _private(inits + trip, allowed):
            return None
        # the block's trips: range(start + lo*step, start + hi*step, step)
        start, step = self.val(s.start), self.val(s.step)
        bounds = [start + X(B.name(lo)) * step, start + X(B.name(hi)) * step, step]
        if _is_const(s.step, 1):
            bounds = bounds[:2]
            if _is_const(s.start, 0):
                bounds = [B.name(lo), B.name(hi)]
        head = [B.assign(lo, B.binop(X(B.name(blk)) * X(B.name(ntrips)), "//", B.name(nb))),
                B.assign(hi, B.binop((X(B.name(blk)) + 1) * X(B.name(ntrips)), "//", B.name(nb)))]
        block = head + inits + [B.for_range(s.var, bounds, trip)] + ends
        # the parallel copy: index checks through a helper (a raise keeps Numba serial)
        par = copy.deepcopy(block)
        if not self.raises_to_calls(par):
            return None
        par.append(B.assign(B.subscript(done, B.name(blk)), True))
        ploop = B.for_range(blk, [B.name(nb)], par)
        ploop.coarsen_parallel = True
        ploop.coarsen_comment = (f"in parallel: blocks of trips, each into its own partial sums "
                                 f"(with {self.bar(acc)} = 1), added in block order below")
        # the blocks a worker thread did not finish, serially, in order
        again = self.fresh("_blk")
        serial = copy.deepcopy(block)
        _Rename({blk: again}).visit_all(serial)
        for node in serial:
            for n in gast.walk(node):
                for attr in ("coarsen_comment", "_coarsen_loc"):
                    if hasattr(n, attr):
                        delattr(n, attr)
        zero = []
        for x, a in owned:
            rows = B.slice_(*[B.ex(b) for b in bounds])
            zero.append(B.assign(B.subscript(a, rows), 0.0))
        serial = serial[:2] + zero + serial[2:]
        rerun = B.for_range(again, [B.name(nb)], [B.if_(B.ex(X(gast.UnaryOp(
            op=gast.Not(), operand=B.subscript(done, B.name(again))))), serial)])
        rerun.coarsen_comment = ("blocks a worker thread left undone (Numba may drop an exception "
                                 "raised there): run again, serially, in order")
        total = X(B.call("max", B.ex(self.trip_count(s)), 0))
        nblocks = [B.name(ntrips), MAX_BLOCKS]
        if sizes:
            size = X(B.const(1))
            for z in sizes:
                size = size + X(z)
            nblocks.append(B.call("max", 1, B.binop(X(B.const(COPY_BUDGET)) * X(B.name(ntrips)), "//", size)))
        setup = [B.assign(ntrips, total), B.assign(nb, B.call("min", *nblocks))] + pre \
            + [B.assign(done, B.call("np.zeros", B.name(nb), B.attr("np.bool_")))]
        setup[0].coarsen_comment = (f"a reduction loop into {acc}, run in parallel: at most "
                                    f"{MAX_BLOCKS} blocks of trips, each trip reversed right "
                                    "after it runs")
        fin = self.fresh("_blk")
        combine = [c for c in combine if not _in_loop(c)] + [B.for_range(fin, [B.name(nb)], [
            c for c in combine if _in_loop(c)])]
        _Rename({blk: fin}).visit_all(combine)
        combine[0].coarsen_comment = "the blocks' partial sums, added in block order"
        self.note_loop(s, f"in parallel, in at most {MAX_BLOCKS} blocks of trips"
                       + (" (fewer when the adjoint accumulators are large)" if sizes else ""))
        return setup + [ploop, rerun] + combine

    def definite(self, trip):
        """``trip`` with every scalar that a branch or an inner loop of it assigns, and that it
        reads, first set to a zero of its type at the trip's start.  Numba's parfors ignore
        definitions on paths that may not run (numba#9256): a temporary assigned under
        ``if z > 0:`` in the forward step and read under the same test in the reverse step
        took a wrong value in the parallel body (a wrong gradient; the serial code was
        right).  The zeros are never read: the values are the same on every target."""
        nested = set()
        for st in trip:
            if isinstance(st, (gast.If, gast.For, gast.While)):
                nested |= names_read([st], gast.Store)
        types = dict(self.extra_inits)
        types.update(self.types)
        zeros = [B.assign(v, init_value(types[v])) for v in sorted(nested & names_read(trip))
                 if isinstance(types.get(v), Scalar)]
        return zeros + trip

    def raises_to_calls(self, stmts):
        """``raise IndexError(message)`` -> ``_index_error(message)`` (in place); False when
        ``stmts`` raise anything else."""
        ok = True
        emitter = self

        class Calls(gast.NodeTransformer):
            def visit_Raise(self, n):
                nonlocal ok
                exc = n.exc
                if isinstance(exc, gast.Call) and isinstance(exc.func, gast.Name) and \
                        exc.func.id == "IndexError" and len(exc.args) == 1 and not exc.keywords:
                    return gast.Expr(value=B.call(emitter.helper("_index_error"), exc.args[0]))
                ok = False
                return n
        for k, st in enumerate(stmts):
            stmts[k] = Calls().visit(st)
        return ok


def _is_const(operand, value):
    return getattr(operand, "value", None) == value and type(getattr(operand, "value", None)) is int


def _in_loop(stmt):
    """Is a combining statement one of the per-block additions (reads a partial)?"""
    return any(isinstance(n, gast.Subscript) for n in gast.walk(stmt))


def _only_accumulated(trip, acc):
    """Does the trip's code touch ``acc`` only as ``acc = acc + e``, ``acc = acc - e``,
    ``acc += e`` or ``acc -= e`` (``e`` free of ``acc``)?  A block adds into its own partial
    sum, so any other read would see the partial instead of the running value."""
    def free(node):
        return acc not in {n.id for n in gast.walk(node) if isinstance(n, gast.Name)}

    for st in trip:
        for n in gast.walk(st):
            if isinstance(n, gast.Assign) and any(isinstance(t, gast.Name) and t.id == acc for t in n.targets):
                v = n.value
                if not (len(n.targets) == 1 and isinstance(v, gast.BinOp) and isinstance(v.op, (gast.Add, gast.Sub))
                        and isinstance(v.left, gast.Name) and v.left.id == acc and free(v.right)):
                    return False
            elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) and n.target.id == acc:
                if not (isinstance(n.op, (gast.Add, gast.Sub)) and free(n.value)):
                    return False
    # every read of acc is the left operand of such an update
    reads = sum(1 for st in trip for n in gast.walk(st)
                if isinstance(n, gast.Name) and n.id == acc and isinstance(n.ctx, gast.Load))
    updates = sum(1 for st in trip for n in gast.walk(st)
                  if isinstance(n, gast.Assign) and isinstance(n.targets[0], gast.Name) and n.targets[0].id == acc)
    return reads == updates


def _private(stmts, allowed):
    """A check of the emitted block, in the order of its text: no name is read before the
    block assigns it and assigned after (a value would flow from one trip or block to the
    next), and every array it writes into is one it made (assigned earlier) or ``allowed``
    (the partials, the shared row-owned accumulators)."""
    assigned, first_read = set(), set()
    for st in stmts:
        for kind, name in _in_order(st):
            if kind == "load" and name not in assigned:
                first_read.add(name)
            elif kind == "store":
                assigned.add(name)
            elif kind == "into" and name not in assigned and name not in allowed:
                return False
    return not (first_read & assigned)


def _in_order(node):
    """``(kind, name)`` of the names of ``node`` in evaluation order: ``"load"``, ``"store"``,
    and ``"into"`` for the array an element or slice assignment writes (an augmented
    assignment reads its target first)."""
    if isinstance(node, gast.Name):
        yield ("store" if isinstance(node.ctx, gast.Store) else "load", node.id)
        return
    if isinstance(node, (gast.Assign, gast.AugAssign)):
        targets = node.targets if isinstance(node, gast.Assign) else [node.target]
        if isinstance(node, gast.AugAssign) and isinstance(node.target, gast.Name):
            yield ("load", node.target.id)
        yield from _in_order(node.value)
        for t in targets:
            yield from _targets(t)
        return
    if isinstance(node, gast.For):
        yield from _in_order(node.iter)
        yield from _targets(node.target)
        for st in node.body + node.orelse:
            yield from _in_order(st)
        return
    for child in gast.iter_child_nodes(node):
        yield from _in_order(child)


def _targets(t):
    if isinstance(t, gast.Name):
        yield ("store", t.id)
    elif isinstance(t, gast.Tuple):
        for e in t.elts:
            yield from _targets(e)
    else:
        base = _base(t)
        yield ("into", base.id if base is not None else "")
        for child in gast.iter_child_nodes(t):
            if child is not t.value:
                yield from _in_order(child)
        if isinstance(t, gast.Subscript) and not isinstance(t.value, gast.Name):
            yield from _in_order(t.value)


def _base(node):
    while isinstance(node, gast.Subscript):
        node = node.value
    return node if isinstance(node, gast.Name) else None


class _Rename(gast.NodeTransformer):
    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, n):
        if n.id in self.mapping:
            n.id = self.mapping[n.id]
        return n

    def visit_all(self, nodes):
        for n in nodes:
            self.visit(n)
