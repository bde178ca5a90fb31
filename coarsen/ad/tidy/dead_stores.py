"""Dead stores: ``s_bar = 0.0`` where no later read sees the value is removed.

Requires: a generated function (``flow.plain``: otherwise it is returned as it is), the names
whose stores may go (``compiler``: compiler names, adjoints included; never a user variable)
and ``FloatFacts`` (``floats``).
Guarantees: ``drop_dead_stores(fn, compiler, floats)`` returns a new function (``fn`` itself
where nothing is dead) without the
statements ``X = c`` (``X`` a compiler name, ``c`` a constant: evaluating it does nothing)
where ``X`` is not live after the statement (``flow.live_after``: no path from it reads ``X``
before binding it again; zero-trip loops, later trips, ``break``/``continue`` and the reads
after the block all count), and where dropping it cannot change the type Numba gives ``X``:
``X`` is a float64 scalar of the IR (or its adjoint) and ``c`` a float, or every binding of
``X`` in the function is a constant of ``c``'s type.  A statement whose block it would leave
empty (other than an ``else``) stays.  Removing a constant store makes no other store dead, so
one pass suffices.  The comment of a removed statement goes to the next one
(``flow.remove``).
"""
from __future__ import annotations

import gast

from .nodes import walk
from .flow import blocks, bound_by, live_after, plain, remove, remove_in_place


def _constant_store(st, compiler):
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
            isinstance(st.targets[0], gast.Name) and compiler(st.targets[0].id) and \
            isinstance(st.value, gast.Constant):
        return st.targets[0].id, type(st.value.value)
    return None


def _binding_kinds(fn):
    """{name: the set of types of its bindings, ``None`` for a binding that is no constant}."""
    out = {}
    for node in walk(fn):
        if isinstance(node, gast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], gast.Name):
            kind = type(node.value.value) if isinstance(node.value, gast.Constant) else None
            out.setdefault(node.targets[0].id, set()).add(kind)
            continue
        for name in bound_by(node):
            out.setdefault(name, set()).add(None)
    for a in fn.args.args:
        out.setdefault(a.id, set()).add(None)
    return out


def drop_dead_stores(fn, compiler, floats):
    """See the module docstring."""
    return remove(fn, _dead(fn, compiler, floats)) if plain(fn) else fn


def drop_dead_stores_in_place(fn, compiler, floats):
    """``drop_dead_stores`` on ``fn`` itself, which must be ``flow.plain``; True where it
    dropped a store."""
    dead = _dead(fn, compiler, floats)
    if dead:
        remove_in_place(fn, dead)
    return bool(dead)


def _dead(fn, compiler, floats):
    """The ids of the statements ``drop_dead_stores`` removes."""
    live = live_after(fn)
    kinds = _binding_kinds(fn)
    dead = set()
    for block in blocks(fn.body):
        here = []
        for st in block:
            found = _constant_store(st, compiler)
            if found is None or found[0] in live.get(id(st), ()):
                continue
            name, kind = found
            if (kind is float and name in floats.float_scalars) or kinds.get(name) == {kind}:
                here.append(id(st))
        if len(here) == len(block) and block is not getattr(_owner(fn, block), "orelse", None):
            continue
        dead.update(here)
    return dead


def _owner(fn, block):
    """The statement whose ``body`` or ``orelse`` is ``block`` (None for the function's)."""
    for node in walk(fn):
        if node is not fn and (getattr(node, "body", None) is block
                               or getattr(node, "orelse", None) is block):
            return node
    return None
