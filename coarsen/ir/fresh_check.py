"""The check that every compiler name of a generated module has exactly one generator.

Requires: a generated module (``gast``, as ``differentiate_ir`` and the forward driver return
it) and the ``NameSupply`` its emission took its names from (``coarsen.ir.fresh``).
Guarantees: ``check_names(module, supply)`` raises ``NameClash`` unless every compiler name
(one that starts with ``_``; user names never do, ``coarsen.frontend.names``) that the
module's entry functions bind has exactly one generator:

* a name of the supply (the frontend, SSA webs, scalarization, in-place rewriting, hoisting,
  the emitters, the custom rules: the supply records the one generator that took it);
* the driver's fixed vocabulary (``DRIVER_NAMES``: tapes, their positions, the value, the tape
  counts), which no generator of the supply hands out;
* a rewrite run on the emitted code (``POST_EMISSION``: its stem and a number), which picks
  names that no name of the whole module has (so it cannot clash), and none of which the
  supply handed out;
* the adjoint ``<name>_bar`` of one of those.

A name that none of these accounts for was made by a generator that bypasses the supply (and
could clash with one that does); a name two of them account for was bound by two generators.
The check runs on every module the test suite generates (``tests/conftest.py`` sets
``COARSEN_CHECK_NAMES=1``); it costs a walk of the module, and is off by default.
"""
from __future__ import annotations

import os
import re

import gast

from .fresh import DRIVER_NAMES, LIFT_NAMES, NameClash

#: on when the environment asks (the test suite does)
ENABLED = os.environ.get("COARSEN_CHECK_NAMES") == "1"


#: rewrites of the emitted code: (the pattern of the names it makes, the rewrite)
POST_EMISSION = (
    (LIFT_NAMES, "lift"),       # segment symbols (coarsen.ad.lift), printed into the sweeps
    (re.compile(r"_fw\d+"), "first_writes"),
    (re.compile(r"_sum\d+"), "invariant_sums"),
    (re.compile(r"_inv\d+"), "invariant_reads"),
    (re.compile(r"_rm\d+"), "rematerialize"),
    # both rewrites scan the whole function for the names they make
    (re.compile(r"_row\d+"), "rematerialize or adjoint_rows"),
    (re.compile(r"_(rows|ext|col)\d+"), "adjoint_rows"),
    (re.compile(r"_iv\d+"), "loop_order"),
    (re.compile(r"_lanes\d+"), "lane_sums"),
    (re.compile(r"_tc\d+"), "tape_cursors"),
    (re.compile(r"_gk\d+"), "distribute_scatters"),
    (re.compile(r"_scale\d+"), "scaled_reads"),
    # unroll and jam (coarsen.ad.forward.jam): its own names and a trip's copies of names
    (re.compile(r"_\w+_j\d+"), "jam"),
)


def _bound(fdef):
    out = set(a.id for a in fdef.args.args if isinstance(a, gast.Name))
    for node in gast.walk(fdef):
        targets = ()
        if isinstance(node, gast.Assign):
            targets = node.targets
        elif isinstance(node, (gast.AugAssign, gast.AnnAssign, gast.For)):
            targets = (node.target,)
        for t in targets:
            for n in gast.walk(t):
                if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                    out.add(n.id)
    return out


def owners_of(name, supply):
    """The generators that account for ``name`` (see the module docstring)."""
    base = name
    # (an identifier of the source that starts with "_" is escaped, never bound as it is: a
    # user's ``_ret_bar`` says nothing of the adjoint of the frontend's ``_ret``)
    while base.endswith("_bar") and (base not in supply or supply.owner(base) == "source"):
        base = base[:-4]
    found = []
    if base in supply and supply.owner(base) != "source":
        found.append(supply.owner(base))
    if base in DRIVER_NAMES:
        found.append("driver")
    found += [owner for pattern, owner in POST_EMISSION if pattern.fullmatch(base)]
    return list(dict.fromkeys(found))     # the supply's "driver" and the vocabulary's: one


def check_names(module, supply, entries=None):
    """Raise ``NameClash`` where a compiler name bound by the module's entry functions (those
    named in ``entries``; every function when None) has no generator or more than one."""
    problems = []
    for fdef in module.body:
        if not isinstance(fdef, gast.FunctionDef) or (entries is not None and fdef.name not in entries):
            continue
        for name in sorted(_bound(fdef)):
            if not name.startswith("_"):
                continue
            owners = owners_of(name, supply)
            if len(owners) != 1:
                problems.append(f"{fdef.name}: {name!r} bound by {owners or 'no known generator'}")
    if problems and os.environ.get("COARSEN_CHECK_NAMES_LOG"):
        with open(os.environ["COARSEN_CHECK_NAMES_LOG"], "a") as log:     # a survey
            log.write("".join(p + "\n" for p in problems))
        return
    if problems:
        raise NameClash("internal: compiler names without exactly one generator:\n  "
                        + "\n  ".join(problems))
