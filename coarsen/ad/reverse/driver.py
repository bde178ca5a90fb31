"""Reverse mode: from a typed IR function to the derivative program as a gast module.

Requires: a typed ``ir.Function``, the names of the differentiated parameters, and the
analysis ``Facts`` (``coarsen.analysis.activity``).
Guarantees: a ``gast.Module`` with the runtime helpers it needs and the entry
``<entry_name>(*params)`` returning ``(value, (adjoint of each wrt parameter,), (tape floats,
tape ints))``; where the reverse sweep's arrays lie on the float tape (``scratch``; no budget,
no tape lines) the counts end with the float tape's capacity: ``(floats, ints, capacity)``.
Where the code tapes (and not in workspace mode), the gradient itself is
``<entry_name>_taped(*params, *tapes)`` (``taped_name``): ``tapes`` are ``_ftape`` (float64)
and/or ``_itape`` (int64), those it uses in that order, of any size (reserved at entry, their
contents never read before written), and it returns the entry's triple followed by the tapes,
grown where they had to grow, for the caller to pass to the next call; the entry is then a
thin call of it on fresh tapes.  In workspace mode and without tapes the entry is the
gradient.
The function runs a forward sweep (the primal, saving on typed tapes the values the reverse
sweep reads that would otherwise be overwritten) and a reverse sweep (adjoint statements in
reverse order, restoring saved values as it goes): the invariant is that at the reverse point
of every statement, each variable the reverse sweep reads holds its forward value there.
Tapes are a float64 buffer and an int64 buffer that grow geometrically; ``range`` loops are
reversed by index arithmetic, ``while`` loops by a trip counter.  Adjoints are named
``<variable>_bar``; the original source line heads each block as a comment.

``differentiate_ir`` is the driver: it plans and lifts segments (coarse mode), plans bounds
checks, emits both sweeps until the tape analysis settles (``coarsen.analysis.recording``),
assembles the entry, runs the cleanup and optimization passes over it
(``coarsen.ad.reverse.pipeline``, in the order of its list; ``Options.disable`` switches
passes off) and assembles the module.  It works on its own copy of the function and facts:
the caller's IR is never changed, so one lowering serves every use.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import gast

from ...analysis.activity import intact
from ...analysis.costmodel import default_weights
from ...analysis.plans import Fallback
from ...analysis.strategy import SegmentContext, estimate
from ...analysis.bounds import plan_bounds
from ...analysis.reductions import find_reduction_loops
from ...analysis.forward_loops import wrap_forward_loops
from ...analysis.recording import (find_cheap_recomputable, find_int_recomputable, find_recomputable,
                                   rereads_for_steps, shape_recorded, tape_sites, to_be_recorded)
from ...errors import CoarsenError
from ...ir.nodes import Array, Assign, For, Scalar, Segment, While, walk
from ...ir import fresh_check
from ...codegen import build as B
from ...codegen.build import X
from ..lift_planned import lift_planned, lifted_names as lifted_names_of
from ..passes import Fact
from ...codegen.runtime import helper_source
from .checkpoint import budget_check
from .local_stretch import LFT, LIT
from .cleanup import drop_marked, init_value
from ...codegen.gast_queries import comment_pass
from .emitter import Emitter, EmitterInputs
from .pipeline import REVERSE, ReverseCode, ReverseContext, ReverseModule
from .tapes import FP, FT, IP, IT, TL_MARK, TLF, TLI


def _in_loops(block, fused=(), loop=None, out=None):
    """{id of a segment that runs inside a loop: the variables its innermost loop assigns}.
    A reduction loop (``fused``: ids) does not count: each trip's reverse follows it, so its
    body is like straight-line code (``coarsen.ad.reverse.fused``)."""
    out = {} if out is None else out
    for st in block:
        if isinstance(st, Segment) and loop is not None:
            out[id(st)] = loop
        inner = loop
        if isinstance(st, (For, While)) and id(st) not in fused:
            inner = frozenset(s.target for s in walk([st]) if isinstance(s, Assign))
        for sub in (getattr(st, "body", None), getattr(st, "orelse", None),
                    getattr(st, "test_body", None), getattr(st, "stmts", None)):
            if isinstance(sub, list):
                _in_loops(sub, fused, inner, out)
    return out


def _context(seg, loops, reread):
    """The segment's ``SegmentContext``: in a loop, its inputs that the loop reassigns and the
    reverse sweep cannot re-read from an array are taped, those it does not reassign are
    invariant (by canonical name)."""
    varying = loops.get(id(seg))
    if varying is None:
        return SegmentContext()
    names = seg.plan.lifted.names
    return SegmentContext(True, frozenset(c for c, r in names.items()
                                          if r in varying and r not in reread),
                          frozenset(c for c, r in names.items() if r not in varying))


def _planned(plan, ctx, weights, forced):
    """The plan of a lifted block with its strategy (``coarsen.analysis.strategy``): a
    segment planned fine-grained gets a ``Fallback`` saying so."""
    if plan.lifted is None or plan.kind == "loop":
        return plan
    costs = estimate(plan.lifted, ctx, weights, forced)
    if costs.chosen == "fine":
        return replace(plan, result=Fallback(costs.estimates_text()), strategy="fine",
                       costs=costs)
    return replace(plan, strategy=costs.chosen, costs=costs)


def taped_name(entry_name):
    """The name of the taped entry beside ``entry_name`` (see the module docstring)."""
    return entry_name + "_taped"


def _fresh_tapes_entry(entry_name, params, tapes, tops):
    """``entry_name(*params)``: the taped entry called with fresh tapes, its tapes dropped."""
    fresh = {FT: B.call("np.empty", tops[FT] + 64),
             IT: B.call("np.empty", tops[IT] + 64, B.attr("np.int64"))}
    out = ("_value", "_grads", "_tape") + tuple(tapes)
    body = [B.assign(B.tuple_(*out), B.call(taped_name(entry_name), *params, *(fresh[t] for t in tapes))),
            B.return_(B.tuple_(*out[:3]))]
    func = B.funcdef(entry_name, params, body)
    func.coarsen_comment = (f"one call on fresh tapes: {taped_name(entry_name)} takes the tapes\n"
                            "and gives them back, grown, for the next call")
    return func


@dataclass(frozen=True)
class _Planned:
    """What the driver decided before emitting (``_plan``)."""
    fn: object              # the driver's own copy of the function, its segments planned
    segments: list          # the lifted segments (coarse mode)
    forward_segments: list  # the loops preaccumulated by forward mode
    budgets: list           # (segment location, its symbolic budget)
    reductions: object      # coarsen.analysis.reductions of the planned IR
    int_recompute: dict     # coarsen.analysis.recording.find_int_recomputable of it
    inputs: EmitterInputs   # the emitter's inputs but the tape sites and cheap temporaries


def _plan(fn, facts, options, weights, tape_lines):
    """Plan and lift the segments (coarse mode) and the index checks (see ``_Planned``)."""
    segments, budgets = [], []
    reductions = None       # coarsen.analysis.reductions, once the IR holds its segments
    forward_segments = []   # loops preaccumulated by forward mode (coarsen.analysis.forward_loops)
    if options.coarsen:
        if options.plan == "auto":
            # (a forced plan measures the segments' strategies: its loops keep their segments)
            fn, forward_segments = wrap_forward_loops(fn, facts)
        segments, budgets = lift_planned(fn, facts, options.budget_seconds)
        for k, seg in enumerate(forward_segments):
            seg.index = len(segments) + k + 1
        reductions = find_reduction_loops(fn, facts)
        loops = _in_loops(fn.body, reductions)
        # element reads the reverse steps re-read instead of taping (steps.sym_expr)
        reread = set(rereads_for_steps(fn, find_recomputable(fn, facts)))
        weights = weights if weights is not None else default_weights()
        for seg in segments:
            if seg.plan.lifted is not None and seg.plan.kind != "loop":
                seg.plan = _planned(seg.plan, _context(seg, loops, reread), weights, options.plan)
    # the canonical names segments were lifted under (coarsen.ad.canonical), to print back
    lifted_names = lifted_names_of(segments)
    # index checks (boundscheck): proven, hoisted before loops, or inline before accesses
    bounds = plan_bounds(fn) if options.boundscheck else None
    int_recompute = find_int_recomputable(fn, facts)
    if reductions is None:
        reductions = find_reduction_loops(fn, facts)
    inputs = EmitterInputs(lifted_names=lifted_names, weights=weights, bounds=bounds,
                           tape_lines=tape_lines)
    return _Planned(fn, segments, forward_segments, budgets, reductions, int_recompute, inputs)


def _settle(planned, wrt, facts, options, cheap):
    """``(emitter, forward sweep, reverse sweep, to be recorded, tape sites)``: emit until
    the reverse sweep's reads no longer grow; ``cheap``: the float temporaries the reverse
    sweep evaluates again (``find_cheap_recomputable``).
    The reverse sweep's reads decide what is taped, and taping adds restore code that reads
    more (the condition of an if whose branch now restores an array element, a loop's
    bounds): emit until the reads no longer grow (monotone, so this ends)."""
    fn = planned.fn
    reads = {}
    tbr, sites, fused_for, shapes = set(), frozenset(), None, frozenset()
    for k in range(8):
        em = Emitter(fn, wrt, facts, tbr, planned.int_recompute, planned.reductions, options=options,
                     inputs=replace(planned.inputs, cheap=cheap, tape_sites=sites, shape_recorded=shapes))
        fwd, rev = em.block(fn.body)
        grown = False
        for v, rs in em.reads_at.items():
            known = reads.setdefault(v, [])
            for r in rs:
                key = (r[0], id(r[1])) if isinstance(r, tuple) else id(r)
                if key not in {((q[0], id(q[1])) if isinstance(q, tuple) else id(q)) for q in known}:
                    known.append(r)
                    grown = True
        # settled when the reads no longer grow and the loops reversed trip by trip are
        # those the tape analysis assumed (taping more can keep a reduction loop from being
        # fused: its trips are then reversed as usual, and what they read must be taped)
        if not grown and k > 0 and frozenset(em.fused) == fused_for:
            return em, fwd, rev, tbr, sites
        plain = {v: [r[1] if isinstance(r, tuple) else r for r in rs] for v, rs in reads.items()}
        fused_for = frozenset(em.fused)
        tbr = to_be_recorded(fn, plain, fused_for)
        for v in facts.active:
            if isinstance(fn.types.get(v), Array) and not intact(facts, v) and v not in facts.set_temps:
                tbr.add(v)
        sites = tape_sites(fn, reads, fused_for)
        shapes = shape_recorded(fn, tbr, reads)
    raise CoarsenError("internal: the tape analysis did not settle", filename=fn.filename)


def _emit(planned, wrt, facts, options):
    """Both sweeps, settled (``_settle``), with the cheap temporaries the settled sweep would
    tape evaluated again instead (where nothing is taped for them, their value is at hand
    and re-evaluating would only cost)."""
    fn = planned.fn
    em, fwd, rev, tbr, sites = _settle(planned, wrt, facts, options, {})
    candidates = find_cheap_recomputable(fn, facts, em.recompute)
    chosen = {t for t, st in candidates.items() if id(st) in sites}
    todo = list(chosen)
    while todo:         # with the candidates their re-evaluation reads
        for a in candidates[todo.pop()].args:
            name = getattr(a, "name", None)
            if name in candidates and name not in chosen:
                chosen.add(name)
                todo.append(name)
    cheap = {t: st for t, st in candidates.items() if t in chosen}
    if cheap:
        em, fwd, rev, tbr, sites = _settle(planned, wrt, facts, options, cheap)
    return em, fwd, rev, tbr


def _prologue(fn, facts, em, tbr, top_f, top_i):
    """Copies of written inputs, the tapes, initial values."""
    types = fn.types
    prologue = []
    for p in fn.params:
        if p in facts.stored and isinstance(types[p], Array):
            prologue.append(B.assign(p, B.call(gast.Attribute(value=B.name(p), attr="copy", ctx=gast.Load()))))
    inits = {}
    for v in sorted(tbr):
        if v not in fn.params and em.taped(v) and v in types and isinstance(types[v], Array):
            inits[v] = types[v]
    for st in walk(fn.body):
        if isinstance(st, Assign) and st.target not in fn.params and em.taped_at(st):
            inits[st.target] = types[st.target]
    for v in sorted(facts.active):
        if v not in fn.params and isinstance(types.get(v), Array) and v not in facts.set_temps:
            inits[v] = types[v]
    for v, t in em.extra_inits:
        inits.setdefault(v, t)
    for v in sorted(inits):
        st = B.assign(v, init_value(inits[v]))
        st._coarsen_init = True
        prologue.append(st)
    if em.workspace:
        prologue.append(B.assign(FP, 0))
        prologue.append(B.assign(IP, 0))
        for k, tape in ((top_f, FT), (top_i, IT)):
            if k:
                prologue.append(em.workspace_check(tape, X(k)))
    else:
        # the tapes come in as parameters (the taped entry, below): reserved for the pushes
        # outside every loop, plus slack, then grown per loop as before.  On the cpu target
        # positions start as np.int64(0) and sizes count from them: Numba compiles a helper
        # called with a literal (``0``, ``64``) once more for the literal's own type
        start = B.call("np.int64", 0) if em.options.build_target == "cpu" else 0
        for used, tape, pos, top in ((em.uses_ftape, FT, FP, top_f), (em.uses_itape, IT, IP, top_i)):
            if used:
                prologue.append(B.assign(pos, copy.deepcopy(start)))
                prologue.append(B.assign(tape, B.call(em.helper("_reserve"), tape, X(B.name(pos)) + (top + 64))))
    if em.tape_lines is not None:
        for counter in (TLF, TLI):
            prologue.append(B.assign(counter, B.call("np.zeros", max(1, len(em.tape_lines)),
                                                     B.attr("np.int64"))))
        prologue.append(B.assign(TL_MARK, 0))
    if prologue:
        prologue[0].coarsen_comment = "prologue: copies of written inputs, tapes, initial values"
    return prologue


def _adjoints(fn, wrt, facts):
    """The adjoints' initial values (the result's 1, the others' 0) and the seed."""
    types = fn.types
    adj_init = []
    seeded = fn.result in facts.active      # the result's adjoint starts at 1, the others at 0
    for v in sorted(facts.active | set(wrt)):
        if v in facts.set_temps:
            continue
        t = types.get(v)
        if isinstance(t, Array):
            adj_init.append(B.assign(Emitter.bar(v), B.call("np.zeros", B.attr(f"{v}.shape"))))
        else:
            adj_init.append(B.assign(Emitter.bar(v), 1.0 if seeded and v == fn.result else 0.0))
    if seeded and (fn.result in facts.set_temps or isinstance(types.get(fn.result), Array)):
        adj_init.append(B.assign(Emitter.bar(fn.result), 1.0))
    return adj_init


