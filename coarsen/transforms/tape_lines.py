"""Tape bytes per source line: a debug count for ``Gradient.report(*args, tape_lines=True)``.

Design: the normal generated code holds no counter (``differentiate_ir(..., tape_lines=False)``
emits none, so it costs nothing).  The report builds an instrumented variant once, for the
artifact's signature and options: the same pipeline as ``gradient.compile_gradient`` (lowering,
types, scalarizing, analyses, reverse mode with the same cost weights), with
``tape_lines=True``, which adds after every push ``_tlf[site] += entries`` (``_tli`` for the
int tape; ``coarsen.ad.reverse.tapes``), and runs it once on the given arguments.  The counts
are exact: each push's own entries, executed, at 8 bytes each.  The pushes of a reduction
loop's trips (popped in the same trip) are not counted, as in ``g.tape_bytes``; with
``max_tape_bytes``, the checkpoints are not counted and the trips run again (the probe and
the reverse sweep's re-runs) count each time they push.  Without a budget the lines add up
to the call's tape (``TapeLines.total_matches``: checked against the instrumented call's own
tape counts, and the instrumented gradient against the normal one's).

Requires: an ``Artifact`` (``coarsen.transforms.artifact``) of a function with Python source, its
arguments converted as its entry takes them (module-level arrays appended), not the CUDA
workspace variant.
Guarantees: ``tape_lines(fn, art, args)`` returns a ``TapeLines``; it writes nothing to the
disk cache of generated sources (``lowering.build`` keeps the instrumented module beside the
others, keyed by its own source) and never changes ``art``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import lowering
from ..ad.reverse import differentiate_ir
from ..analysis.activity import analyze
from ..analysis.costmodel import machine_weights
from ..errors import CoarsenError
from ..frontend.lower import lower
from ..frontend.source import get_source, unwrap
from .prepare import typed_ir

TOP = 10


@dataclass(frozen=True)
class TapeLine:
    filename: str
    lineno: int
    text: str
    float_bytes: int
    int_bytes: int

    @property
    def bytes(self):
        return self.float_bytes + self.int_bytes

    def format(self):
        return (f"{os.path.basename(self.filename)}:{self.lineno}  {self.float_bytes} bytes (floats), "
                f"{self.int_bytes} bytes (ints)  {self.text}")


@dataclass(frozen=True)
class TapeLines:
    """Per source line, the bytes its pushes put on the tapes in one call, most first."""
    lines: tuple                # TapeLine, by bytes (most first), then file and line
    tape_bytes: int             # what the instrumented call's tapes held (``g.tape_bytes``)
    total_matches: bool         # the lines add up to ``tape_bytes`` (without a budget)

    def format(self, top=TOP):
        out = [f"  tape by source line (an instrumented call, {self.tape_bytes} bytes of tape; "
               f"top {min(top, len(self.lines))} of {len(self.lines)} lines):"]
        out += [f"    {line.format()}" for line in self.lines[:top]]
        if not self.lines:
            out.append("    (nothing pushed)")
        total = sum(line.bytes for line in self.lines)
        if not self.total_matches:
            out.append(f"    the lines add up to {total} bytes, the tape held {self.tape_bytes} "
                       "(checkpoints and re-run trips: see coarsen.transforms.tape_lines)")
        return "\n".join(out)


def instrumented_module(fn, art):
    """``(built module, the sites' Locs)`` of the instrumented variant of ``art``."""
    options = art.options
    if options.workspace:
        raise CoarsenError("tape lines are counted on the cpu and python targets only")
    fn = unwrap(fn)
    src = get_source(fn)
    params = [a.id for a in src.node.args.args]
    fn_ir, _ = lower(fn)
    fn_ir = typed_ir(fn_ir, art.types, src, options)
    wrt_ir = tuple(fn_ir.params[params.index(w)] for w in art.wrt)
    facts = analyze(fn_ir, wrt_ir)
    weights = machine_weights() if options.coarsen else None
    module, em = differentiate_ir(fn_ir, wrt_ir, facts, art.entry_name, options, weights=weights,
                                  tape_lines=True)
    source = lowering.render(module, target=options.build_target,
                             header=f"coarsen tape lines (instrumented) of {fn.__qualname__}")
    return lowering.build(source, name=fn.__name__, target=options.build_target), em.tape_lines


def tape_lines(fn, art, args):
    """The ``TapeLines`` of one call of ``art``'s instrumented variant on ``args`` (converted,
    module-level arrays appended).  Raises ``CoarsenError`` when its gradient differs from the
    normal build's (the two must be the same code but for the counters)."""
    mod, sites = instrumented_module(fn, art)
    value, grads, counts = getattr(mod, art.entry_name)(*args)
    ref = art.entry(*args)
    same = _same(value, ref[0]) and len(grads) == len(ref[1]) and \
        all(_same(a, b) for a, b in zip(grads, ref[1]))
    if not same:
        raise CoarsenError(f"internal: the instrumented gradient of {art.function} differs "
                           "from the normal one")
    floats, ints = np.asarray(counts[-2]), np.asarray(counts[-1])
    out = []
    for site, loc in enumerate(sites):
        f, i = int(floats[site]), int(ints[site])
        if not f and not i:
            continue
        if loc is None:
            out.append(TapeLine("<generated>", 0, "", 8 * f, 8 * i))
        else:
            out.append(TapeLine(loc.filename, loc.lineno, loc.text, 8 * f, 8 * i))
    out.sort(key=lambda t: (-t.bytes, t.filename, t.lineno))
    held = 8 * (int(counts[0]) + int(counts[1]))
    total = sum(t.bytes for t in out)
    return TapeLines(tuple(out), held, total == held)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()
