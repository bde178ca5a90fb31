"""The reverse mode's cleanup and optimization passes, in the order they run.

Requires: the entry the driver assembled (``coarsen.ad.reverse.driver``) as ``ReverseCode``
and what the passes read besides as ``ReverseContext``; the pass manager
(``coarsen.ad.passes``).
Guarantees: ``REVERSE`` is the pipeline of the entry's statements and ``REVERSE.then`` that
of the assembled module (``ReverseModule``); each pass wraps one function of its own module
(the rewrite itself and its conditions are that module's docstring) and returns a new
``ReverseCode`` (the input is not modified): the statements, the compiler-made names (a pass
that makes names adds them), the runtime helpers the passes call, the tapes the entry takes
and gives back, and its parameters.  Every pass keeps the values the function computes, bit
for bit, but two that add a sum in four lanes, another rounding of the same sum (``dot_loops``:
the scalarizer's dot products and element sums; ``lane_sums``: an adjoint's sums), and
``vector_exp``, whose exp is within one ulp of the exact value (libm's within half an ulp).
``Options.disable`` names passes to switch off (``REVERSE.check`` validates it); the driver
records the names of those that ran (``Emitter.passes_run``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import gast

from ...codegen import build as B
from ..passes import Fact, Pass, Pipeline
from .adjoint_rows import adjoint_rows
from .cleanup import drop_dead_adjoint_code
from .dead_resets import drop_dead_resets
from .dot_loops import dot_loop_calls
from .first_writes import first_writes, guarded_first_writes
from .fuse_loops import fuse_loops
from .invariant_reads import invariant_reads
from .invariant_sums import invariant_sums
from .lane_sums import lane_sums
from .loop_order import forward_order
from .rematerialize import rematerialize
from .region_stores import region_store_calls
from .scaled_adds import scaled_add_calls
from .scaled_reads import scaled_reads
from .scatter_loops import distribute_scatters
from .scratch import scratch_arrays
from .stored_rereads import stored_rereads
from .vector_exp import vector_exp
from .stride_versions import stride_versions
from .tape_cursors import tape_cursors
from .tapes import FT, IT
from .zero_adjoints import drop_zero_accumulations
from ..tidy import tidy_module


@dataclass(frozen=True)
class ReverseCode:
    """The entry between passes."""
    body: list              # its statements (gast), never modified in place
    made: frozenset         # the names the compiler made
    helpers: frozenset      # the runtime helpers the passes call
    tapes: tuple            # the tapes it takes and gives back (FT, IT), those it uses
    params: tuple           # its parameters


@dataclass(frozen=True)
class ReverseContext:
    """What the passes read besides the code; fixed for the pipeline's run."""
    options: object         # the transform's ``Options`` (workspace, build_target, ...)
    fn_params: tuple        # the function's own parameters
    ranks: dict             # {array name: rank}: variables (the emitter's too), adjoints, tapes
    arrays: dict            # {array name: rank}: the function's variables and their adjoints
    floats: frozenset       # the float64 scalars and their adjoints
    variable_ranks: dict    # {array name: rank}: the function's variables only
    capacity_in_counts: bool    # the counts end with the float tape's capacity (see scratch)
    types: dict             # the function's types (its variables', the emitter's own)
    scalarized: frozenset = frozenset()     # the loop variables the scalarizer made
    temps: frozenset = frozenset()          # the function's compiler temporaries (``fn.temps``)
    adjoint_floats: frozenset = frozenset()  # the adjoints of the float64 scalars


@dataclass(frozen=True)
class ReverseModule:
    """The assembled module between the passes of the module stage (``REVERSE.then``)."""
    module: object          # gast.Module


MADE = frozenset({Fact.ENTRY, Fact.MADE_NAMES})


def _zero_adds(code, ctx):
    return replace(code, body=drop_zero_accumulations(code.body, code.made))


def _dead_adjoint_code(code, ctx):
    return replace(code, body=drop_dead_adjoint_code(code.body, code.made))


def _dead_resets(code, ctx):
    return replace(code, body=drop_dead_resets(code.body, code.made))


def _stored_rereads(code, ctx):
    return replace(code, body=stored_rereads(code.body, ctx.fn_params, ctx.types)[0])


def _vector_exp(code, ctx):
    body, used = vector_exp(code.body)
    return replace(code, body=body, helpers=code.helpers | used)


def _first_writes(code, ctx):
    return replace(code, body=first_writes(code.body, code.made))


def _loop_order(code, ctx):
    return replace(code, body=forward_order(code.body, code.made, ctx.ranks))


def _invariant_sums(code, ctx):
    # (the forward sweep's temporaries too: softmax's row sums ``_t3[i] += e[i, j]``)
    return replace(code, body=invariant_sums(code.body, code.made | ctx.temps))


def _fuse_loops(code, ctx):
    return replace(code, body=fuse_loops(code.body, code.made))


