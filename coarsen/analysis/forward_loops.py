"""Narrow loops: loops whose Jacobian forward mode preaccumulates, with no tape.

Requires: a typed ``ir.Function`` before segment planning (no ``Segment`` yet) and its
activity ``Facts``.
Guarantees: ``wrap_forward_loops(fn, facts)`` returns a new ``Function`` (``fn`` is not
modified; returned as it is when no loop qualifies) in which each qualifying loop is the one
statement of a ``Segment`` whose plan's result is a ``ForwardLoop``
(``coarsen.analysis.plans``), and the list of those segments (numbered from 1; the driver
renumbers them after the planned ones).  The reverse pass (``coarsen.ad.reverse.forward_loops``)
then runs the loop in the forward sweep with one tangent lane per input (forward mode,
``coarsen.ad.forward``), and the reverse sweep takes one preaccumulated step,
``input_bar += sum(output_bar * d output / d input)``: nothing of the loop is taped, and the
reverse sweep does not run it again.  This is the hand-written gradient of a filter or a
recurrence in a few parameters (forward sensitivities), chosen by the width of the loop's
Jacobian: reverse mode pays per trip whatever the number of inputs, forward mode per input.

A ``for`` loop qualifies when

- it is a statement of the function's body (outside every loop and branch: it runs once,
  so its tangents hold their final values until the reverse sweep reads them), not a
  ``prange`` loop, and not a reduction loop (``coarsen.analysis.reductions``: reversed trip
  by trip, it tapes nothing either, and its trips cost less than forward mode's lanes); or a
  statement of the trip of a serial reduction loop of the body that assigns neither its
  accumulator nor a link of its chain (``ForwardLoop.in_trip``: a Monte Carlo path's
  recurrence, ``S = S * exp(drift + vol * Z[p, k])``).  Each trip is reversed right after
  it runs (``coarsen.ad.reverse.fused``), so the tangents hold until its reverse reads them;
  where that loop is reversed as usual after all (the emitter decides), the segment is
  emitted as its plain statements, in reverse mode;
- it reads an array element (a loop that reads none is the phi-calculus's: a closed form,
  or a coarse step per trip), stores into no array, and holds no ``while`` loop;
- every active variable it reads from outside is a scalar, and every variable it assigns is
  a scalar; forward mode has a rule for every statement it differentiates (no custom rule);
- every variable it assigns that holds a value before it is a parameter or assigned by a
  statement of the body (not only in a branch): the forward sweep keeps those values in
  variables, and the reverse step puts them back for the reverse of the code before the loop
  (``ForwardLoop.restore``: the loop's one "tape");
- its *lanes* number 1 to ``MAX_LANES``: the active scalars it reads from outside, and the
  active variables it assigns whose entry value matters (read before being assigned in a
  trip, or read after the loop, which holds the entry value when the loop runs no trip),
  except those whose last assignment before the loop is a constant (zero tangent, ``zero``).

Each lane carries tangents only for the variables its input reaches in the loop (assigned from
it, again and again: ``ForwardLoop.reach``); elsewhere the tangent is a symbolic zero, as the
hand-written forward sensitivities of a filter track only what depends on each parameter.
(A dense lane multiplies by its zeros: ``x * 0.0`` is not folded, IEEE's ``inf * 0``.)
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import Assign, Const, For, If, Scalar, Segment, Store, Var, While, uses, walk
from ..ir.tangent_names import tangent_names
from ..ir.primitives import forward_rule, primitive
from .plans import ForwardLoop, SegmentPlan
from .reductions import find_reduction_loops

#: the most tangent lanes a loop is given: each lane costs about one primal's arithmetic,
#: which latency-bound recurrences hide and wide ones do not
MAX_LANES = 3
#: the primitives' forward rules the lanes can use (``coarsen.ir.primitives.forward_rule``)
FORWARD_RULES = ("jvp", "linear", "partials", "zero")


def wrap_forward_loops(fn, facts):
    """``(function, segments)``: see the module docstring."""
    body = list(fn.body)
    segments = []
    used = fn.names     # the tangents' names come from the module's supply
    reductions = find_reduction_loops(fn, facts)

    def wrap(st, info):
        lines = sorted({x.loc.lineno for x in walk([st])})
        seg = Segment([st], st.loc, len(segments) + 1, inputs=list(info.lanes),
                      outputs=list(info.outputs),
                      plan=SegmentPlan((lines[0], lines[-1]), result=info, strategy="forward mode"))
        segments.append(seg)
        return seg

    for k, st in enumerate(fn.body):
        red = reductions.get(id(st))
        if red is not None:
            # a loop in a serial reduction loop's trip (a path's recurrence in a Monte
            # Carlo sum): the trip is reversed right after it runs, so its tangents hold
            # until the trip's reverse reads them
            if st.parallel or red.nested:
                continue
            trip = list(st.body)
            for j, sub in enumerate(st.body):
                info = _qualify(fn, facts, st.body, j, used, prefix=fn.body[:k] + st.body[:j],
                                suffix=st.body[j + 1:] + fn.body[k + 1:],
                                carried={red.accumulator} | set(red.chain))
                if info is not None:
                    trip[j] = wrap(sub, replace(info, in_trip=True))
            if trip != list(st.body):
                body[k] = replace(st, body=trip)
            continue
        info = _qualify(fn, facts, fn.body, k, used, prefix=fn.body[:k], suffix=fn.body[k + 1:])
        if info is not None:
            body[k] = wrap(st, info)
    if not segments:
        return fn, []
    return replace(fn, body=body), segments


def _qualify(fn, facts, block, k, used, prefix, suffix, carried=frozenset()):
    """The ``ForwardLoop`` of ``block[k]``, or None; ``prefix``/``suffix``: the statements
    that run before and after it (outermost first), ``carried``: variables it must not
    assign (a reduction loop's accumulator)."""
    loop = block[k]
    if not isinstance(loop, For) or loop.parallel:
        return None
    inside = list(walk(loop.body))
    if any(isinstance(x, (Store, While, Segment)) for x in inside):
        return None
    if not any(isinstance(x, Assign) and x.op == "getitem" for x in inside):
        return None
    types, active = fn.types, facts.active
    # forward mode must have a rule for every differentiated statement (custom rules keep
    # their own path)
    for x in inside:
        if isinstance(x, Assign) and x.target in active and (
                x.op.startswith("custom") or forward_rule(primitive(x.op)) not in FORWARD_RULES):
            return None
    assigned = {x.target for x in inside if isinstance(x, Assign)} | \
        {x.var for x in inside if isinstance(x, For)} | {loop.var}
    if any(not isinstance(types.get(v), Scalar) for v in assigned) or assigned & set(carried):
        return None
    reads = {u.name for x in [loop] + inside for u in uses(x) if isinstance(u, Var)}
    free = sorted(v for v in reads - assigned if v in active)
    if any(not isinstance(types.get(v), Scalar) for v in free):
        return None
    # the variables the loop assigns that hold a value before it: the forward sweep keeps
    # those values and the reverse step puts them back, for the reverse of the code before
    # the loop (``y = math.tanh(q)`` reads y); each must be assigned for sure before the
    # loop (by a statement of the body, or a parameter), or the copy could read nothing
    before = [x for x in walk(prefix) if isinstance(x, Assign)]
    top = {x.target for x in prefix if isinstance(x, Assign)} | set(fn.params)
    restore = sorted(v for v in assigned if v in fn.params or any(x.target == v for x in before))
    if any(v not in top for v in restore):
        return None
    after = {u.name for x in walk(suffix) for u in uses(x) if isinstance(u, Var)}
    after.add(fn.result)
    first = _defined_first(loop.body, set(), set())
    outputs = sorted(v for v in assigned if v in active and v in after)
    entry = sorted(v for v in assigned if v in active and (v in after or v not in first))
    zero = [v for v in entry if _constant_entry(fn, prefix, v)]
    lanes = free + [v for v in entry if v not in zero]
    if not outputs or not 1 <= len(lanes) <= MAX_LANES:
        return None
    if any(types[v].kind != "f64" for v in lanes + outputs):
        return None
    # per lane, the variables its input reaches (the others' tangents are zero there)
    reach = []
    for v in lanes:
        got, grew = {v}, True
        while grew:
            grew = False
            for x in inside:
                if isinstance(x, Assign) and x.target in active and x.target not in got and \
                        any(isinstance(a, Var) and a.name in got for a in x.args):
                    got.add(x.target)
                    grew = True
        reach.append(frozenset(got))
    # the tangents' names: <name>_dot<k>_, none a name of the function or of another lane
    # (``used`` grows: the loops of one function share it)
    tangents = [tangent_names(fn, reach[j], f"_dot{j}_", used) for j in range(len(lanes))]
    partials = {(o, i): tangents[j][o] for o in outputs for j, i in enumerate(lanes)
                if o in reach[j]}
    formula = (f"forward mode, {len(lanes)} tangent lane{'s' if len(lanes) > 1 else ''} "
               f"({', '.join(lanes)}) for {', '.join(outputs)}; nothing taped")
    return ForwardLoop(loop, tuple(lanes), tuple(outputs), tuple(zero), tuple(tangents),
                       partials, formula, tuple(reach), tuple(restore))


def _defined_first(block, defined, read):
    """The variables a trip of ``block`` assigns before any read of them, on every path
    (``defined``, grown in place and returned); ``read``: the variables read so far (grown
    in place).  Assignments in a nested loop do not count (it may run no trip)."""
    for st in block:
        if isinstance(st, Assign):
            read |= {u.name for u in uses(st) if isinstance(u, Var)}
            if st.target not in read:
                defined.add(st.target)
        elif isinstance(st, If):
            read |= {u.name for u in uses(st) if isinstance(u, Var)}
            r1, r2 = set(read), set(read)
            a = _defined_first(st.body, set(defined), r1)
            b = _defined_first(st.orelse, set(defined), r2)
            read |= r1 | r2
            defined |= a & b
        else:
            read |= {u.name for x in walk([st]) for u in uses(x) if isinstance(u, Var)}
    return defined


def _constant_entry(fn, prefix, v):
    """Is the last assignment to ``v`` in ``prefix`` (the statements before the loop) one of
    them that copies a constant (``m = 0.0``), with no assignment to ``v`` nested after it?"""
    last = None
    for st in prefix:
        for x in walk([st]):
            if isinstance(x, Assign) and x.target == v:
                last = (x, x is st)
    if last is None:
        return v not in fn.params       # never assigned before: Python would not read it
    x, top = last
    return top and x.op == "copy" and isinstance(x.args[0], Const)
