"""The forward mode's optimization passes over the entry's statements, in the order they run.

Requires: the entry's statements as the forward driver assembled them
(``coarsen.ad.forward.driver``) as ``ForwardCode``, the transform's ``JvpOptions`` as
``ForwardContext``; the pass manager (``coarsen.ad.passes``).
Guarantees: ``FORWARD`` is the pipeline; each pass wraps one function of its own module and
returns a new ``ForwardCode`` (the input is not modified), keeping the values the entry
computes, bit for bit.  Forward mode has no tape and little to clean up: its one pass today
is ``jam`` (``coarsen.ad.forward.jam``: the SIMD form's qualifying loops run several trips
side by side), which applies to the SIMD form of a vector JVP only.  ``FORWARD.then`` is the
module's stage (``ForwardModule``: the assembled module): ``tidy`` (``coarsen.ad.tidy`` with
``adjoints=False``: only ``_`` names are the compiler's) reuses held expressions, propagates
copies, drops dead constant stores and unused helpers, keeping every value bit for bit.  The SIMD rewrite itself
(``coarsen.ad.forward.simd``) is a form the options choose (``simd=True``), not a pass:
without it the entry would not take the packed tangents it declares.
``JvpOptions.disable`` names passes to switch off (``FORWARD.check`` validates it); the
driver records the names of those that ran (``emitter.passes_run``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import gast

from ..passes import Fact, Pass, Pipeline
from ..tidy import tidy_module
from . import jam


@dataclass(frozen=True)
class ForwardCode:
    """The entry's statements between passes."""
    stmts: list             # prologue, tangent sweep, epilogue, return (gast), not modified
    params: tuple           # the entry's parameters
    jammed: list            # the plans of the loops ``jam`` rewrote (``jam.JamPlan``)


@dataclass(frozen=True)
class ForwardModule:
    """The assembled module (imports, runtime helpers, the entry), for the module's stage."""
    module: object          # gast.Module, not modified


@dataclass(frozen=True)
class ForwardContext:
    """What the passes read besides the code."""
    options: object         # the transform's ``JvpOptions``
    types: dict = None      # the emitter's types (the function's variables, its tangents)


def _jam(code, ctx):
    taken = {n.id for s in code.stmts for n in gast.walk(s) if isinstance(n, gast.Name)}
    stmts, plans = jam.jam_loops(code.stmts, taken | set(code.params), jam.JAM)
    return replace(code, stmts=stmts, jammed=plans)


def _tidy(code, ctx):
    return replace(code, module=tidy_module(code.module, ctx.types, adjoints=False))


def _simd(ctx):
    return bool(ctx.options.simd and ctx.options.directions)


FORWARD = Pipeline("forward", (
    Pass("jam", _jam, frozenset({Fact.SIMD_ENTRY}), frozenset({Fact.JAMMED}), applies=_simd,
         doc="the SIMD form's loops run several trips side by side (jam)"),
), start=frozenset({Fact.SIMD_ENTRY}),
   then=Pipeline("forward", (
       Pass("tidy", _tidy, frozenset({Fact.MODULE}), frozenset({Fact.TIDY}),
            doc="held expressions reused, copies propagated, dead stores and unused helpers "
                "dropped (ad.tidy, adjoints=False)"),
   ), start=frozenset({Fact.MODULE})))