def _assemble(fn, wrt, facts, em, fwd, rev, tbr):
    """The entry as the passes take it: ``(ReverseCode, ReverseContext)``."""
    options = em.options
    top_f, top_i = em.count_f, em.count_i
    em.close_holders(em.region)
    fwd = drop_marked(fwd)
    prologue = _prologue(fn, facts, em, tbr, top_f, top_i)
    value_name = "_value"
    mid = [B.assign(value_name, B.call("float", fn.result), comment="reverse sweep")]
    # tape high-water marks (pushes happen only in the forward sweep), for reports
    mid.append(B.assign("_tape_floats", B.name(FP) if em.uses_ftape else 0))
    mid.append(B.assign("_tape_ints", B.name(IP) if em.uses_itape else 0))
    if em.max_tape_bytes is not None:
        mid = mid[:1] + budget_check(em, fn)
    grads = [B.name(Emitter.bar(w)) for w in wrt]
    # the tapes the entry takes and gives back: none in workspace mode (they are parameters
    # already) nor when nothing is taped
    tapes = () if em.workspace else tuple(t for used, t in ((em.uses_ftape, FT), (em.uses_itape, IT)) if used)
    counts = ("_tape_floats", "_tape_ints") + (tuple(em.checkpoint_ks) if em.max_tape_bytes is not None else ())
    if em.tape_lines is not None:
        counts += (TLF, TLI)
    ret = B.return_(B.tuple_(value_name, gast.Tuple(elts=grads, ctx=gast.Load()),
                             B.tuple_(*counts), *tapes))
    if fwd:
        fwd[0].coarsen_comment = "forward sweep" + (("\n" + fwd[0].coarsen_comment) if getattr(fwd[0], "coarsen_comment", None) else "")
    body = prologue + fwd + mid + _adjoints(fn, wrt, facts) + rev + [ret]
    comment_pass(fwd)
    comment_pass(rev)
    for st in fwd[:1]:
        loc = getattr(st, "_coarsen_loc", None)
        if loc is not None:
            st.coarsen_comment = "forward sweep\n" + loc.text
    params = tuple(fn.params) + ((FT, IT, "_status") if em.workspace else tapes)
    if em.workspace and em.local_tape is not None:
        params += (LFT, LIT)
    types = fn.types
    # the names the compiler made: the emitter's (fresh names, segment symbols) and the
    # adjoint of every variable (the emitter types the variables it makes in fn.types)
    made = frozenset(em.made | {Emitter.bar(v) for v in set(types) | set(facts.active) | set(wrt)})
    # the rank of every array the code names: the variables' (the emitter's own among them)
    # and their adjoints', the tapes'
    ranks = {v: t.ndim for v, t in list(types.items()) + list(em.extra_inits) if isinstance(t, Array)}
    ranks.update({Emitter.bar(v): n for v, n in list(ranks.items())})
    ranks.update({tape: 1 for tape in (FT, IT, LFT, LIT, TLF, TLI)})
    f64 = {v for v, t in types.items() if t == Scalar("f64")}
    variables = {v: t.ndim for v, t in types.items() if isinstance(t, Array)}
    arrays = dict(variables)
    arrays.update({Emitter.bar(v): n for v, n in list(arrays.items())})
    code = ReverseCode(body=body, made=made, helpers=frozenset(), tapes=tapes, params=params)
    ctx = ReverseContext(options=options, fn_params=tuple(fn.params), ranks=ranks, arrays=arrays,
                         floats=frozenset(f64 | {Emitter.bar(v) for v in f64}),
                         variable_ranks=variables,
                         capacity_in_counts=em.max_tape_bytes is None and em.tape_lines is None,
                         types=types,
                         scalarized=frozenset(n for n, who in fn.names.claimed().items() if who == "scalarize")
                         if fn.names is not None else frozenset(),
                         temps=frozenset(fn.temps),
                         adjoint_floats=frozenset(Emitter.bar(v) for v in f64))
    return code, ctx


