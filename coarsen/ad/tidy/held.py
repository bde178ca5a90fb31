"""Held values: an expression that a temporary already holds is read from it, not recomputed.

``_t8 = 1.0 / (x * x + 1.0); ...; y_bar += g * (1.0 / (x * x + 1.0))`` becomes
``y_bar += g * _t8`` (and ``_s1_t0 = math.tanh(_t4)`` next to ``_t5 = math.tanh(_t4)`` becomes a
copy, which ``copies`` then removes).

Requires: a generated function (``flow.plain``: otherwise it is returned as it is), the names
that may hold a value (``temporary``: compiler names outside the driver's vocabulary) and
``FloatFacts`` (``floats``).
Guarantees: ``reuse_held(fn, temporary, floats)`` returns a new function (``fn`` itself where
nothing is replaced) where, for each statement ``T = E`` with

* ``T`` temporary and bound by that statement only, in the whole function;
* ``E`` a float scalar (``FloatFacts.scalar``) built only of local scalar names (parameters or
  names the function binds, known float or int scalars: no array, whose elements may change
  while its name stays bound), constants, ``+ - * /``, unary ``+ -`` and calls of ``math`` functions
  and ``float``, with at least one operation or call that is not a sign (no element read: an
  array's element may change without its name being bound);

every expression equal to ``E`` (the same tree) in the statements after it in its block,
before the first statement there that binds ``T`` or a name ``E`` reads (anywhere inside it),
is replaced by ``T``.  Control reaches those places from ``T = E`` only through statements that
bind neither, so ``E`` would be evaluated on the same values there: the same float, bit for bit
(the operations are deterministic and the evaluation at ``T = E`` raised whatever it would
raise).  User names are never bound or removed.
"""
from __future__ import annotations

import gast

from .nodes import clone, walk
from .flow import blocks, plain, store_counts

_OPS = (gast.Add, gast.Sub, gast.Mult, gast.Div)


def _pure(e, local):
    """Names (local scalars), constants, arithmetic, ``math``/``float`` calls only."""
    if isinstance(e, gast.Constant):
        return type(e.value) in (int, float)
    if isinstance(e, gast.Name):
        return e.id in local
    if isinstance(e, gast.UnaryOp):
        return isinstance(e.op, (gast.USub, gast.UAdd)) and _pure(e.operand, local)
    if isinstance(e, gast.BinOp):
        return isinstance(e.op, _OPS) and _pure(e.left, local) and _pure(e.right, local)
    if isinstance(e, gast.Call):
        f = e.func
        named = (isinstance(f, gast.Name) and f.id == "float") or (
            isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name)
            and f.value.id == "math")
        return named and not e.keywords and all(_pure(a, local) for a in e.args)
    return False


def _worth(e):
    """At least one operation or call beyond a sign."""
    return any(isinstance(n, (gast.BinOp, gast.Call)) for n in walk(e))


def _held_of(st, temporary, counts, local, floats):
    """``(T, E)`` of a statement ``T = E`` whose value later statements may read from ``T``
    (see the module docstring); ``local``: the local scalar names."""
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Name)):
        return None
    t, e = st.targets[0].id, st.value
    if not (temporary(t) and counts.get(t) == 1 and _worth(e) and _pure(e, local)
            and floats.scalar(e)):
        return None
    return t, e


def same_tree(a, b):
    """``gast.dump(a) == gast.dump(b)`` (the same fields, recursively), failing at the first
    difference instead of printing both trees."""
    if type(a) is not type(b):
        return False
    if isinstance(a, gast.AST):
        return all(same_tree(getattr(a, f, None), getattr(b, f, None)) for f in a._fields)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same_tree, a, b))
    return repr(a) == repr(b)


def _held_name(name):
    return gast.Name(id=name, ctx=gast.Load(), annotation=None, type_comment=None)


def _replace(node, e, name):
    """Each expression below ``node`` (not ``node`` itself) that is the same tree as ``e``
    replaced by a read of ``name``, outermost first (a replaced expression is not entered);
    how many were replaced."""
    count = 0
    kind = type(e)
    for field in node._fields:
        v = getattr(node, field, None)
        if isinstance(v, gast.AST):
            if type(v) is kind and same_tree(v, e):
                setattr(node, field, _held_name(name))
                count += 1
            else:
                count += _replace(v, e, name)
        elif isinstance(v, list):
            for j, x in enumerate(v):
                if not isinstance(x, gast.AST):
                    continue
                if type(x) is kind and same_tree(x, e):
                    v[j] = _held_name(name)
                    count += 1
                else:
                    count += _replace(x, e, name)
    return count


def _index(stmts, names):
    """Record ``names[id(st)]`` = (the names ``st`` binds anywhere inside it, the names it
    reads anywhere inside it) for each statement of ``stmts`` and below, each statement's
    own expressions walked once and its blocks' sets joined."""
    for st in stmts:
        bound, read = set(), set()
        for field in st._fields:
            v = getattr(st, field, None)
            if field in ("body", "orelse") and isinstance(v, list):
                _index(v, names)
                for sub in v:
                    b, r = names[id(sub)]
                    bound |= b
                    read |= r
                continue
            for part in (v if isinstance(v, list) else (v,)):
                if not isinstance(part, gast.AST):
                    continue
                for n in walk(part):
                    if isinstance(n, gast.Name):
                        if isinstance(n.ctx, gast.Store):
                            bound.add(n.id)
                        elif isinstance(n.ctx, gast.Load):
                            read.add(n.id)
        names[id(st)] = (bound, read)


def _reuse_in(block, names, k, t, e):
    """Replace ``e`` by ``t`` after ``block[k]``; how many were replaced.  ``names`` is
    ``_index``'s record, kept true here for the statements of ``block`` and below (a
    replacement binds nothing; the statements around ``block``, whose blocks come before it
    in ``flow.blocks``' order, are not looked at again): a statement that does not read every
    name of ``e`` holds no copy of ``e`` and is not visited."""
    used = {n.id for n in walk(e) if isinstance(n, gast.Name)}
    stop = {t} | used
    count = 0
    for i in range(k + 1, len(block)):
        bound, read = names[id(block[i])]
        if bound & stop:
            break
        if used <= read:
            here = _replace(block[i], e, t)
            if here:
                count += here
                _index([block[i]], names)
    return count


def reuse_held(fn, temporary, floats):
    """See the module docstring."""
    if not plain(fn):
        return fn
    new = clone(fn)
    return new if reuse_held_in_place(new, temporary, floats) else fn


def reuse_held_in_place(fn, temporary, floats):
    """``reuse_held`` on ``fn`` itself, which must be ``flow.plain``; True where it replaced
    an expression."""
    counts = store_counts(fn)
    # local scalars only: an array (even of one element, ``float(A)``) may change unbound
    local = {v for v, k in counts.items() if k >= 1} & (floats.float_scalars | floats.int_scalars)
    names, done = {}, 0
    _index(fn.body, names)
    for block in blocks(fn.body):
        for k, st in enumerate(block):
            found = _held_of(st, temporary, counts, local, floats)
            if found:
                done += _reuse_in(block, names, k, *found)
    return done > 0
