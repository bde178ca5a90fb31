"""The reverse-pass emitter: one object per emission, holding the state the jobs share.

Requires: a typed ``ir.Function``, the differentiated parameters, activity ``Facts``, the
variables to be recorded (``coarsen.analysis.recording``).
Guarantees: ``Emitter.block(stmts)`` returns the forward and reverse code of a statement list.
The jobs live in their own modules, mixed in here: tapes (``tapes``), adjoint statements
(``adjoints``), segment steps (``steps``), control-flow reversal (``control``), reduction loops reversed
trip by trip (``fused``), checkpointed loops under a tape budget (``checkpoint``), loops
preaccumulated by forward mode (``forward_loops``).  The emitter
never changes the IR it reads: variables it makes (trip counters, closed-form temporaries) get
their types in ``self.types``, a copy of ``fn.types``.
It takes the transform's ``Options`` as one object (``options``: ``workspace``,
``parallel_all``, ``max_tape_bytes`` and ``local_tape`` are read from it) and what the driver
decided before the emission as one ``EmitterInputs``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import gast

from ...analysis.costmodel import default_weights
from ...ir.nodes import (Array, Var)
from ...analysis.activity import intact
from ...codegen import build as B
from ..operands import OperandQueries
from ...codegen.build import X
from ...analysis.recording import find_int_recomputable, find_recomputable, rereads_for_steps
from ...analysis.reductions import find_reduction_loops
from .adjoints import AdjointMixin
from .checkpoint import CheckpointMixin
from .control import ControlMixin
from .forward_loops import ForwardLoopMixin
from .fused import FusedMixin
from .steps import SegmentMixin
from .tapes import TapeMixin


@dataclass(frozen=True)
class EmitterInputs:
    """What the reverse driver decided before an emission (one round of its tape fixpoint)."""
    cheap: dict = field(default_factory=dict)   # float temporaries the reverse sweep re-evaluates
    lifted_names: dict = field(default_factory=dict)    # canonical -> real names (ad.canonical)
    weights: object = None          # the cost model's weights (default weights where None)
    tape_sites: frozenset = frozenset()     # ids of the assignments that tape (``taped_at``)
    shape_recorded: frozenset = frozenset()     # arrays recorded by their shape alone
    bounds: object = None           # the index checks' plan (``analysis.bounds``), or None
    tape_lines: bool = False        # count the tape's entries per source line (not workspace)


class Emitter(OperandQueries, TapeMixin, AdjointMixin, SegmentMixin, ControlMixin, FusedMixin,
              CheckpointMixin, ForwardLoopMixin):
    def __init__(self, fn, wrt, facts, tbr=frozenset(), int_recompute=None, reductions=None,
                 supply=None, *, options, inputs=EmitterInputs()):
        self.fn = fn
        self.options = options
        self.cheap = inputs.cheap
        self.lifted_names = inputs.lifted_names
        self.weights = inputs.weights if inputs.weights is not None else default_weights()
        self.tape_sites = inputs.tape_sites
        self.shape_recorded = inputs.shape_recorded
        self.bounds = inputs.bounds
        # the sites of the tape's pushes, counted per source line (``tapes``), or None
        self.tape_lines = [] if inputs.tape_lines and not options.workspace else None
        # names from a fork of the module's supply (each try of the tape fixpoint spells its
        # names alike), or from the supply of the emission this one is part of
        self.supply = fn.names.fork() if supply is None else supply
        self.types = fn.types
        self.wrt = list(wrt)
        self.f = facts
        self.active = facts.active
        self.tbr = set(tbr)
        self.helpers = set()
        self.counter = 0
        self.made = set()         # every name this emitter made (fresh names, segment symbols)
        self.uses_ftape = False
        self.uses_itape = False
        self.extra_inits = []     # (name, type) of emitter-made variables to pre-initialize
        self.depth = 0
        self.recompute = find_recomputable(fn, facts)
        self.step_rereads = rereads_for_steps(fn, self.recompute)
        # the analyses of coarsen.analysis.recording and .reductions (the driver computes
        # them once for the emissions of its tape fixpoint)
        self.int_recompute = find_int_recomputable(fn, facts) if int_recompute is None else int_recompute
        self.reductions = find_reduction_loops(fn, facts) if reductions is None else reductions
        self.fused = set()        # the reduction loops emitted trip by trip (coarsen.ad.reverse.fused)
        self.result_reads = set()  # assignments whose reverse reads their own result (adjoints)
        self.expanding = False
        self.reads_at = {}
        self.region = self.new_region()
        self.defined = set(fn.params)   # set on every path to the statement being emitted

    # ------------------------------------------------------------------ options
    @property
    def workspace(self):
        """CUDA's workspace mode: the tapes are slices of one preallocated workspace."""
        return self.options.workspace

    @property
    def parallel_all(self):
        """Every reduction loop run in parallel blocks (``coarsen.ad.reverse.parallel``)."""
        return self.options.parallel

    @property
    def max_tape_bytes(self):
        """The tape budget (``coarsen.ad.reverse.checkpoint``); None in workspace mode, whose
        tapes are fixed slices."""
        return None if self.options.workspace else self.options.max_tape_bytes

    @property
    def local_tape(self):
        """``(floats, ints)`` of the local stretch tapes (workspace mode only), or None."""
        return self.options.local_tape if self.options.workspace else None

    # ------------------------------------------------------------------ naming
    def fresh(self, base):
        self.counter += 1
        while f"{base}{self.counter}" in self.supply:
            self.counter += 1
        name = self.supply.take(f"{base}{self.counter}", "reverse")
        self.made.add(name)
        return name

    @staticmethod
    def bar(name):
        return name + "_bar"

    def taped(self, name):
        return name in self.tbr and not intact(self.f, name)

    def taped_at(self, s):
        """Must the assignment ``s`` save the value it overwrites?  Arrays: when the variable
        is to be recorded at all; scalars: when ``s`` may overwrite a value the reverse sweep
        still reads (``_tape_sites``)."""
        if isinstance(self.types.get(s.target), Array):
            return self.taped(s.target)
        return id(s) in self.tape_sites and not intact(self.f, s.target)

    def helper(self, name):
        self.helpers.add(name)
        return name

    # ------------------------------------------------------------------ operands
    def val(self, operand):
        if isinstance(operand, Var):
            if self.expanding and operand.name in self.int_recompute:
                return X(self.int_read(operand.name), False)
            if self.in_reverse and operand.name in self.recompute:
                s = self.recompute[operand.name]
                return X(B.subscript(s.args[0].name, self.index_node(s.index)), False)
            if self.in_reverse and operand.name in self.cheap:
                return X(B.ex(self.primal(self.cheap[operand.name])), False)
            return X(B.name(operand.name), self.is_arr(operand))
        return X(B.const(operand.value))

    in_reverse = False

    # the plain range loops being emitted, outermost first: (ids of the statements in the
    # loop's body, {recomputable integer: None} to assign before the loop's reverse)
    hoist_frames = ()

    def hoisted(self, name):
        """Is the recomputable integer ``name`` evaluated once before the reverse of a loop
        around this point instead of where it is read?  It is when its assignment is outside
        that loop (it then holds one value for the loop's whole reverse): registered with the
        outermost such loop (``ControlMixin.stmt`` assigns it there)."""
        st = self.int_recompute[name]
        for body_ids, registry in self.hoist_frames:
            if id(st) not in body_ids:
                registry.setdefault(name, None)
                return True
        return False

    @property
    def int_order(self):
        """The recomputable integers' positions in definition order."""
        return {n: k for k, n in enumerate(self.int_recompute)}

    def int_read(self, name):
        """How reverse code reads the recomputable integer ``name``: a marked name (assigned
        before an enclosing loop's reverse, ``hoisted``) or its expression."""
        if self.hoisted(name):
            node = B.name(name)
            node._coarsen_hoisted = True
            return node
        return self.int_expr(name)

    def int_expr(self, name):
        """The expression of a recomputable integer scalar (``recording.find_int_recomputable``),
        the recomputable scalars among its operands expanded too."""
        saved, self.expanding = self.expanding, True
        try:
            return B.ex(self.primal(self.int_recompute[name]))
        finally:
            self.expanding = saved

    def recompute_ints(self, nodes):
        """Reverse code reads the recomputable integer scalars as their expressions (in place;
        returns ``nodes``): they are then never taped."""
        if not self.int_recompute:
            return nodes
        emitter = self

        class Expand(gast.NodeTransformer):
            def visit_Name(self, n):
                if isinstance(n.ctx, gast.Load) and n.id in emitter.int_recompute \
                        and not getattr(n, "_coarsen_hoisted", False):
                    return emitter.int_read(n.id)
                return n
        for node in nodes:
            Expand().visit(node)
        return nodes

