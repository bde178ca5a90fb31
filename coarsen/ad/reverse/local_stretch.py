"""Loops checkpointed for CUDA batches: each stretch's tape in thread-local memory.

In workspace mode (the CUDA variant, ``coarsen.ad.reverse.driver``: the tapes are per-thread
slices of one global workspace) with ``em.local_tape = (floats, ints)``, the device function
takes two more arrays, ``_lftape`` (float64) and ``_litape`` (int64) of those sizes, which the
CUDA kernel allocates with ``cuda.local.array`` (``coarsen.lowering.cuda``).

Requires: an emitter in workspace mode with the checkpoint methods (``checkpoint_state``,
``note_checkpoint``; ``coarsen.ad.reverse.checkpoint``) and, for a ``range`` loop outside every
loop, the forward and reverse code of one trip (``bf``, ``br``, balanced trip by trip) and the
floats and ints one trip pushes (``counts``, counted at compile time: ``per_trip`` False).

Guarantees: ``local_stretch_loop`` returns ``(forward, reverse)`` code, or None with the reason
in the report's notes.  The stride ``k`` is a compile-time constant, the most trips whose tape
fits the local arrays (``k * T_f <= floats`` and ``k * T_i <= ints``).  The loop is run this way
only when it lowers the global tape traffic: a stretch of ``k`` trips puts one checkpoint of
the state (``C`` entries) on the global tape instead of its ``k * (T_f + T_i)`` entries, so
only when ``C < k * (T_f + T_i)``.  The code:

* forward: before each stretch, the state is pushed onto the global tape (a checkpoint); the
  stretch's trips run with their pushes going to the local tapes from position 0 (the loop's
  own forward code with the tape names replaced; that tape is dropped);
* reverse: for each stretch from the last, its checkpoint is popped, its trips run again
  (local pushes from 0) and are reversed from the local tapes.

The trips' code is the loop's own on the same values, so the gradient is the same, bit for
bit, as without it (and as the CPU's).  Every stretch runs twice (once more than two-level
checkpointing's last stretch): the price of keeping no stretch's tape across the code after
the loop, so that one pair of local arrays serves every loop.  The global workspace holds
``ceil(n / k)`` checkpoints where it held ``n`` trips' tape; overflow of it is flagged as
before (``_status``).  Local memory is thread-private (in L1 and L2 caches when small); whether
its traffic stays off DRAM is the hardware's, not measured here.
"""
from __future__ import annotations

import copy

import gast

from ...ir.nodes import Const
from ...codegen import build as B
from .tapes import FP, FT, IP, IT

#: the local tapes: parameters of the device function, allocated by the kernel
LFT, LFP, LIT, LIP = "_lftape", "_lfpos", "_litape", "_lipos"
_LOCAL = {FT: LFT, FP: LFP, IT: LIT, IP: LIP}


def to_local(stmts):
    """Copies of ``stmts`` whose tape reads and writes go to the local tapes."""
    out = copy.deepcopy(stmts)
    for st in out:
        for n in gast.walk(st):
            if isinstance(n, gast.Name) and n.id in _LOCAL:
                n.id = _LOCAL[n.id]
    return out


def _p(text):
    return gast.parse(text.strip("\n")).body