def _rematerialize(code, ctx):
    body, new = rematerialize(code.body, code.made, ctx.arrays, ctx.floats)
    return replace(code, body=body, made=code.made | new)


def _adjoint_rows(code, ctx):
    body, new = adjoint_rows(code.body, code.made, ctx.arrays, params=ctx.fn_params)
    return replace(code, body=body, made=code.made | new)


def _guarded_first_writes(code, ctx):
    body, new = guarded_first_writes(code.body, code.made)
    return replace(code, body=body, made=code.made | new)


def _distribute_scatters(code, ctx):
    return replace(code, body=distribute_scatters(code.body))


def _scratch(code, ctx):
    body, used = scratch_arrays(code.body, code.made, taped=FT in code.tapes,
                                ranks=ctx.variable_ranks)
    tapes, params = code.tapes, code.params
    if used and FT not in tapes:
        # a function that tapes no float gets a float tape for them: the entry takes it and
        # gives it back
        tapes = (FT,) + tapes
        params = ctx.fn_params + tapes
        ret = body[-1]
        body = body[:-1] + [B.return_(B.tuple_(*ret.value.elts[:3], *(B.name(t) for t in tapes)))]
    if used and ctx.capacity_in_counts:
        # the float tape's capacity, last in the counts: the arrays on it do not show in
        # ``_tape_floats``, and a caller that sees it grow keeps the tapes
        elts = body[-1].value.elts
        counts = gast.Tuple(elts=elts[2].elts + [gast.parse(f"{FT}.shape[0]").body[0].value],
                            ctx=elts[2].ctx)
        body = body[:-1] + [gast.Return(value=gast.Tuple(elts=elts[:2] + [counts] + elts[3:],
                                                          ctx=body[-1].value.ctx))]
    return replace(code, body=body, helpers=code.helpers | used, tapes=tapes, params=params)


def _invariant_reads(code, ctx):
    return replace(code, body=invariant_reads(code.body, code.made, (FT, IT)))


def _scaled_adds(code, ctx):
    body, used = scaled_add_calls(code.body)
    return replace(code, body=body, helpers=code.helpers | used)


def _region_stores(code, ctx):
    body, used = region_store_calls(code.body, ctx.types, ctx.arrays)
    return replace(code, body=body, helpers=code.helpers | used)


def _dot_loops(code, ctx):
    # only the scalarizer's dots (long rows of array code): a user's short loop over views
    # paid more for the two views and the call than the lanes saved (rnn's 8- and 16-term
    # rows: 45 -> 104 us a gradient)
    body, used = dot_loop_calls(code.body, ctx.types, ctx.scalarized)
    return replace(code, body=body, helpers=code.helpers | used)


def _lane_sums(code, ctx):
    body, used = lane_sums(code.body, ctx.adjoint_floats)
    return replace(code, body=body, helpers=code.helpers | used)


def _stride_versions(code, ctx):
    return replace(code, body=stride_versions(code.body))


def _tape_cursors(code, ctx):
    return replace(code, body=tape_cursors(code.body))


def _scaled_reads(code, ctx):
    return replace(code, body=scaled_reads(code.body))


def _tidy(code, ctx):
    return replace(code, module=tidy_module(code.module, ctx.types))


def _not_workspace(ctx):
    return not ctx.options.workspace


def _cpu(ctx):
    return ctx.options.build_target == "cpu"


def _host(ctx):
    # the cpu and python targets, which must give the same bits (not the CUDA workspace)
    return not ctx.options.workspace