def _module(entry_name, fn, em, code):
    """The module: imports, runtime helpers, the entry (the taped entry and the entry on
    fresh tapes where it tapes)."""
    funcs = [B.funcdef(taped_name(entry_name) if code.tapes else entry_name, list(code.params),
                       code.body)]
    if code.tapes:
        funcs.append(_fresh_tapes_entry(entry_name, fn.params, list(code.tapes),
                                        {FT: em.count_f, IT: em.count_i}))
    helpers = helper_source(sorted(em.helpers)) if em.helpers else ""
    # import what the code uses (generated modules pass `ruff check`)
    used = {n.id for node in funcs + list(gast.parse(helpers).body if helpers else [])
            for n in gast.walk(node) if isinstance(n, gast.Name)}
    header = gast.parse("".join(line for mod, line in (("math", "import math\n"),
                                                       ("np", "import numpy as np\n"))
                                if mod in used) or "\n")
    helper_mod = gast.parse(helpers) if helpers else gast.Module(body=[], type_ignores=[])
    return gast.Module(body=header.body + helper_mod.body + funcs, type_ignores=[])


def differentiate_ir(fn, wrt, facts, entry_name, options, *, weights=None, tape_lines=False):
    """Build the derivative module for a typed IR function (see the module docstring).

    ``options``: the transform's ``Options`` (``coarsen.transforms.artifact``), as one
    object; the driver reads ``coarsen``, ``budget_seconds``, ``workspace``, ``boundscheck``,
    ``plan``, ``parallel``, ``max_tape_bytes``, ``local_tape``, ``build_target`` and
    ``disable`` from it.
    ``workspace=True`` (for CUDA) requires scalar code only: the tapes are not allocated but
    passed in as the extra parameters ``_ftape``, ``_itape`` (per-thread slices of one
    preallocated workspace) with ``_status`` (an int64 array: ``_status[0] = 1`` when a tape
    would overflow, and the function returns zeros at once).  ``boundscheck=True`` checks
    every array index in the forward sweep before its access (``coarsen.analysis.bounds``):
    an index out of range raises ``IndexError`` naming the source line.  ``plan`` and
    ``weights`` (the cost model's, this function's keyword): each lifted block's strategy,
    the cost model's (``"auto"``) or forced (``coarsen.analysis.strategy``; default weights
    when None).  ``parallel=True`` runs every
    reduction loop in parallel, as a ``numba.prange`` loop is (``coarsen.ad.reverse.parallel``);
    ``em.parallel_notes`` says, per ``prange`` or reduction loop, how it was run.
    ``max_tape_bytes`` (bytes, or None): the loops outside every loop are checkpointed to keep
    the tapes within it (``coarsen.ad.reverse.checkpoint``; ``em.checkpoint_notes`` says, per
    loop, how), the tape counts the entry returns are the call's peak, followed by each
    checkpointed loop's stride and revolve snapshots (0: two levels), and a call whose tapes
    exceed it raises ``MemoryError``
    (``checkpoint.budget_error``).  None, and workspace mode, emit exactly the code without a
    budget.  ``local_tape=(floats, ints)`` (workspace mode only): the entry takes two more
    arrays of those sizes, ``_lftape``/``_litape``, and the loops outside every loop whose
    stretches' tape fits them are taped there (``coarsen.ad.reverse.local_stretch``).
    ``budget_seconds``: the symbolic stage's wall-clock safety net per segment
    (``symbolic.Budget``); a segment that runs past it falls back to fine-grained AD, and
    ``em.timed_out`` lists such segments' locations, whose code then depends on the
    machine's load (``compile_gradient`` does not cache it).
    ``tape_lines=True`` (this function's keyword; not in workspace mode) is the instrumented
    build of ``Gradient.report(..., tape_lines=True)``: the same code plus counters, the tape
    counts the entry returns followed by two int64 arrays, the float and int entries pushed
    per source line ``em.tape_lines[site]`` (``coarsen.ad.reverse.tapes``); False emits no
    counter code at all.  The assembled entry then goes through the cleanup and optimization
    passes of ``coarsen.ad.reverse.pipeline.REVERSE``, in order, but those named in
    ``disable``; ``em.passes_run`` names those that ran."""
    # work on copies: planning puts Segment nodes into the body, closed forms replace loops,
    # and the emitter types the variables it makes
    fn = replace(fn, body=copy.deepcopy(fn.body), types=dict(fn.types),
                 names=fn.names.fork())
    facts = replace(facts, defs=dict(facts.defs), in_loop=set(facts.in_loop))
    if options.workspace:
        for v, t in fn.types.items():
            if isinstance(t, Array):
                raise CoarsenError(f"the CUDA target supports functions of scalars only; {v!r} is an array",
                                   filename=fn.filename,
                                   hint="use target='cpu' (batched with prange) for functions with arrays")
    planned = _plan(fn, facts, options, weights, tape_lines)
    fn = planned.fn
    em, fwd, rev, tbr = _emit(planned, wrt, facts, options)
    code, ctx = _assemble(fn, wrt, facts, em, fwd, rev, tbr)
    start = REVERSE.start - ({Fact.KEPT_FLOAT_TAPE} if options.workspace else set())
    code, ran = REVERSE.run(code, ctx, options.disable, start)
    em.helpers |= code.helpers
    module, ran_module = _module(entry_name, fn, em, code), ()
    if REVERSE.then is not None:    # the module's own passes
        assembled, ran_module = REVERSE.then.run(ReverseModule(module), ctx, options.disable)
        module = assembled.module
    if fresh_check.ENABLED:
        fresh_check.check_names(module, em.supply)
    em.passes_run = ran + ran_module
    em.segments = planned.segments + planned.forward_segments
    # the segments whose plan the symbolic stage's wall-clock safety net decided: their code
    # depends on the machine's load, so the caller must not cache it
    em.timed_out = tuple(loc for loc, budget in planned.budgets if budget.timed_out)
    return module, em
