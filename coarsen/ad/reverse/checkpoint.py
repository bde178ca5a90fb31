"""Checkpointed ``range`` loops: tapes under a memory budget (``differentiate(...,
max_tape_bytes=B)``).

Requires: an emitter with the tape, adjoint and control methods (``coarsen.ad.reverse.
emitter``), ``max_tape_bytes`` set on it, and, for a loop, the forward and reverse code of one
trip as ``ControlMixin.stmt`` emitted them (``bf``, ``br``; the pushes of ``bf`` are balanced by
the pops of ``br`` trip by trip).

Guarantees: ``checkpoint_loop`` returns ``(forward code, reverse code)`` for a ``range`` loop
outside every other loop (not a reduction loop, not in workspace mode), or None where the loop
cannot be checkpointed safely (the reason goes to ``checkpoint_notes``).  The scheme is
two-level checkpointing with a stride ``k``:

* the *state* of the loop is what one trip's forward code reads before it assigns it in that
  trip (an upward-exposed read of the emitted code, so the values the trip's pushes save are
  included): scalars and arrays it rebinds (saved with their shapes), and the float64 arrays
  it stores into (saved and restored in place, so aliases stay valid); a variable that every
  trip assigns and reads before that only to push it (the value its assignment overwrites)
  is not in the checkpoints: only its value before the loop matters, saved once below them
  and restored after the loop's reverse;
* the forward sweep runs the trips in stretches of ``k``: before each stretch but the last it
  pushes the state onto the tapes (a checkpoint), then runs the stretch with taping on, and
  drops that stretch's tape at the next stretch (the last stretch's tape stays);
* the reverse sweep reverses the last stretch from the tape, then, for each stretch from the
  last but one to the first, pops its checkpoint (restoring the state), runs the stretch's
  forward code again (taping into the tape above the remaining checkpoints) and reverses it.

The trips' forward code and reverse code are exactly those of the loop without a budget, run
on the same values in the same order: the gradient is the same, bit for bit.  ``k`` is chosen
at each call, before the loop, after a *probe* (the first two trips are run with taping, the
second on the first one's tape dropped, then undone from a checkpoint): the largest ``k`` with
``base + (ceil(n / k) - 1) * C + k * T <= B / 8`` entries, where ``base`` is the tape already
held, ``C`` the measured size of one checkpoint (the larger of those at entry and after the
probe) and ``T`` the tape of one trip (the exact bound counted at compile time for a body
without nested loops or array pushes, else the larger of the first two trips', measured: a
later trip that tapes more can exceed the estimate, and the final check below then refuses
the call).

When no ``k`` fits (two levels need at least about ``2 * sqrt(n * C * T)`` entries), the loop
runs under binomial (revolve) checkpointing instead (``coarsen.ad.reverse.revolve``: units of
``L`` trips, ``s`` snapshots of ``C + 1`` entries, ``s * (C + 1) + L * T`` within the room left,
the fewest trip runs; the same trips' code, so the same bits).  When even one snapshot and one
trip do not fit, the code raises ``MemoryError(BUDGET_MARK, "file:line", bytes needed,
budget)`` with that minimum, ``8 * (base + C + 1 + T)``, which ``budget_error`` turns into a
``CoarsenError``; the driver checks the peak after the forward sweep the same way (and a revolve
loop once more after its reverse).  The probe's own peak, ``base + C + T`` at most, is below
that minimum.  The entry returns, per loop, ``k`` (the unit ``L`` under revolve) and the
revolve's snapshots (0: two-level).

The peak: the tapes only grow in the forward sweep except at the start of a stretch, where the
previous stretch's tape is dropped, so the peak is sampled at the end of each stretch (and of
the probe's trips and checkpoint) into ``_peakf``/``_peaki``; the reverse sweep re-runs a
two-level stretch on fewer checkpoints than the forward sweep held under it, so it never
exceeds that peak (a revolve loop samples in both sweeps).

The re-run reads, in the reverse sweep, what the trips read and the loop does not assign: the
loop statement is added to the emitter's ``reads_at`` for those names, so the recording
analysis restores them where later code overwrites them.  The report's notes
(``checkpoint_notes``) say, per loop outside every loop, how it was checkpointed or why not.
"""
from __future__ import annotations