def local_stretch_loop(em, s, bf, br, per_trip, counts):
    """The loop's ``(forward, reverse)`` code with local stretch tapes, or None (module
    docstring)."""
    floats, ints = em.local_tape
    if not br:
        return None
    if per_trip:
        em.note_checkpoint(s, "not in local stretches: a trip's tape is not counted at compile time")
        return None
    state = em.checkpoint_state(s, bf)
    if isinstance(state, str):
        em.note_checkpoint(s, f"not in local stretches: {state}")
        return None
    scalars, rebound, inplace, entry = state
    if rebound or inplace or entry[1]:
        em.note_checkpoint(s, "not in local stretches: its state holds arrays")
        return None
    tf, ti = counts
    k = min(floats // tf if tf else 1 << 30, ints // ti if ti else 1 << 30)
    c = len(scalars)
    if k < 1:
        em.note_checkpoint(s, f"not in local stretches: one trip tapes {tf} floats and {ti} ints, "
                              f"more than the local tapes hold ({floats} and {ints})")
        return None
    if c >= k * (tf + ti):
        em.note_checkpoint(s, f"not in local stretches: a checkpoint ({c} entries) is no smaller "
                              f"than a stretch's tape ({k} trips of {tf + ti} entries)")
        return None
    em.uses_ftape = em.uses_itape = True
    for v in scalars + entry[0]:
        if v not in em.fn.params:
            em.extra_inits.append((v, em.types[v]))
    # the reverse sweep runs the trips again: what they read and the loop does not assign
    # must hold its forward value there (as for coarsen.ad.reverse.checkpoint)
    assigned = set().union(*(_names(st, gast.Store) for st in bf)) | _subscripts(bf)
    for v in sorted(set().union(*(_names(st, gast.Load) for st in bf)) - assigned - set(_LOCAL)):
        if v in em.types:
            em.reads_at.setdefault(v, []).append(s)
    nm = {key: em.fresh("_lt" + key) for key in ("n", "m", "c", "a", "z", "t")}
    n, m, c_, a, z = (nm[x] for x in "nmcaz")
    em.made.update({LFP, LIP})
    start, step = s.start, s.step
    plain = isinstance(start, Const) and start.value == 0 and isinstance(step, Const) and step.value == 1

    def trips(body, backwards=False):
        args = [B.X(B.name(z)) - 1, B.X(B.name(a)) - 1, -1] if backwards else [a, z]
        if plain:
            return [B.for_range(s.var, args, body)]
        index = B.assign(s.var, em.val(start) + B.X(B.name(nm["t"])) * em.val(step))
        return [B.for_range(nm["t"], args, [index] + body)]

    save = _save(em, scalars)
    restore = _restore(em, scalars)
    head = _p(f"{a} = {c_} * {k}\n{z} = min({n}, {a} + {k})\n{LFP} = 0\n{LIP} = 0")
    fwd = [B.assign(n, em.trip_count(s))] + _save(em, entry[0])
    fwd += _p(f"{m} = ({n} + {k} - 1) // {k}")
    fwd.append(B.for_range(c_, [m], save + copy.deepcopy(head) + trips(to_local(bf))))
    fwd[0].coarsen_comment = (f"loop in stretches of {k} trips, each stretch's tape in thread-local "
                              f"memory ({LFT}, {LIT}), a checkpoint before each on the global tape")
    again = restore + copy.deepcopy(head) + trips(to_local(bf)) + trips(to_local(br), backwards=True)
    rev = [B.for_range(c_, [B.X(B.name(m)) - 1, -1, -1], again)] + _restore(em, entry[0])
    rev[0].coarsen_comment = "each stretch restored, run again on the local tapes, then reversed"
    em.note_checkpoint(s, f"in local stretches: k = {k} trips a stretch, their tape in thread-local "
                          f"memory ({k * tf} of {floats} floats, {k * ti} of {ints} ints); a checkpoint "
                          f"of {c} entries a stretch on the global tape instead of {k * (tf + ti)}; "
                          f"state: {', '.join(scalars) or 'none'}")
    return fwd, rev


def _names(node, ctx):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, ctx)}


def _subscripts(nodes):
    return {n.value.id for node in nodes for n in gast.walk(node)
            if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store)
            and isinstance(n.value, gast.Name)}


def _save(em, scalars):
    """Push scalars onto the global tapes, checked against the workspace."""
    nf = sum(1 for v in scalars if em.types[v].kind == "f64")
    ni = len(scalars) - nf
    out = []
    if nf:
        out.append(em.reserve_stmt(FT, FP, B.const(nf)))
    if ni:
        out.append(em.reserve_stmt(IT, IP, B.const(ni)))
    for v in scalars:
        tape, pos = (FT, FP) if em.types[v].kind == "f64" else (IT, IP)
        out += [B.assign(B.subscript(tape, B.name(pos)), B.name(v)), B.augassign(pos, "+", 1)]
    return out


def _restore(em, scalars):
    out = []
    for v in reversed(scalars):
        out += em.pop(v)
    return out
