"""The names of tangent variables, shared by forward mode and the analyses that plan it.

Requires: a typed ``ir.Function`` (its parameters and typed names are taken) and, optionally,
the module's ``NameSupply`` (``coarsen.ir.fresh``).
Guarantees: ``tangent_names`` is deterministic (names in sorted order) and never returns a
name of the function or one taken before from the same set or supply.
"""
from __future__ import annotations

from .fresh import NameSupply


def tangent_names(fn, names, suffix="_dot", used=None):
    """``{variable: its tangent's name}`` for ``names``: ``<name><suffix>`` (``<name>_dot``),
    or ``<name><suffix>2``, ``<name><suffix>3``... where that is a name of ``fn`` or an
    earlier tangent (deterministic: in sorted order).  ``used``, when given, is the set of
    names taken so far, and grows (the lanes of a vector JVP share it), or the module's
    ``NameSupply``, from which the names are then taken."""
    if used is None:
        used = set()
    supply = used if isinstance(used, NameSupply) else None
    if supply is not None:
        supply.reserve(set(fn.types) | set(fn.params))
    else:
        used |= set(fn.types) | set(fn.params)
    out = {}
    for v in sorted(names):
        cand, k = f"{v}{suffix}", 2
        while cand in used:
            cand, k = f"{v}{suffix}{k}", k + 1
        if supply is not None:
            supply.take(cand, "tangents")
        else:
            used.add(cand)
        out[v] = cand
    return out
