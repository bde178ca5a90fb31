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

import copy

import gast

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
    return any(isinstance(n, (gast.BinOp, gast.Call)) for n in gast.walk(e))


def _held_of(st, temporary, counts, floats):
    if not (isinstance(st, gast.Assign) and len(st.targets) == 1
            and isinstance(st.targets[0], gast.Name)):
        return None
    t, e = st.targets[0].id, st.value
    # local scalars only: an array (even of one element, ``float(A)``) may change unbound
    local = {v for v, k in counts.items() if k >= 1} & (floats.float_scalars | floats.int_scalars)
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


class _Replace(gast.NodeTransformer):
    def __init__(self, expr, name):
        self.expr, self.name, self.count = expr, name, 0

    def generic_visit(self, node):
        if isinstance(node, gast.expr) and same_tree(node, self.expr):
            self.count += 1
            return gast.Name(id=self.name, ctx=gast.Load(), annotation=None, type_comment=None)
        return super().generic_visit(node)


def _bound(st):
    """The names ``st`` binds anywhere inside it."""
    return {n.id for n in gast.walk(st) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}


def _read(st):
    """The names ``st`` reads anywhere inside it."""
    return {n.id for n in gast.walk(st) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)}


def _reuse_in(block, bound, read, k, t, e):
    """Replace ``e`` by ``t`` after ``block[k]``; how many were replaced.  ``bound[i]`` is
    ``_bound(block[i])`` (replacing reads binds nothing, so it stays true) and ``read[i]``
    ``_read(block[i])`` (kept true here): a statement that does not read every name of ``e``
    holds no copy of ``e`` and is not visited."""
    names = {n.id for n in gast.walk(e) if isinstance(n, gast.Name)}
    stop = {t} | names
    rep = _Replace(e, t)
    for i in range(k + 1, len(block)):
        if bound[i] & stop:
            break
        if names <= read[i]:
            before = rep.count
            block[i] = rep.visit(block[i])
            if rep.count != before:
                read[i] = _read(block[i])
    return rep.count


def reuse_held(fn, temporary, floats):
    """See the module docstring."""
    if not plain(fn):
        return fn
    new = copy.deepcopy(fn)
    counts = store_counts(new)
    done = 0
    for block in blocks(new.body):
        bound = read = None
        for k, st in enumerate(block):
            found = _held_of(st, temporary, counts, floats)
            if found:
                if bound is None:
                    bound, read = [_bound(s) for s in block], [_read(s) for s in block]
                done += _reuse_in(block, bound, read, k, *found)
    return new if done else fn