import copy
import linecache

import gast

from ...analysis.activity import shown
from ...errors import CoarsenError
from ...ir.nodes import Array, Assign, Const, Scalar, Store, walk
from ...codegen import build as B
from ...codegen import runtime as R
from .cleanup import drop_marked
from .local_stretch import local_stretch_loop
from .revolve import RevolvePieces, copies, revolve_forward, revolve_reverse
from .tapes import FP, FT, IP, IT, TL_MARK, TLF, TLI

#: the first argument of the MemoryError the generated code raises when the budget cannot be met
BUDGET_MARK = "coarsen: max_tape_bytes"
#: the last argument of that MemoryError when its number is the call's peak, not a minimum:
#: with a checkpointed loop, or with none
PEAK_CHECKPOINTED, PEAK_UNCHECKED = "peak", "peak, no loop checkpointed"
#: the peak entries of the float and int tapes (checkpoints included), sampled in the forward sweep
PEAK_F, PEAK_I = "_peakf", "_peaki"

# the tapes, and the tape-lines counters of the instrumented build (coarsen.transforms.tape_lines): never
# state; the counters count the re-runs' pushes too
_TAPES = frozenset({FT, FP, IT, IP, TLF, TLI, TL_MARK})


def budget_error(exc, budget):
    """The ``CoarsenError`` for a ``MemoryError`` raised by generated code whose tapes cannot
    fit the budget (see the module docstring), or None for any other exception."""
    args = getattr(exc, "args", ())
    if not (isinstance(exc, MemoryError) and len(args) in (4, 5) and args[0] == BUDGET_MARK):
        return None
    where, need = str(args[1]), int(args[2])
    filename, _, line = where.rpartition(":")
    lineno = int(line) if line.isdigit() else None
    source = linecache.getline(filename, lineno) if lineno else None
    if len(args) == 5:
        # the peak of the whole call (budget_check, _REVERSE_PEAK): not a minimum
        if args[4] == PEAK_UNCHECKED:
            why = ("no loop of the function is checkpointed (while loops, loops with a break or "
                   "an early return, loops whose index is read after them, loops inside other "
                   "loops and loops that write arrays other variables may alias are not: "
                   "g.report() says why for each), so its whole tape must fit")
        else:
            at = str(args[4]).partition(":")[2]
            loops = (f"the loops at lines {at.replace(',', ', ')} of {filename}" if "," in at else
                     f"the loop at {filename}:{at}" if at else f"the loop at {where}")
            why = (f"the checkpoint strides of {loops} are chosen to fit the budget from "
                   "their first trips, each as if it were the only tape, and later trips that "
                   "tape more, or the code after a loop, took the tapes past it; the strides "
                   "are chosen anew for each budget, so a budget between this one and the peak "
                   "may fail the same way")
        return CoarsenError(
            f"max_tape_bytes={budget} cannot be met: this call's tapes reached {need} bytes; {why}",
            filename=filename or None, lineno=lineno, source_line=source or None,
            hint=f"pass max_tape_bytes=None, or a budget well above {need} bytes (check it on "
                 "the inputs you will use), or tape less per trip")
    return CoarsenError(
        f"max_tape_bytes={budget} cannot be met: {where} needs at least {need} bytes of tape "
        "(the tape held before the loop, one checkpoint of its state and one trip's tape; or "
        "the tape of the whole call)",
        filename=filename or None, lineno=lineno, source_line=source or None,
        hint=f"pass max_tape_bytes={need} or more (or None), or tape less per trip "
             "(fewer values carried or overwritten in the loop body)")


