"""The loops of ``np.repeat``, ``np.tile`` (one axis), ``np.roll`` and ``np.kron`` of N-D arrays,
and their adjoints, as the source of runtime helpers generated per rank and axis (Numba has no
``np.repeat``/``np.roll`` along an axis, no ``np.tile``, no ``np.kron``).

Requires: nothing of coarsen (the bottom code-generation layer).
Guarantees:

* ``along_source(kind, rank, ax, adj)``: ``def NAME(x, r)`` (``adj``: ``def NAME(g, r, n)``),
  slices and elements along axis ``ax`` of a ``rank``-D array, the other axes whole:
  ``repeat`` puts element ``i`` of the axis at ``i * r .. i * r + r - 1`` (NumPy's
  ``np.repeat``; a negative count raises its ``ValueError``), ``tile`` puts the whole axis at
  ``k * n .. k * n + n - 1`` for each ``k < r`` (one axis of ``np.tile``; a negative count
  raises), ``roll`` moves element ``i`` to ``(i + r) % n`` (``np.roll``; an empty axis stays
  empty).  The result is a new array of ``x``'s dtype.  The adjoints take the output's adjoint
  ``g`` and the operand's length ``n`` along the axis and return a new float array: the sum
  over the copies (``repeat``, ``tile``), the roll by ``-r``.
* ``kron_source(rank, adj, dtype)``: ``def NAME(a, b)`` is ``np.kron`` of two ``rank``-D arrays
  (element ``(i0 * m0 + j0, i1 * m1 + j1, ...)`` is ``a[i] * b[j]``, one multiplication), of
  dtype ``"f64"`` or ``"i64"``; ``adj`` ``"a"``: ``def NAME(g, b, shape)`` the adjoint of ``a``
  (``a_bar[i] = sum_j g[...] * b[j]``), ``"b"``: ``def NAME(g, a, shape)`` of ``b``.
"""
from __future__ import annotations

_INDENT = "    "


def along_name(kind, rank, ax, adj):
    return f"_{kind}_{rank}_{ax}" + ("_adj" if adj else "")


def _at(rank, ax, k):
    """The subscript text with ``k`` at axis ``ax`` and every other axis whole."""
    idx = [":"] * rank
    idx[ax] = k
    return ", ".join(idx)


def _shape(rank, ax, arr, length):
    dims = [f"{arr}.shape[{d}]" if d != ax else length for d in range(rank)]
    return "(" + ", ".join(dims) + ("," if rank == 1 else "") + ")"


def along_source(kind, rank, ax, adj):
    name = along_name(kind, rank, ax, adj)
    at = lambda k: _at(rank, ax, k)           # noqa: E731
    if kind == "roll":
        arr = "g" if adj else "x"
        shift = "-r" if adj else "r"
        head = f"def {name}(g, r, n):" if adj else f"def {name}(x, r):"
        body = [f"n = {arr}.shape[{ax}]",
                f"out = np.empty({arr}.shape, {'np.float64' if adj else arr + '.dtype'})",
                "if n == 0:", _INDENT + "return out",
                f"s = ({shift}) % n",
                f"out[{at('s:')}] = {arr}[{at(':n - s')}]",
                f"out[{at(':s')}] = {arr}[{at('n - s:')}]",
                "return out"]
    elif not adj:
        message = "repeats may not contain negative values." if kind == "repeat" else \
            "negative dimensions are not allowed"
        head = f"def {name}(x, r):"
        body = ["if r < 0:", _INDENT + f"raise ValueError({message!r})",
                f"n = x.shape[{ax}]",
                f"out = np.empty({_shape(rank, ax, 'x', 'n * r')}, x.dtype)"]
        if kind == "repeat":
            body += ["for i in range(n):", _INDENT + "for j in range(r):",
                     2 * _INDENT + f"out[{at('i * r + j')}] = x[{at('i')}]"]
        else:
            body += ["for k in range(r):", _INDENT + f"out[{at('k * n:(k + 1) * n')}] = x"]
        body.append("return out")
    else:
        head = f"def {name}(g, r, n):"
        body = [f"out = np.zeros({_shape(rank, ax, 'g', 'n')})"]
        if kind == "repeat":
            body += ["for i in range(n):", _INDENT + "for j in range(r):",
                     2 * _INDENT + f"out[{at('i')}] += g[{at('i * r + j')}]"]
        else:
            body += ["for k in range(r):", _INDENT + f"out += g[{at('k * n:(k + 1) * n')}]"]
        body.append("return out")
    return "\n" + head + "\n" + "\n".join(_INDENT + line for line in body) + "\n"


def kron_name(rank, adj, dtype):
    return f"_kron{rank}" + (f"_adj_{adj}" if adj else "") + ("_i" if dtype == "i64" else "")


def kron_source(rank, adj, dtype):
    name = kron_name(rank, adj, dtype)
    ii = [f"i{d}" for d in range(rank)]
    jj = [f"j{d}" for d in range(rank)]
    a_idx, b_idx = ", ".join(ii), ", ".join(jj)
    o_idx = ", ".join(f"i{d} * m{d} + j{d}" for d in range(rank))
    lines = []
    if not adj:
        head = f"def {name}(a, b):"
        dims = ", ".join(f"a.shape[{d}] * b.shape[{d}]" for d in range(rank))
        lines.append(f"out = np.empty(({dims}{',' if rank == 1 else ''}), "
                     f"{'np.int64' if dtype == 'i64' else 'np.float64'})")
    elif adj == "a":
        head = f"def {name}(g, b, shape):"
        lines.append("out = np.zeros(shape)")
    else:
        head = f"def {name}(g, a, shape):"
        lines.append("out = np.zeros(shape)")
    for d in range(rank):
        lines.append(f"n{d} = {'shape' if adj == 'a' else 'a.shape'}[{d}]")
        lines.append(f"m{d} = {'shape' if adj == 'b' else 'b.shape'}[{d}]")
    loops = [f"for i{d} in range(n{d}):" for d in range(rank)] + \
            [f"for j{d} in range(m{d}):" for d in range(rank)]
    for k, loop in enumerate(loops):
        lines.append(_INDENT * k + loop)
    inner = _INDENT * len(loops)
    if not adj:
        lines.append(inner + f"out[{o_idx}] = a[{a_idx}] * b[{b_idx}]")
    elif adj == "a":
        lines.append(inner + f"out[{a_idx}] += g[{o_idx}] * b[{b_idx}]")
    else:
        lines.append(inner + f"out[{b_idx}] += g[{o_idx}] * a[{a_idx}]")
    lines.append("return out")
    return "\n" + head + "\n" + "\n".join(_INDENT + line for line in lines) + "\n"
