"""Run-time checks the frontend adds to the IR: zero derivative, no value anyone reads.

Requires: ``core``, ``coarsen.codegen.build``, ``coarsen.codegen.runtime`` (``unbound_error``).
Guarantees: ``unbound_check(flag)`` (``attrs``: ``name``, the user's spelling of the variable)
raises Python's ``UnboundLocalError`` for that variable where ``flag`` is False, and is
``True`` otherwise (``coarsen.frontend.unbound`` adds it before a read that may find its
variable unbound).  It is not liftable, not a passenger and has no derivative, so segments end
at it and it runs in the forward sweep, where the source reads the variable, in both modes.
``check(flag)`` (``attrs``: ``exc``, ``AssertionError`` or ``ValueError``, and ``message``, a
constant string or None) raises that exception where ``flag`` is False: an ``assert``
statement (``coarsen.frontend.lower``), or a check NumPy makes of its arguments that the
frontend's sugar writes out (``np.split``'s equal division); in coarsen's input language an
``assert`` of the flag in a helper (``check_assert``), which reading that code back lowers to
``check`` again.
Code generated in coarsen's input language (``input_language``: a JVP that reverse mode reads
back for ``coarsen.hessian``) holds the flag instead of the raising helper: reading that code,
the frontend finds the same read possibly unbound and checks it (naming the variable as the
generated code spells it).
"""
from __future__ import annotations

from ...codegen import build as B
from ...codegen import runtime as R
from ..nodes import BOOL
from .core import CostClass, Primitive, register


def _bool_type(c, s, ts):
    return BOOL


def _emit_unbound_check(em, s, v):
    if getattr(em, "input_language", False):
        # code read back as a user's (coarsen.hessian's reverse mode over a JVP): the flag
        # itself, since a helper that raises is refused there; the reading of it finds the
        # same read possibly unbound and checks it again
        return B.ex(v[0])
    return B.call(em.helper(R.unbound_error(s.attr("name"))), v[0])


register(Primitive("unbound_check", _bool_type, _emit_unbound_check, arity=1, zero=True,
                   cost=CostClass.ADD))


def _emit_check(em, s, v):
    if getattr(em, "input_language", False):
        # read back (and inlined) by reverse mode, which refuses a raise: the check as an
        # assert statement (an AssertionError there, where NumPy's check raises ValueError)
        return B.call(em.helper(R.check_assert(s.attr("message"))), v[0])
    return B.call(em.helper(R.check_error(s.attr("exc"), s.attr("message"))), v[0])


register(Primitive("check", _bool_type, _emit_check, arity=1, zero=True, cost=CostClass.ADD))
