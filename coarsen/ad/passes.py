"""The pass manager: the cleanup and optimization passes of a mode, named, run from one list.

Requires: nothing above this module (it imports only ``coarsen.errors``); each mode states its
own pipeline (``coarsen.ad.reverse.pipeline``, ``coarsen.ad.forward.pipeline``) from the
passes, which stay in their modules.
Guarantees: a ``Pass`` is a name, a ``run(code, context) -> code`` function (a new code
object; the input is not modified), the ``Fact``s it requires and those it guarantees, and
``applies(context)``: whether the options call for it at all (the scratch arrays are not
for the workspace mode, the scaled adds for the cpu target only).  A ``Pipeline`` is the
ordered tuple of a mode's passes and the facts its start establishes; it checks, when it is
built, that names are unique and that every pass's requirements are met by the start or by
an earlier pass, and ``run(code, context, disable, start)`` (``start``: the facts this
code's start established, some of ``Pipeline.start``) runs the passes in order, skipping
those named in ``disable`` and those that do not apply, checks each requirement against the
facts established so far (``CoarsenError``, internal, where one is missing: a pass switched
off that a later pass needs) and returns ``(code, names of the passes that ran)``.
``Pipeline.check(names)`` validates a user's pass switches (``Options.disable``): a
frozenset of known names, or ``CoarsenError`` naming the unknown ones and the known.  A
pipeline's ``then`` is the next stage's (passes over the assembled module rather than the
entry's statements): its names are known to ``check`` too, the driver runs it.
In the spirit of Numba's pass manager (``numba.core.compiler_machinery``), without its
analysis invalidation: a fact, once established, holds to the end (every pass keeps the
values the function computes, bit for bit, and the facts below are about form).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

from ..errors import CoarsenError


class Fact(Enum):
    """What is known of the code between passes.  The first group is what a mode's start
    establishes, the second what its passes guarantee (each the doc of its pass)."""
    # established by the reverse driver's assembly
    ENTRY = "the entry's statements, prologue to return (gast), and its parameters and tapes"
    MADE_NAMES = "the names the compiler made (a pass may rewrite only those)"
    RANKS = "the rank of every array the code names: variables, adjoints, tapes"
    REVERSE_MARKS = "the reverse loops marked by the emitter (loop_order.REVERSE_MARK)"
    SCALED_MARKS = "the reduction loops' scaled updates marked (scaled_adds.SCALED_MARK)"
    KEPT_FLOAT_TAPE = "a float tape kept across calls, _fpos only decreasing in the reverse sweep"
    MODULE = "the assembled module: imports, runtime helpers, entries (gast)"
    # established by the forward driver (the SIMD form)
    SIMD_ENTRY = "the entry's statements in the SIMD form, lanes last (forward.simd)"
    # guaranteed by the passes
    NO_ZERO_ADDS = "no addition of an adjoint known to be zero"
    NO_DEAD_ADJOINT_CODE = "no dead compiler-made assignment, no empty reservation"
    NO_DEAD_RESETS = "no reset of an adjoint element read by nothing after it"
    STORED_REREADS = "a taped scalar stored into its own fresh array element is re-read from it"
    FIRST_WRITES = "adjoints first written whole by a loop nest are np.empty, assigned"
    FORWARD_ORDER = "the reverse loops whose trips commute count up"
    INVARIANT_SUMS = "an element a loop only adds into is held in a local"
    FUSED_LOOPS = "adjacent loops over the same range are one loop"
    REMATERIALIZED = "rank-one matrix adjoints are recomputed where read, not stored"
    ADJOINT_ROWS = "history adjoints are rings of the rows their reverse loop reaches"
    GUARDED_FIRST_WRITES = "first writes proven by a runtime test are versioned on it"
    SCATTERS_DISTRIBUTED = "reverse loops adding into one array at several offsets run one loop per offset"
    SCRATCH_ON_TAPE = "the reverse sweep's arrays are views of the kept float tape"
    INVARIANT_READS = "loop-invariant element reads are read once, before the loop"
    SCALED_ADD_CALLS = "marked scaled updates are loop helper calls"
    REGION_STORE_CALLS = "whole-array stores into regions are loop helper calls"
    DOT_LOOP_CALLS = "loops that only sum products of two array elements are _dot_acc calls"
    STRIDE_VERSIONS = "loop nests reading broadcast strides are versioned on their being 1"
    VECTOR_EXP = "math.exp calls are calls of the vectorizable helper _exp"
    TAPE_CURSORS = "loops that only push and pop count their tape position unsigned"
    SCALED_READS = "adjoints set by _set_scaled and only read are computed where read"
    LANE_SUMS = "an adjoint a loop only adds into is summed in four lanes after the loop"
    JAMMED = "qualifying loops of the SIMD form run several trips side by side"
    TIDY = "no copy temporaries, folded seeds, no dead stores, no unused helpers"


def always(context):
    """``Pass.applies`` of a pass that runs whatever the options."""
    return True


@dataclass(frozen=True)
class Pass:
    """One named pass: ``run(code, context) -> code``; see the module docstring."""
    name: str
    run: Callable
    requires: frozenset
    guarantees: frozenset
    applies: Callable = always
    doc: str = ""       # one line: what it does (ARCHITECTURE.md's pass list)


@dataclass(frozen=True)
class Pipeline:
    """A mode's passes in the order they run, and the facts its start establishes; ``then``:
    the pipeline of the mode's next stage (the module's passes after the entry's), or None."""
    mode: str
    passes: tuple
    start: frozenset
    then: "Pipeline | None" = None

    def __post_init__(self):
        names = list(self.all_names)
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise CoarsenError(f"internal: the {self.mode} pipeline names {dup} twice")
        known = set(self.start)
        for p in self.passes:
            missing = p.requires - known
            if missing:
                raise CoarsenError(f"internal: the {self.mode} pass {p.name!r} requires "
                                   f"{_facts(missing)}, which nothing before it establishes")
            known |= p.guarantees

    @property
    def names(self):
        """The passes' names, in order."""
        return tuple(p.name for p in self.passes)

    @property
    def all_names(self):
        """The names of this stage's passes and of the stages after it, in order."""
        return self.names + (self.then.all_names if self.then is not None else ())

    def check(self, names):
        """``names`` (an iterable of pass names) as a frozenset, each one of this pipeline's;
        ``CoarsenError`` naming the unknown ones otherwise."""
        given = as_names(names, f"the {self.mode} passes: {', '.join(self.all_names)}")
        unknown = sorted(n for n in given if n not in self.all_names)
        if unknown:
            raise CoarsenError(f"unknown {self.mode} pass {', '.join(map(repr, unknown))} in "
                               "disable", hint=f"the {self.mode} passes: {', '.join(self.all_names)}")
        return given

    def run(self, code, context, disable=frozenset(), start=None):
        """``(code, names of the passes that ran)``: each pass not in ``disable`` that
        applies, in order (see the module docstring).  ``start``: the facts the driver
        established for this code (``self.start`` where None)."""
        facts = set(self.start if start is None else start)
        ran = []
        for p in self.passes:
            if p.name in disable or not p.applies(context):
                continue
            missing = p.requires - facts
            if missing:
                raise CoarsenError(f"internal: the {self.mode} pass {p.name!r} requires "
                                   f"{_facts(missing)}, which a pass switched off established")
            code = p.run(code, context)
            facts |= p.guarantees
            ran.append(p.name)
        return code, tuple(ran)


def as_names(names, hint):
    """``names`` (pass names: one string, or an iterable of them) as a frozenset;
    ``CoarsenError`` with ``hint`` where it is neither."""
    if isinstance(names, str):
        names = (names,)
    try:
        return frozenset(names)
    except TypeError:
        raise CoarsenError(f"disable must be a collection of pass names, not {names!r}",
                           hint=hint) from None


def _facts(facts):
    return ", ".join(sorted(f.name for f in facts))
