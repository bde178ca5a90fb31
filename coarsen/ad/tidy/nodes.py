"""Fast tree primitives for the tidy rewrites: a walk and a copy of ``gast`` trees.

Tidy runs four rewrites to a fixed point over every generated function; with ``gast.walk``
(``ast.walk``'s generator of generators) and ``copy.deepcopy`` (``__reduce_ex__`` per node)
they took two thirds of the time to compile a gradient.

Requires: ``gast`` trees whose nodes carry, besides their ``_fields``, only immutable
attributes (positions, ``coarsen_comment`` strings, ``_coarsen_loc``: the frozen
``coarsen.ir.nodes.Loc``), or attributes ``copy.deepcopy`` can copy.
Guarantees:

* ``walk(node)`` lists the same nodes in the same order as ``gast.walk`` (breadth first, each
  node's children in the order of its ``_fields``, lists in order).
* ``clone(node)`` is equal to ``copy.deepcopy(node)``: a new tree with new nodes and lists,
  a node reached twice copied once (shared subtrees stay shared), immutable attribute values
  shared rather than copied, and any other attribute value deep-copied with the same memo.
"""
from __future__ import annotations

import copy

import gast

from ...ir.nodes import Loc

_AST = gast.AST
_IMMUTABLE = (str, int, float, complex, bool, bytes, type(None), type(Ellipsis), Loc)


def walk(node):
    """See the module docstring (a list rather than a generator)."""
    out = [node]
    push, extend = out.append, out.extend
    for node in out:            # the list grows as the walk goes: breadth first
        for name in node._fields:
            v = getattr(node, name, None)
            if isinstance(v, _AST):
                push(v)
            elif isinstance(v, list):
                extend([x for x in v if isinstance(x, _AST)])
    return out


def clone(node):
    """See the module docstring."""
    return _clone(node, {})


def _clone(v, memo):
    if isinstance(v, _IMMUTABLE):
        return v
    done = memo.get(id(v))
    if done is not None:
        return done
    if isinstance(v, _AST):
        new = v.__class__.__new__(v.__class__)
        memo[id(v)] = new
        new.__dict__.update({k: _clone(x, memo) for k, x in v.__dict__.items()})
        return new
    if isinstance(v, list):
        new = []
        memo[id(v)] = new
        new.extend(_clone(x, memo) for x in v)
        return new
    if isinstance(v, tuple) and all(isinstance(x, _IMMUTABLE) for x in v):
        return v
    return copy.deepcopy(v, memo)
