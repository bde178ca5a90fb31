"""Stores of an array into a region of another, as loops: ``a[s] = x``, ``a[s] += x``, ``a[s] -= x``.

Numba compiles an array slice assignment (``fancy_setslice``) in about half a second per
statement, most of it its shape-mismatch error path, and runs ``a[s] += x`` as a view updated in
place followed by a slice assignment of the view to itself (a copy, for the overlap).  A helper
per region rank, value rank and operation is compiled once per signature and copies nothing
where the memories do not overlap.

Requires: nothing of coarsen (the bottom code-generation layer).
Guarantees: ``has_region_helper(op, r, v)``, ``region_name(op, r, v)`` and ``region_source(op, r, v)``: ``_region_<op><r>_<v>(out, x)``
with ``op`` in ``set``/``add``/``sub``, ``out`` an ``r``-D view (the region ``a[s]`` of a basic
index) and ``x`` a ``v``-D array, does what NumPy's ``out[...] = x`` (``+=``, ``-=``) does: ``x``
broadcast to ``out``'s shape by NumPy's rules (trailing axes aligned, an axis of length 1
repeated, extra leading axes of ``x`` of length 1), ``ValueError`` where it does not broadcast,
values cast to ``out``'s dtype, and ``x`` read in full before ``out`` is written where their
memories may overlap (a copy is made then, as NumPy does).
"""
from __future__ import annotations

__all__ = ["has_region_helper", "region_name", "region_source"]

_OPS = {"set": "=", "add": "+=", "sub": "-="}
_I = "    "


def has_region_helper(op, r, v):
    """Whether ``_region_<op><r>_<v>`` exists: NumPy's in-place ``out += x`` refuses an ``x`` of
    more axes than ``out`` (a non-broadcastable output), assignment accepts leading 1s."""
    return op in _OPS and r >= 1 and v >= 1 and (op == "set" or v <= r)


def region_name(op, r, v):
    return f"_region_{op}{r}_{v}"


def _extent(lines, a, nd, lo, hi):
    """Lines setting ``lo``/``hi`` to the first and one-past-last byte ``a`` spans."""
    lines.append(f"{_I}{lo} = {a}.ctypes.data")
    lines.append(f"{_I}{hi} = {lo}")
    for d in range(nd):
        lines.append(f"{_I}span = ({a}.shape[{d}] - 1) * {a}.strides[{d}]")
        lines.append(f"{_I}if span < 0:")
        lines.append(f"{_I}{_I}{lo} += span")
        lines.append(f"{_I}else:")
        lines.append(f"{_I}{_I}{hi} += span")
    lines.append(f"{_I}{hi} += {a}.itemsize")


def region_source(op, r, v):
    if not has_region_helper(op, r, v):
        raise ValueError(f"no region helper for {op!r}, {r}, {v}")
    lines = [f"def {region_name(op, r, v)}(out, x):"]
    off = r - v
    for d in range(v):
        od = d + off
        bad = f"x.shape[{d}] != 1" if od < 0 else f"x.shape[{d}] != 1 and x.shape[{d}] != out.shape[{od}]"
        lines.append(f"{_I}if {bad}:")
        lines.append(f"{_I}{_I}raise ValueError('could not broadcast input array into the region "
                     "(coarsen: a slice assignment)')")
    _extent(lines, "out", r, "lo", "hi")
    _extent(lines, "x", v, "xlo", "xhi")
    lines.append(f"{_I}src = x.copy() if out.size > 0 and x.size > 0 and xlo < hi and lo < xhi else x")
    idx = []
    for d in range(v):
        od = d + off
        if od < 0:
            idx.append("0")
        else:
            lines.append(f"{_I}b{d} = 0 if src.shape[{d}] == 1 else 1")
            idx.append(f"b{d} * i{od}")
    pad = _I
    for d in range(r):
        lines.append(f"{pad}for i{d} in range(out.shape[{d}]):")
        pad += _I
    out_idx = ", ".join(f"i{d}" for d in range(r))
    lines.append(f"{pad}out[{out_idx}] {_OPS[op]} src[{', '.join(idx)}]")
    return "\n".join(lines) + "\n"
