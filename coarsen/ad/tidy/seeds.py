"""Seed folding: ``s_bar = 1.0; x_bar += s_bar * e`` becomes ``x_bar += e``.

Requires: a generated function (``flow.plain``: otherwise it is returned as it is), the names
it may fold (``compiler``: compiler names, adjoints included; never a user variable) and
``FloatFacts`` (``floats``).
Guarantees: ``fold_seeds(fn, compiler, floats)`` returns a new function (``fn`` itself where
nothing folds) where a statement
``S = 1.0`` (``S`` a compiler name) is gone when all of the following hold; otherwise that
statement and its reads are left exactly as they were:

* the reads of ``S`` after it in its block, before the first statement there that binds
  ``S`` (anywhere inside it), are replaced by the constant ``1.0``: control reaches them from
  ``S = 1.0`` only through statements that do not bind ``S``, so ``S`` is ``1.0`` there;
* each replaced read that is a factor of a product is folded away, ``1.0 * e`` and
  ``e * 1.0`` becoming ``e``, only where that is the same value of the same type: ``e`` is a
  float scalar (``FloatFacts.scalar``), or the product is the whole right-hand side of
  ``t += ...`` / ``t -= ...`` into a float (``FloatFacts.holds``), where ``e`` is converted to
  float64 either way (IEEE multiplication by 1.0 is exact); a product that cannot be folded
  keeps the statement;
* afterwards ``S`` is not live after the statement (``flow.live_after``): no read anywhere
  (a later trip of a loop, after the block) still sees its value, so it is removed.

A read of ``S`` that is not a product (``x_bar += S``, ``-S``, an argument) becomes the
constant ``1.0``.  The comment of a removed statement goes to the next one (``flow.remove``).
"""
from __future__ import annotations

import gast

from .nodes import clone, walk
from .flow import blocks, live_after, plain, remove_in_place


def _seed_of(st, compiler):
    if isinstance(st, gast.Assign) and len(st.targets) == 1 and \
            isinstance(st.targets[0], gast.Name) and compiler(st.targets[0].id) and \
            isinstance(st.value, gast.Constant) and type(st.value.value) is float and \
            st.value.value == 1.0:
        return st.targets[0].id
    return None


def _binds(st, name):
    return any(isinstance(n, gast.Name) and n.id == name and isinstance(n.ctx, gast.Store)
               for n in walk(st))


class _Fold(gast.NodeTransformer):
    """Replace the reads of ``name`` by a marked ``1.0`` and fold the products; ``failed``
    when a product cannot be folded."""

    def __init__(self, name, floats):
        self.name, self.floats, self.failed, self.ones = name, floats, False, set()

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, gast.Load):
            one = gast.Constant(value=1.0, kind=None)
            self.ones.add(id(one))
            return one
        return node

    def visit_AugAssign(self, node):
        node.target = self.visit(node.target)
        v = node.value
        if isinstance(node.op, (gast.Add, gast.Sub)) and isinstance(v, gast.BinOp) and \
                isinstance(v.op, gast.Mult) and self.floats.holds(node.target):
            left, right = self.visit(v.left), self.visit(v.right)
            if id(left) in self.ones:
                node.value = right
                return node
            if id(right) in self.ones:
                node.value = left
                return node
            v.left, v.right = left, right
            node.value = self._product(v)
            return node
        node.value = self.visit(v)
        return node

    def visit_BinOp(self, node):
        node.left, node.right = self.visit(node.left), self.visit(node.right)
        return self._product(node)

    def _product(self, node):
        if not isinstance(node, gast.BinOp):
            return node
        one_left, one_right = id(node.left) in self.ones, id(node.right) in self.ones
        if not (one_left or one_right):
            return node
        if not isinstance(node.op, gast.Mult):
            if isinstance(node.op, (gast.Add, gast.Sub)):
                return node         # 1.0 + e: a plain constant
            self.failed = True
            return node
        other = node.right if one_left else node.left
        if id(other) in self.ones or self.floats.scalar(other):
            return other
        self.failed = True
        return node


def _try(fn, path, name, floats):
    """Fold the seed at ``path`` (block index, statement index) in a copy of ``fn``; the copy,
    or None."""
    new = clone(fn)
    block = blocks(new.body)[path[0]]
    k = path[1]
    fold = _Fold(name, floats)
    for i in range(k + 1, len(block)):
        if _binds(block[i], name):
            break
        block[i] = fold.visit(block[i])
    if fold.failed or name in live_after(new).get(id(block[k]), ()):
        return None
    remove_in_place(new, {id(block[k])})
    return new


def fold_seeds(fn, compiler, floats):
    """See the module docstring."""
    if not plain(fn):
        return fn
    tried = set()
    while True:
        for b, block in enumerate(blocks(fn.body)):
            done = None
            for k, st in enumerate(block):
                name = _seed_of(st, compiler)
                key = (b, k, name)
                if name is None or key in tried:
                    continue
                tried.add(key)
                done = _try(fn, (b, k), name, floats)
                if done is not None:
                    break
            if done is not None:
                fn = done
                tried = set()
                break
        else:
            return fn