REVERSE = Pipeline("reverse", (
    Pass("zero_adds", _zero_adds, MADE, frozenset({Fact.NO_ZERO_ADDS}),
         doc="drop `x += z` where the compiler-made z holds 0.0 (zero_adjoints)"),
    Pass("dead_adjoint_code", _dead_adjoint_code, MADE, frozenset({Fact.NO_DEAD_ADJOINT_CODE}),
         doc="drop dead compiler-made assignments and empty reservations (cleanup)"),
    Pass("dead_resets", _dead_resets, MADE, frozenset({Fact.NO_DEAD_RESETS}),
         doc="drop `X_bar[i] = 0.0` after the element's last read (dead_resets)"),
    Pass("stored_rereads", _stored_rereads, frozenset({Fact.ENTRY}), frozenset({Fact.STORED_REREADS}),
         applies=_host,
         doc="a taped scalar stored into its own element of a fresh array re-read from it, not "
             "taped, cpu and python targets (stored_rereads)"),
    Pass("first_writes", _first_writes, MADE, frozenset({Fact.FIRST_WRITES}),
         doc="np.zeros then `+=` once per element becomes np.empty and `=` (first_writes)"),
    Pass("loop_order", _loop_order, MADE | {Fact.RANKS, Fact.REVERSE_MARKS},
         frozenset({Fact.FORWARD_ORDER}),
         doc="a reverse loop whose trips commute counts up (loop_order)"),
    Pass("invariant_sums", _invariant_sums, MADE, frozenset({Fact.INVARIANT_SUMS}),
         doc="an element a loop only adds into is held in a local (invariant_sums)"),
    Pass("fuse_loops", _fuse_loops, MADE, frozenset({Fact.FUSED_LOOPS}),
         doc="adjacent loops over the same range become one (fuse_loops)"),
    Pass("rematerialize", _rematerialize, MADE | {Fact.RANKS}, frozenset({Fact.REMATERIALIZED}),
         doc="rank-one matrix adjoints recomputed where read (rematerialize)"),
    Pass("adjoint_rows", _adjoint_rows, MADE | {Fact.RANKS}, frozenset({Fact.ADJOINT_ROWS}),
         doc="a history's adjoint as a ring of the rows its reverse loop reaches (adjoint_rows)"),
    Pass("guarded_first_writes", _guarded_first_writes, MADE,
         frozenset({Fact.GUARDED_FIRST_WRITES}),
         doc="first writes proven by a runtime test, versioned on it (first_writes)"),
    Pass("distribute_scatters", _distribute_scatters, MADE, frozenset({Fact.SCATTERS_DISTRIBUTED}),
         applies=_cpu,
         doc="a reverse loop adding into one array at several offsets split by offset, cpu target "
             "(scatter_loops)"),
    Pass("scratch_arrays", _scratch, MADE | {Fact.RANKS, Fact.KEPT_FLOAT_TAPE},
         frozenset({Fact.SCRATCH_ON_TAPE}), applies=_not_workspace,
         doc="the reverse sweep's arrays carved from the kept float tape (scratch)"),
    Pass("invariant_reads", _invariant_reads, MADE, frozenset({Fact.INVARIANT_READS}),
         doc="loop-invariant element reads hoisted before the loop (invariant_reads)"),
    Pass("scaled_adds", _scaled_adds, frozenset({Fact.ENTRY, Fact.SCALED_MARKS}),
         frozenset({Fact.SCALED_ADD_CALLS}), applies=_cpu,
         doc="marked `X_bar += s * A` as loop helper calls, cpu target (scaled_adds)"),
    Pass("region_stores", _region_stores, frozenset({Fact.ENTRY}),
         frozenset({Fact.REGION_STORE_CALLS}), applies=_cpu,
         doc="`a[s] = x` / `a[s] += x` of arrays as loop helper calls, cpu target (region_stores)"),
    Pass("dot_loops", _dot_loops, frozenset({Fact.ENTRY}), frozenset({Fact.DOT_LOOP_CALLS}),
         applies=_cpu,
         doc="loops summing products of two array elements (or elements) as _dot_acc (_sum_acc) "
             "calls, cpu target (dot_loops)"),
    Pass("lane_sums", _lane_sums, frozenset({Fact.ENTRY}), frozenset({Fact.LANE_SUMS}),
         applies=_cpu,
         doc="an adjoint a loop only adds into summed in four lanes after it, cpu target "
             "(lane_sums)"),
    Pass("stride_versions", _stride_versions, frozenset({Fact.ENTRY}), frozenset({Fact.STRIDE_VERSIONS}),
         applies=_cpu,
         doc="loop nests reading broadcast strides versioned on their being 1, cpu target "
             "(stride_versions)"),
    Pass("vector_exp", _vector_exp, frozenset({Fact.ENTRY}), frozenset({Fact.VECTOR_EXP}),
         applies=_host,
         doc="math.exp in a loop whose trips are independent as the helper _exp, which LLVM "
             "vectorizes with the loop, cpu and python targets (vector_exp)"),
    Pass("tape_cursors", _tape_cursors, frozenset({Fact.ENTRY}), frozenset({Fact.TAPE_CURSORS}),
         applies=_cpu,
         doc="a loop that only pushes and pops counts its tape position in an unsigned cursor, "
             "cpu target (tape_cursors)"),
    Pass("scaled_reads", _scaled_reads, frozenset({Fact.ENTRY}), frozenset({Fact.SCALED_READS}),
         applies=_cpu,
         doc="an adjoint set by _set_scaled and then only read element by element read as "
             "0.0 + s * A[I] where it is read, cpu target (scaled_reads)"),
), start=frozenset({Fact.ENTRY, Fact.MADE_NAMES, Fact.RANKS, Fact.REVERSE_MARKS,
                    Fact.SCALED_MARKS, Fact.KEPT_FLOAT_TAPE}),
   then=Pipeline("reverse", (
       Pass("tidy", _tidy, frozenset({Fact.MODULE}), frozenset({Fact.TIDY}),
            doc="held expressions reused, copies propagated, seeds folded, dead stores and "
                "unused helpers dropped (ad.tidy)"),
   ), start=frozenset({Fact.MODULE})))
