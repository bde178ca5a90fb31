"""The body of one loop nest of scalarization, and the loop each of its statements goes in.

Requires: the scalarizer of ``coarsen.ir.scalarize`` (``new``, ``types``, ``position``), the
nest's loop variables and the plans of its leaves (per leaf, the first index and the broadcast
stride of each axis it reads).
Guarantees: ``NestBody`` collects the innermost statements (``inner``): ``index_of`` gives the
scalar index tuple of a leaf at the loop indices, ``value`` the scalar operand standing for an
operand of the tree (an element read once per whole-array leaf); ``levels`` splits the
statements by the loop whose body they go in.  Nothing here changes the IR it reads.
"""
from __future__ import annotations

from .nodes import NEWAXIS, Assign, Slice, Store, Var


class NestBody:
    """The innermost statements of a nest, and the scalars standing for the tree's values."""

    def __init__(self, scalarizer, ivars, plans):
        self.sc = scalarizer
        self.ivars = ivars
        self.inner = []
        self.scalar = {}
        self.by_stmt = {id(leaf.stmt): (leaf, per) for leaf, per in plans if leaf.stmt is not None}
        self.whole = {leaf.array: (leaf, per) for leaf, per in plans if leaf.stmt is None}

    def index_of(self, array, items, per, at):
        """The scalar index tuple reading ``array[items]`` at the loop indices."""
        out, it_per = [], iter(per)
        for it in items:
            if it == NEWAXIS:
                continue
            if isinstance(it, Slice):
                out.append(self.sc.position(self.inner, array, next(it_per), self.ivars, at))
            else:
                out.append(it)
        for rest in it_per:
            out.append(self.sc.position(self.inner, array, rest, self.ivars, at))
        return tuple(out)

    def value(self, a, at):
        """The scalar operand standing for the operand ``a`` of the tree at the loop indices."""
        if not isinstance(a, Var):
            return a
        if a.name in self.scalar:
            return Var(self.scalar[a.name])
        if a.name in self.whole:
            leaf, per = self.whole[a.name]
            v = self.sc.new("v", self.sc.types[a.name].dtype)
            self.inner.append(Assign(v, "getitem", (Var(a.name),),
                                     at, index=self.index_of(a.name, (), per, at)))
            self.scalar[a.name] = v
            return Var(v)
        return a


def levels(inner, loops, acc):
    """``inner``'s statements by the loop whose body they go in: each where the deepest loop
    index it depends on (through the statements before it) is set, so that a value read along
    an outer axis only is read once per outer trip (its adjoint, in the reverse sweep, is then
    accumulated once per outer trip too).  Stores and the accumulator's updates stay in the
    innermost loop; a statement that depends on no index goes in the outermost one."""
    depth = {v: d for d, v in enumerate(loops)}
    levels = [[] for _ in loops]
    for st in inner:
        if isinstance(st, Store) or (acc is not None and st.target == acc):
            d = len(loops) - 1
        else:
            names = [a.name for a in st.args if isinstance(a, Var)]
            names += [it.name for it in st.index if isinstance(it, Var)]
            d = max([depth.get(n, 0) for n in names] + [0])
            depth[st.target] = d
        levels[d].append(st)
    return levels