def budget_check(em, fn):
    """The driver's statements after the forward sweep under a budget: ``_tape_floats`` and
    ``_tape_ints``, the peak entries of the call (checkpoints included; the peak is the forward
    sweep's, see the module docstring), and a ``MemoryError`` (``BUDGET_MARK``) when they
    exceed ``em.max_tape_bytes``."""
    peaked = bool(em.checkpoint_ks)
    out = []
    for name, used, pos, peak in (("_tape_floats", em.uses_ftape, FP, PEAK_F),
                                  ("_tape_ints", em.uses_itape, IP, PEAK_I)):
        value = (B.call("max", peak, pos) if peaked else B.name(pos)) if used else B.const(0)
        out.append(B.assign(name, value))
    if em.uses_ftape or em.uses_itape:
        lines = [ln for ln, text in em.checkpoint_notes if text.startswith("checkpointed")]
        first = min((st.loc.lineno for st in walk(fn.body)), default=0)
        where = f"{fn.filename}:{lines[-1] if lines else first}"
        kind = f"{PEAK_CHECKPOINTED}:{','.join(map(str, lines))}" if lines else PEAK_UNCHECKED
        out += _parse(f"if 8 * (_tape_floats + _tape_ints) > {int(em.max_tape_bytes)}:\n"
                      f"    raise MemoryError({BUDGET_MARK!r}, {where!r}, "
                      f"8 * (_tape_floats + _tape_ints), {int(em.max_tape_bytes)}, {kind!r})")
    return out


# ---------------------------------------------------------------------------- analysis of code
def _stores(node):
    """Names the statement assigns (``x = ...``, tuple targets, loop targets, ``x += ...``)."""
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}


def _loads(node):
    return {n.id for n in gast.walk(node) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


def _subscript_stores(nodes):
    """Arrays the code writes elements of (``a[i] = ...``, ``a[i] += ...``)."""
    out = set()
    for node in nodes:
        for n in gast.walk(node):
            if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) \
                    and isinstance(n.value, gast.Name):
                out.add(n.value.id)
    return out


def _is_push(st):
    """Is ``st`` a push onto a tape (``_ftape[_fpos] = v``, ``_itape[_ipos] = v.shape[0]``,
    ``_ftape, _fpos = _push_array(_ftape, _fpos, v)``)?  Its reads save a value, nothing more."""
    if not isinstance(st, gast.Assign) or len(st.targets) != 1:
        return False
    target = st.targets[0]
    if isinstance(target, gast.Subscript):
        return isinstance(target.value, gast.Name) and target.value.id in (FT, IT)
    return isinstance(target, gast.Tuple) and [getattr(e, "id", None) for e in target.elts] == [FT, FP] \
        and isinstance(st.value, gast.Call) and getattr(st.value.func, "id", None) == "_push_array"


def exposed_reads(stmts, defined=frozenset(), pushes=True):
    """``(exposed, defined after)``: the names the code reads before it surely assigns them
    (conservatively: a loop's body may run no trips, an ``if`` defines what both arms do).
    ``pushes=False`` leaves out what pushes onto the tapes read (``_is_push``)."""
    exposed, defined = set(), set(defined)
    for st in stmts:
        if not pushes and _is_push(st):
            defined |= _stores(st)
            continue
        if isinstance(st, gast.If):
            exposed |= _loads(st.test) - defined
            e1, d1 = exposed_reads(st.body, defined, pushes)
            e2, d2 = exposed_reads(st.orelse, defined, pushes)
            exposed |= e1 | e2
            defined = d1 & d2
        elif isinstance(st, (gast.For, gast.While)):
            head = st.iter if isinstance(st, gast.For) else st.test
            exposed |= _loads(head) - defined
            inner = defined | (_stores(st.target) if isinstance(st, gast.For) else set())
            e, _ = exposed_reads(st.body, inner, pushes)
            exposed |= e
        elif isinstance(st, (gast.Assign, gast.AugAssign)):
            exposed |= _loads(st) - defined
            if isinstance(st, gast.AugAssign) and isinstance(st.target, gast.Name):
                exposed |= {st.target.id} - defined
            defined |= _stores(st)
        else:
            exposed |= _loads(st) - defined
            defined |= _stores(st)
    return exposed, defined


