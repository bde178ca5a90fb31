"""NumPy's advanced (fancy) indexing by 1-D integer arrays and integers, as the source of
runtime helpers: a gather and its adjoint, a scatter-add (Numba indexes by one array at most).

Requires: nothing of coarsen (the bottom code-generation layer); a ``GatherPlan``: the rank of
the array ``b`` read (the basic part of the subscript already applied, so every advanced item
indexes one whole axis of ``b``), the axes of ``b`` the advanced items index and the kind of
each (``"a"``: a 1-D integer array, ``"i"``: an integer), and where the indexed axis of the
result goes (``front``: first, NumPy's rule where the advanced items are not adjacent in the
subscript; else where the first of them stood).
Guarantees: ``gather_source(plan)``: ``def NAME(b, x0, x1, ...)`` returns ``b[x0, x1, ...]``
with NumPy's meaning: the arrays broadcast to one length ``n`` (a length 1 repeats; two other
lengths differ: ``IndexError``), negative indices count from the end, an index out of range
raises ``IndexError``; the result is a fresh array (a copy, as NumPy's); its axes are ``b``'s
other axes in order with the one indexed axis placed as the plan says.
``scatter_source(plan)``: ``def NAME(g, shape, x0, ...)`` the adjoint: ``np.zeros(shape)`` into
which every element of ``g`` is added where the gather read it (an index repeated adds twice).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GatherPlan:
    rank: int            # b's rank
    axes: tuple          # b's axes the advanced items index, in the subscript's order
    kinds: tuple         # "a" (1-D integer array) or "i" (integer), one per axis
    front: bool          # the indexed axis first (not adjacent), else at axes[0]'s place

    def tag(self):
        parts = "".join(f"{k}{a}" for k, a in zip(self.kinds, self.axes))
        return f"{self.rank}_{parts}{'_f' if self.front else ''}"

    def out_axes(self):
        """The result's axes: ``"k"`` (the indexed axis) or the axis of ``b``, in order."""
        rest = [d for d in range(self.rank) if d not in self.axes]
        at = 0 if self.front else sum(1 for d in rest if d < self.axes[0])
        return rest[:at] + ["k"] + rest[at:]


def gather_name(plan):
    return f"_gather_{plan.tag()}"


def scatter_name(plan):
    return f"_scatter_{plan.tag()}"


def _prologue(plan, array):
    """Lines computing ``n`` (the common length) and each array's 0/1 factor."""
    xs = [f"x{j}" for j, k in enumerate(plan.kinds) if k == "a"]
    lines = ["    n = 1"]
    for x in xs:
        lines += [f"    if {x}.shape[0] != 1:",
                  f"        if n != 1 and {x}.shape[0] != n:",
                  "            raise IndexError('shape mismatch: indexing arrays could not be "
                  "broadcast together')",
                  f"        n = {x}.shape[0]"]
    for x in xs:
        lines.append(f"    m_{x} = 0 if {x}.shape[0] == 1 else 1")
    return lines


def _index_lines(plan, array, pad):
    """Lines binding ``j<d>``: the checked, non-negative index into axis ``d`` of ``array``."""
    lines = []
    for j, (kind, d) in enumerate(zip(plan.kinds, plan.axes)):
        src = f"x{j}[k * m_x{j}]" if kind == "a" else f"x{j}"
        lines += [f"{pad}j{d} = {src}",
                  f"{pad}if j{d} < 0:",
                  f"{pad}    j{d} += {array}[{d}]",
                  f"{pad}if j{d} < 0 or j{d} >= {array}[{d}]:",
                  f"{pad}    raise IndexError('index out of bounds in fancy indexing')"]
    return lines


def _subscripts(plan):
    """(the element of b, the element of the result) as index texts, inside the loops."""
    bidx = [f"j{d}" if d in plan.axes else f"i{d}" for d in range(plan.rank)]
    oidx = ["k" if a == "k" else f"i{a}" for a in plan.out_axes()]
    return ", ".join(bidx), ", ".join(oidx)


def _loops(plan, pad):
    lines = []
    for d in range(plan.rank):
        if d not in plan.axes:
            lines.append(f"{pad}for i{d} in range(bs[{d}]):")
            pad += "    "
    return lines, pad


def gather_source(plan):
    xs = [f"x{j}" for j in range(len(plan.axes))]
    lines = [f"def {gather_name(plan)}(b, {', '.join(xs)}):", "    bs = b.shape"]
    lines += _prologue(plan, "bs")
    dims = ", ".join("n" if a == "k" else f"bs[{a}]" for a in plan.out_axes())
    lines.append(f"    out = np.empty(({dims},), b.dtype)")
    lines.append("    for k in range(n):")
    lines += _index_lines(plan, "bs", "        ")
    loops, pad = _loops(plan, "        ")
    lines += loops
    bidx, oidx = _subscripts(plan)
    lines.append(f"{pad}out[{oidx}] = b[{bidx}]")
    lines.append("    return out")
    return "\n".join(lines) + "\n"


def scatter_source(plan):
    xs = [f"x{j}" for j in range(len(plan.axes))]
    lines = [f"def {scatter_name(plan)}(g, shape, {', '.join(xs)}):", "    bs = shape",
             "    out = np.zeros(shape)"]
    lines += _prologue(plan, "bs")
    lines.append("    for k in range(n):")
    lines += _index_lines(plan, "bs", "        ")
    loops, pad = _loops(plan, "        ")
    lines += loops
    bidx, oidx = _subscripts(plan)
    lines.append(f"{pad}out[{bidx}] += g[{oidx}]")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
