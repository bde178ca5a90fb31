"""The loop nest of one ``np.einsum`` spec, as the source of a runtime helper (Numba has no
``einsum``).

Requires: nothing of coarsen (the bottom code-generation layer); a normalized spec: one string
of letters per operand (``""``: a scalar operand; a letter may repeat within one operand, a
diagonal), an output string of letters (a letter repeats there only in a VJP, which writes a
diagonal of the operand's adjoint).
Guarantees: ``einsum_name(ins, out, shape, fixed)`` is the helper's name, a function of all its
parameters; ``einsum_source(...)`` its text: ``def NAME(x0, x1, ..., [shape])`` computes
``np.einsum(",".join(ins) + "->" + out, x0, x1, ...)`` as NumPy does, by a loop over every
letter (the output's first) that adds ``x0[..] * x1[..] * ...`` into a float64 result:

* each letter's length is the operands' common length along its axes, where an axis of length
  1 is broadcast, as NumPy's ``einsum`` does for every letter; a ``ValueError`` where two
  lengths differ and neither is 1; the letters of ``fixed`` (the core axes of ``@`` and
  ``np.dot``, which NumPy never broadcasts) and a letter repeated within one operand must have
  equal lengths, else ``ValueError``; an axis that is broadcast is read at index 0 (its index
  times a 0/1 factor computed once, only for letters that appear more than once; where every
  factor is 1, a copy of the loops without them runs);
* with ``shape`` the result has that shape (the adjoint of an operand: its axes take part in
  the lengths like an operand's, a letter only the result has takes its length there, and a
  broadcast axis of length 1 sums its letter); without it the result is
  ``np.zeros((n_a, n_b, ...))`` of the output's letters, or the float ``0.0`` (an output of no
  letter).
"""
from __future__ import annotations


def einsum_name(ins, out, shape=False, fixed=""):
    """The helper's name: ``_ein_<in0>_<in1>__<out>`` (``0`` for a scalar), ``__s`` with a
    result shape, ``__x<letters>`` with letters that do not broadcast."""
    name = "_ein_" + "_".join(t or "0" for t in ins) + "__" + (out or "0")
    if shape:
        name += "__s"
    if fixed:
        name += "__x" + fixed
    return name


def _sites(ins, out, shape):
    """letter -> [(array name, axis)] where its length is read."""
    sites = {}
    for k, term in enumerate(ins):
        for ax, c in enumerate(term):
            sites.setdefault(c, []).append((f"x{k}", ax))
    if shape:
        for ax, c in enumerate(out):
            sites.setdefault(c, []).append(("shape", ax))
    return sites


def _dim(arr, ax):
    return f"shape[{ax}]" if arr == "shape" else f"{arr}.shape[{ax}]"


def _nest(ins, out, shape, factors, pad):
    """The loops over every letter (the output's first) and the product added in."""
    lines = []
    for c in dict.fromkeys(out + "".join(ins)):
        lines.append(f"{pad}for {c}_ in range(n_{c}):")
        pad += "    "

    def at(arr, term):
        if not term:
            return arr
        idx = []
        for ax, c in enumerate(term):
            f = factors.get((arr, ax))
            idx.append(f"{c}_ * {f}" if f else f"{c}_")
        return f"{arr}[{', '.join(idx)}]"

    prod = " * ".join(at(f"x{k}", t) for k, t in enumerate(ins)) or "1.0"
    if out:
        target = at("shape", out).replace("shape[", "out[", 1)
        lines.append(f"{pad}{target} += {prod}")
    else:
        lines.append(f"{pad}out += {prod}")
    return lines


def einsum_source(ins, out, shape=False, fixed=""):
    """The helper's source (see the module docstring)."""
    ins = tuple(ins)
    args = [f"x{k}" for k in range(len(ins))] + (["shape"] if shape else [])
    lines = [f"def {einsum_name(ins, out, shape, fixed)}({', '.join(args)}):"]
    sites = _sites(ins, out, shape)
    if not shape and any(c not in sites for c in out):
        raise ValueError(f"einsum output letters {out!r} not in the operands {ins!r}")
    factors = {}          # (array, axis) -> the name of its 0/1 factor
    for c, where in sites.items():
        n = f"n_{c}"
        lines.append(f"    {n} = {_dim(*where[0])}")
        for arr, ax in where[1:]:
            d = _dim(arr, ax)
            strict = c in fixed or arr == where[0][0] or \
                sum(1 for a, _ in where if a == arr) > 1
            if strict:
                lines.append(f"    if {d} != {n}:")
                lines.append(f"        raise ValueError('einsum: the lengths of the index {c} differ')")
            else:
                lines.append(f"    if {n} == 1:")
                lines.append(f"        {n} = {d}")
                lines.append(f"    elif {d} != {n} and {d} != 1:")
                lines.append(f"        raise ValueError('einsum: operands could not be broadcast "
                             f"together on the index {c}')")
        if len(where) > 1 and c not in fixed:
            for arr, ax in where:
                f = f"m_{arr}_{ax}"
                factors[(arr, ax)] = f
        # a letter repeated within one operand: its lengths were checked equal above
    for (arr, ax), f in factors.items():
        lines.append(f"    {f} = 0 if {_dim(arr, ax)} == 1 else 1")
    if out and shape:
        lines.append("    out = np.zeros(shape)")
    elif out:
        lines.append(f"    out = np.zeros(({''.join(f'n_{c}, ' for c in out)}))")
    else:
        lines.append("    out = 0.0")
    if factors:     # no axis broadcast: the loops without the factors
        lines.append(f"    if {' and '.join(f'{f} == 1' for f in factors.values())}:")
        lines += _nest(ins, out, shape, {}, "        ")
        lines.append("    else:")
        lines += _nest(ins, out, shape, factors, "        ")
    else:
        lines += _nest(ins, out, shape, factors, "    ")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