class CheckpointMixin:
    max_tape_bytes = None       # the budget in bytes (None: no checkpointing)
    local_tape = None           # workspace mode: (floats, ints) of the local stretch tapes
    checkpoint_notes = ()       # [(line, text)] for the report, set per emission
    checkpoint_ks = ()          # per checkpointed loop, in order: the names of its stride and revolve snapshots

    def note_checkpoint(self, s, text):
        notes = list(self.checkpoint_notes)
        if all(line != s.loc.lineno for line, _ in notes):
            notes.append((s.loc.lineno, text))
        self.checkpoint_notes = notes

    # ------------------------------------------------------------------ the loop's state
    def checkpoint_state(self, s, body):
        """``(scalars, rebound arrays, in-place arrays, entry)`` a trip's code ``body``
        carries, or a string saying why the loop cannot be checkpointed.  ``entry``: the
        variables whose value before the loop only is saved (once, below the checkpoints, and
        restored after the loop's reverse), as a ``(scalars, arrays, [])`` state."""
        views = set(self.fn.views) | set(self.fn.views.values())
        for st in walk(s.body):
            name = st.target if isinstance(st, Assign) else st.array if isinstance(st, Store) else None
            if name is not None and name in views:
                return (f"it assigns or writes {shown(self.fn, name)} at line {st.loc.lineno} "
                        f"(`{st.loc.text.strip()}`), an array that another variable may alias "
                        "(a view, an array with views, or a custom rule's residual)")
        exposed, surely = exposed_reads(body, {s.var})
        computed, _ = exposed_reads(body, {s.var}, pushes=False)
        stored = set().union(*(_stores(st) for st in body)) if body else set()
        elements = _subscript_stores(body) - _TAPES
        # a variable every trip assigns, read before that only by the pushes that save it: the
        # value a stretch starts with is saved and restored by the stretch's own push and pop,
        # and no trip's code reads it; only the value before the loop matters (saved once)
        once = sorted((stored & exposed & surely) - computed - _TAPES - {s.var})
        scalars, rebound, inplace = [], [], []
        for v in sorted((stored & exposed) - _TAPES - {s.var} - set(once)):
            t = self.types.get(v)
            if t is None:
                return f"internal: no type for {v!r}"
            (rebound if isinstance(t, Array) else scalars).append(v)
        once_scalars, once_arrays = [], []
        for v in once:
            t = self.types.get(v)
            if t is None:
                return f"internal: no type for {v!r}"
            (once_arrays if isinstance(t, Array) else once_scalars).append(v)
        for v in sorted(elements - stored):
            t = self.types.get(v)
            if not isinstance(t, Array) or t.dtype != "f64":
                return f"it writes elements of {v!r}, which is not a float64 array"
            if v in views:
                return (f"it writes elements of {shown(self.fn, v)}, an array that another "
                        "variable may alias (a view, or an array with views)")
            inplace.append(v)
        return scalars, rebound, inplace, (once_scalars, once_arrays, [])

    def save_state(self, scalars, rebound, inplace):
        """Forward code pushing the state onto the tapes (a checkpoint)."""
        nf = sum(1 for v in scalars if self.types[v].kind == "f64")
        ni = len(scalars) - nf + sum(self.types[v].ndim for v in rebound)
        out = []
        if nf:
            out.append(B.assign(FT, B.call(self.helper("_reserve"), FT, B.X(B.name(FP)) + nf)))
        if ni:
            out.append(B.assign(IT, B.call(self.helper("_reserve"), IT, B.X(B.name(IP)) + ni)))
        for v in scalars:
            tape, pos = (FT, FP) if self.types[v].kind == "f64" else (IT, IP)
            out += [B.assign(B.subscript(tape, B.name(pos)), B.name(v)), B.augassign(pos, "+", 1)]
        for v in rebound:
            out.append(B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, v)))
            for d in range(self.types[v].ndim):
                out += [B.assign(B.subscript(IT, B.name(IP)), B.subscript(B.attr(f"{v}.shape"), d)),
                        B.augassign(IP, "+", 1)]
        for v in inplace:
            out.append(B.assign(B.tuple_(FT, FP), B.call(self.helper("_push_array"), FT, FP, v)))
        return out

    def restore_state(self, scalars, rebound, inplace):
        """Code popping a checkpoint off the tapes into the state (``save_state`` undone)."""
        out = []
        for v in reversed(inplace):
            fn = self.helper(R.pop_into(self.types[v].ndim))
            out.append(B.assign(FP, B.call(fn, FT, FP, v)))
        for v in reversed(rebound):
            out += self.pop(v, whole=True)     # save_state pushed the whole array
        for v in reversed(scalars):
            out += self.pop(v)
        return out

    def local_stretch_loop(self, s, bf, br, per_trip, counts):
        """CUDA: the loop in stretches taped in thread-local memory, or None
        (``coarsen.ad.reverse.local_stretch``)."""
        return local_stretch_loop(self, s, bf, br, per_trip, counts)

    # ------------------------------------------------------------------ the loop
    def checkpoint_loop(self, s, bf, br, reserve, per_trip, counts):
        """The checkpointed loop's ``(forward, reverse)`` code, or None (see the module
        docstring).  ``reserve``/``per_trip``: the trip's reservation as ``leave_region`` gave
        it (per trip: inside each trip; else for all trips, replaced here by one per stretch);
        ``counts``: the floats and ints one trip pushes at most (without nested loops)."""
        if not br:
            return None
        state = self.checkpoint_state(s, bf)
        if isinstance(state, str):
            self.note_checkpoint(s, f"not checkpointed: {state}")
            return None
        scalars, rebound, inplace, entry = state
        self.uses_ftape = self.uses_itape = True
        for v in scalars + rebound + entry[0] + entry[1]:
            if v not in self.fn.params:
                self.extra_inits.append((v, self.types[v]))
        # the reverse sweep runs the trips' forward code again: what it reads and the loop
        # does not assign must hold its forward value there (recorded where later code
        # overwrites it, coarsen.analysis.recording)
        assigned = set().union(*(_stores(st) for st in bf)) | _subscript_stores(bf)
        for v in sorted(set().union(*(_loads(st) for st in bf)) - assigned - _TAPES):
            if v in self.types:
                self.reads_at.setdefault(v, []).append(s)
        nm = {key: self.fresh("_ck" + key) for key in
              ("n", "k", "m", "c", "a", "z", "t", "bf", "bi", "pf", "pi", "c0", "c1", "t0", "w",
               "rv", "u", "v", "v0", "j", "b", "d", "qf", "qi")}
        for v in nm.values():
            self.types[v] = Scalar("i64")
        # per loop, the stride k and the revolve's snapshots (0: two-level) of the last call
        self.checkpoint_ks = list(self.checkpoint_ks) + [nm["k"], nm["rv"]]
        for v in ("k", "rv"):
            self.extra_inits.append((nm[v], Scalar("i64")))     # 0 where the loop does not run
        for h in ("_reserve", "_revolve_mid", "_revolve_units"):
            self.helper(h)
        for peak in (PEAK_F, PEAK_I):
            self.extra_inits.append((peak, Scalar("i64")))
            self.made.add(peak)
        self.made.add("_disc")
        start, step = s.start, s.step
        plain = isinstance(start, Const) and start.value == 0 and isinstance(step, Const) and step.value == 1

        def trips(first, stop, body, backwards=False):
            """``body`` for the trips ``first .. stop - 1`` (indices from 0), the loop variable set."""
            args = [B.X(B.name(stop)) - 1, B.X(B.name(first)) - 1, -1] if backwards else [first, stop]
            if plain:
                return [B.for_range(s.var, args, body)]
            index = B.assign(s.var, self.val(start) + B.X(B.name(nm["t"])) * self.val(step))
            return [B.for_range(nm["t"], args, [index] + body)]

        def stretch_reserve(first, stop):
            if per_trip:
                return []
            out = []
            for tape, pos, k in ((FT, FP, counts[0]), (IT, IP, counts[1])):
                if k:
                    size = B.X(B.name(stop)) - B.X(B.name(first))
                    out.append(self.reserve_stmt(tape, pos, B.const(k), size))
            return out

        trip_body = (reserve if per_trip else []) + bf

        def body_copy():
            return drop_marked(copy.deepcopy(trip_body))

        save = self.save_state(scalars, rebound, inplace)
        restore = self.restore_state(scalars, rebound, inplace)
        sample = [B.assign(PEAK_F, B.call("max", PEAK_F, FP)), B.assign(PEAK_I, B.call("max", PEAK_I, IP))]
        where = f"{s.loc.filename}:{s.loc.lineno}"
        budget = int(self.max_tape_bytes) // 8
        static_t = None if per_trip else counts[0] + counts[1]
        n, k, m, c, a, z = (nm[x] for x in "nkmcaz")
        # the probe: the first two trips with taping, measured, then undone from a checkpoint
        probe = [B.assign(nm["bf"], FP), B.assign(nm["bi"], IP)] + copy.deepcopy(save)
        probe += [B.assign(nm["c0"], _parse(f"{FP} + {IP} - {nm['bf']} - {nm['bi']}")[0].value),
                  B.assign(nm["pf"], FP), B.assign(nm["pi"], IP), B.assign(a, 0), B.assign(z, 1)]
        probe += stretch_reserve(a, z) + trips(a, z, body_copy())
        probe += [B.assign(nm["t0"], _parse(f"{FP} + {IP} - {nm['pf']} - {nm['pi']}")[0].value)]
        probe += copy.deepcopy(sample)
        # the second trip too (the first one's pushes may save values not yet of full size),
        # on the first one's tape dropped: the probe holds one checkpoint and one trip at most
        second = _parse(f"{FP} = {nm['pf']}\n{IP} = {nm['pi']}") + [B.assign(a, 1), B.assign(z, 2)]
        second += stretch_reserve(a, z) + trips(a, z, body_copy())
        second += _parse(f"{nm['t0']} = max({nm['t0']}, {FP} + {IP} - {nm['pf']} - {nm['pi']})")
        probe.append(B.if_(B.compare(B.name(n), ">", B.const(1)), second + copy.deepcopy(sample)))
        probe += [B.assign(FP, nm["pf"]), B.assign(IP, nm["pi"])]
        probe.append(B.assign(nm["w"], _parse(f"{FP} + {IP}")[0].value))
        probe += copy.deepcopy(save)
        probe += [B.assign(nm["c1"], _parse(f"{FP} + {IP} - {nm['w']}")[0].value)] + copy.deepcopy(sample)
        probe += [B.assign(FP, nm["pf"]), B.assign(IP, nm["pi"])] + copy.deepcopy(restore)
        t_expr = nm["t0"] if static_t is None else f"max({nm['t0']}, {static_t})"
        C = f"max({nm['c0']}, {nm['c1']})"
        probe += _parse(_CHOOSE.format(n=n, k=k, base=f"({nm['bf']} + {nm['bi']})", C=C, T=t_expr,
                                       B=budget, mark=repr(BUDGET_MARK), where=repr(where),
                                       s=nm["w"], rv=nm["rv"]))
        if not per_trip:
            # the room of the checkpoints and of the longest stretch (unit), once: reserving per
            # stretch would grow the tapes geometrically (twice the room) for one checkpoint more
            for tape, pos, kk in ((FT, FP, counts[0]), (IT, IP, counts[1])):
                if kk:
                    probe += _parse(f"if {nm['rv']} == 0:\n"
                                    f"    {tape} = _reserve({tape}, {pos} + (({n} + {k} - 1) // {k} - 1) * "
                                    f"{C} + {kk} * {k})\n"
                                    f"else:\n"
                                    f"    {tape} = _reserve({tape}, {pos} + {nm['rv']} * ({C} + 1) + {kk} * {k})")
        fwd = [B.assign(n, self.trip_count(s)), B.assign(k, 1), B.assign(nm["rv"], 0)]
        fwd += self.save_state(*entry)
        fwd.append(B.if_(B.compare(B.name(n), ">", B.const(0)), probe))
        two = _parse(f"{m} = ({n} + {k} - 1) // {k}\n{nm['pf']} = {FP}\n{nm['pi']} = {IP}")
        stretch = _parse(f"{FP} = {nm['pf']}\n{IP} = {nm['pi']}")
        stretch.append(B.if_(B.compare(B.name(c), "<", B.X(B.name(m)) - 1),
                             copy.deepcopy(save) + [B.assign(nm["pf"], FP), B.assign(nm["pi"], IP)]))
        stretch += _parse(f"{a} = {c} * {k}\n{z} = min({n}, {a} + {k})")
        stretch += stretch_reserve(a, z) + trips(a, z, trip_body) + copy.deepcopy(sample)
        two.append(B.for_range(c, [m], stretch))
        two[0].coarsen_comment = f"two-level: trips in stretches of {k}, a checkpoint before each but the last"
        fwd[0].coarsen_comment = (f"checkpointed loop (max_tape_bytes={self.max_tape_bytes}): two-level, "
                                  f"or binomial (revolve) when two levels do not fit ({nm['rv']} snapshots)")
        pieces = RevolvePieces(
            save=copies(save), restore=copies(restore),
            unit=lambda: stretch_reserve(a, z) + trips(a, z, body_copy()),
            unit_reverse=lambda: trips(a, z, copy.deepcopy(br), backwards=True),
            sample=copies(sample), names=nm,
            budget_check=lambda: _parse(_REVERSE_PEAK.format(
                B=int(self.max_tape_bytes), mark=repr(BUDGET_MARK), where=repr(where), pf=PEAK_F, pi=PEAK_I)))
        fwd.append(B.if_(B.compare(B.name(nm["rv"]), "==", B.const(0)), two, revolve_forward(pieces)))
        # the reverse sweep: the last stretch from the tape, the others run again first
        again = copy.deepcopy(restore) + stretch_reserve(a, z) + trips(a, z, body_copy())
        rev_body = _parse(f"{a} = {c} * {k}\n{z} = min({n}, {a} + {k})")
        rev_body.append(B.if_(B.compare(B.name(c), "<", B.X(B.name(m)) - 1), again))
        rev_body += trips(a, z, br, backwards=True)
        two_rev = [B.for_range(c, [B.X(B.name(m)) - 1, -1, -1], rev_body)]
        two_rev[0].coarsen_comment = "two-level: each stretch restored and run again, then reversed"
        rev = [B.if_(B.compare(B.name(nm["rv"]), "==", B.const(0)), two_rev, revolve_reverse(pieces))]
        rev += self.restore_state(*entry)
        rev[0].coarsen_comment = "checkpointed loop: two-level or binomial (revolve), as chosen"
        how = ("tape per trip counted at compile time" if static_t is not None
               else "tape per trip measured on the first two trips")
        self.note_checkpoint(s, f"checkpointed (two-level: stretches of k trips, k the largest that "
                                f"fits max_tape_bytes={self.max_tape_bytes} with the checkpoints, "
                                f"chosen at each call, or binomial (revolve) checkpointing in units "
                                f"of k trips when no k fits; {how}; state: "
                                f"{', '.join(scalars + rebound + inplace) or 'none'})")
        return fwd, rev


