"""Tidy: the mechanical noise of emission removed from a generated module, conservatively.

Requires: a generated module (``gast.Module``: imports, runtime helpers, entry functions, as
``coarsen.ad.reverse.driver`` and ``coarsen.ad.forward.driver`` assemble it) and the IR's
types (``FloatFacts``).  Compiler names start with ``_`` and adjoints end with ``_bar``
(``coarsen.frontend.names``: no user name does either); the driver's vocabulary
(``coarsen.ir.fresh.DRIVER_NAMES``: tapes, positions, the value, the tape counts) is left alone.
Guarantees: ``tidy_module(module, types)`` returns a new module computing the same values, bit
for bit, with the same entries, parameters and results, where in each entry (one rewrite per
module, each with its own proof in its docstring):

1. an expression a temporary already holds is read from it (``held``: no recomputation);
2. copies of compiler temporaries are propagated (``copies``: ``_t2 = _t1`` gone);
3. seeds are folded (``seeds``: ``s_bar = 1.0; x_bar += s_bar * e`` is ``x_bar += e``);
4. dead constant stores of compiler names are dropped (``dead_stores``: ``s_bar = 0.0`` that
   nothing reads);

and the module keeps only the runtime helpers its entries reach and the imports it reads
(``helpers``).  A function whose structure the analyses do not cover (``flow.plain``) is kept
as it is.  User variables are never renamed, bound or removed; names stay as they were (no
name is made), so the output is as deterministic as the input.  ``adjoints=False`` (forward
mode: no ``_bar`` names) counts only ``_`` names as compiler names.
"""
from __future__ import annotations

import gast

from ...ir.fresh import DRIVER_NAMES
from .copies import propagate_copies_in_place
from .dead_stores import drop_dead_stores_in_place
from .floats import FloatFacts
from .flow import plain
from .held import reuse_held_in_place
from .helpers import drop_unused_helpers
from .nodes import clone
from .seeds import fold_seeds

__all__ = ["tidy_module", "tidy_function", "FloatFacts"]


def _compiler(adjoints):
    def compiler(name):
        return name not in DRIVER_NAMES and (name.startswith("_")
                                             or (adjoints and name.endswith("_bar")))
    return compiler


def _temporary(name):
    return name.startswith("_") and name not in DRIVER_NAMES


def tidy_function(fn, floats, adjoints=True):
    """One entry function tidied (steps 1-4 of the module docstring); a new function (``fn``
    itself where nothing changes)."""
    if not plain(fn):
        return fn
    compiler = _compiler(adjoints)
    # one copy, rewritten in place (the rewrites keep a function plain: they remove
    # statements and rewrite expressions, and make no scope)
    work, changed_any = clone(fn), False
    # each rewrite may open the way for another (a folded product leaves a copy, a dropped
    # store no longer ends a copy's stretch): run them until none changes anything
    for _ in range(8):
        facts = floats.extended(work)
        changed = reuse_held_in_place(work, _temporary, facts)
        changed |= propagate_copies_in_place(work, _temporary)
        if adjoints:
            folded = fold_seeds(work, compiler, facts)
            changed |= folded is not work
            work = folded
        changed |= drop_dead_stores_in_place(work, compiler, facts)
        if not changed:
            break
        changed_any = True
    return work if changed_any else fn


def tidy_module(module, types=None, adjoints=True):
    """See the module docstring."""
    floats = FloatFacts.of(types)
    body = [tidy_function(st, floats, adjoints)
            if isinstance(st, gast.FunctionDef) and not st.name.startswith("_") else st
            for st in module.body]
    return drop_unused_helpers(gast.Module(body=body, type_ignores=list(module.type_ignores)))