# choose the stride k (module docstring): the largest k with
# base + (ceil(n / k) - 1) * C + k * T <= B entries, else revolve's units and snapshots
# (s * (C + 1) + L * T <= B - base), else MemoryError naming the loop and that minimum
_CHOOSE = '''
{s} = {T}
if {base} + {n} * {s} <= {B} or {s} == 0:
    {k} = {n}
else:
    {k} = 0
    _disc = float({B} - {base}) * float({B} - {base}) - 4.0 * float({s}) * float({n}) * float({C})
    if _disc >= 0.0 and {B} > {base}:
        {k} = min({n}, int((float({B} - {base}) + math.sqrt(_disc)) / (2.0 * float({s}))))
    while {k} >= 1 and {base} + (({n} + {k} - 1) // {k} - 1) * {C} + {k} * {s} > {B}:
        {k} -= 1
    if {k} < 1:
        if {B} - {base} < {C} + 1 + {s}:
            raise MemoryError({mark}, {where}, 8 * ({base} + {C} + 1 + {s}), 8 * {B})
        {k}, {rv} = _revolve_units({n}, {B} - {base}, {C} + 1, {s})
'''

# after a revolve loop's reverse (coarsen.ad.reverse.revolve): the call's peak includes the
# reverse sweep's (its descents may hold more snapshots than the forward sweep's)
_REVERSE_PEAK = '''
_tape_floats = max(_tape_floats, {pf})
_tape_ints = max(_tape_ints, {pi})
if 8 * (_tape_floats + _tape_ints) > {B}:
    raise MemoryError({mark}, {where}, 8 * (_tape_floats + _tape_ints), {B}, "peak")
'''


def _parse(text):
    return gast.parse(text.strip("\n")).body
