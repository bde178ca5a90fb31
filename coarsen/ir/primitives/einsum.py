"""``np.einsum`` in full, and the products above two dimensions it carries (``@`` with broadcast
batch axes, ``np.dot`` of N-D arrays).

Requires: ``core``, ``coarsen.codegen.build``, the runtime helpers ``_ein_*``
(``coarsen.codegen.runtime.einsum``, a loop nest per spec); the frontend
(``coarsen.frontend.static_attrs``) gives ``einsum`` the attribute ``spec``: the subscripts as a
string, the sublist form already spelled as one (``0..25`` as ``A..Z``, ``26..51`` as ``a..z``,
``Ellipsis`` as ``...``).
Guarantees:

* ``normalize(spec, ranks)``: NumPy's reading of a spec for operands of those ranks, as an
  ``EinSpec`` of letters only: ``...`` spelled out as letters the spec does not use (right
  aligned, the output's ellipsis axes first), the implicit output (no ``->``) as NumPy makes it
  (the ellipsis axes, then the letters that appear once, in ASCII order); a ``ValueError``
  with NumPy's reason for what NumPy refuses (an operand count or rank that does not match, a
  repeated or unknown output letter, ellipsis axes the output drops);
* the ``einsum`` type rule: any number of operands (scalars included), a float64 result of the
  output's rank; all operands integer or boolean is refused (NumPy would keep integers); the
  primal is the loop nest of the normalized spec (``np.einsum`` where the emitter speaks
  coarsen's input language), broadcasting axes of length 1 as NumPy's ``einsum`` does;
* the VJP of operand ``p`` is again an einsum: of the output's adjoint and the other operands,
  into ``p``'s letters and shape (its own letters summed, its diagonal written, its broadcast
  axes summed); forward mode: linear in each operand (``deflinear`` over every position);
* ``product_spec(op, na, nb)``: the spec of ``a @ b`` (batch axes broadcast, the core axes
  fixed) and ``np.dot(a, b)`` (nothing broadcast) for ranks above 2; ``emit_product`` and
  ``vjp_product`` emit them through the same loop nests (``linalg`` calls them).
"""
from __future__ import annotations

import string
from dataclasses import dataclass

from ...codegen import build as B
from ...codegen import runtime as R
from ...codegen.build import X
from .core import CostClass, Primitive, deflinear, defstructural, dt, err, make, nd, register

LETTERS = string.ascii_uppercase + string.ascii_lowercase     # the sublist form's 0..51
MAX_OPERANDS = 32
EINSUM_HINT = ("np.einsum('ij,jk->ik', A, B): letters, '...', any number of operands, "
               "or the sublist form np.einsum(A, [0, 1], B, [1, 2])")


@dataclass(frozen=True)
class EinSpec:
    """A normalized spec: one string of letters per operand, the output's letters; ``fixed``:
    the letters whose lengths must agree exactly (NumPy's ``einsum`` broadcasts the others)."""
    ins: tuple
    out: str
    fixed: str = ""

    def text(self):
        return ",".join(self.ins) + "->" + self.out


def _terms(spec):
    spec = spec.replace(" ", "")
    if spec.count("->") > 1:
        raise ValueError("more than one '->' in the subscripts")
    lhs, arrow, rhs = spec.partition("->")
    return lhs.split(","), (rhs if arrow else None)


def _split_term(term, what):
    """(letters before '...', letters after, has ellipsis) of one term."""
    if term.count("...") > 1 or term.replace("...", "").count("."):
        raise ValueError(f"{what} {term!r}: '.' only as one '...'")
    head, ell, tail = term.partition("...")
    for ch in head + tail:
        if ch not in LETTERS:
            raise ValueError(f"{what} {term!r}: {ch!r} is not a letter")
    return head, tail, bool(ell)


def normalize(spec, ranks):
    """``EinSpec`` of ``spec`` for operands of ``ranks`` (see the module docstring)."""
    terms, out = _terms(spec)
    if len(terms) != len(ranks):
        raise ValueError(f"the subscripts name {len(terms)} operand(s), but {len(ranks)} "
                         "are given")
    used = set(spec)
    spare = [c for c in LETTERS if c not in used]
    parts = [_split_term(t, f"operand {k + 1}'s subscripts") for k, t in enumerate(terms)]
    ell_counts = []
    for k, ((head, tail, ell), rank) in enumerate(zip(parts, ranks)):
        n = rank - len(head) - len(tail)
        if n < 0 or (n > 0 and not ell):
            raise ValueError(f"operand {k + 1} is {rank}-D but its subscripts "
                             f"{terms[k]!r} give it {len(head) + len(tail)} ind"
                             f"{'ex' if len(head) + len(tail) == 1 else 'ices'}")
        ell_counts.append(n if ell else 0)
    n_ell = max(ell_counts, default=0)
    if n_ell > len(spare):
        raise ValueError("the '...' axes need more letters than the subscripts leave")
    ell_letters = "".join(spare[:n_ell])
    ins = tuple(head + ell_letters[n_ell - n:] + tail
                for (head, tail, _), n in zip(parts, ell_counts))
    if out is None:
        seen = "".join(h + t for h, t, _ in parts)
        out = ell_letters + "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    else:
        head, tail, ell = _split_term(out, "the output's subscripts")
        if n_ell and not ell:
            raise ValueError("the output drops the '...' axes (write '...' in the output)")
        out = head + (ell_letters if ell else "") + tail
        for c in out:
            if out.count(c) > 1:
                raise ValueError(f"the output's subscripts repeat {c!r}")
            if not any(c in t for t in ins):
                raise ValueError(f"the output's index {c!r} is in no operand")
    return EinSpec(ins, out)


def spec_of(s, ranks):
    """The ``EinSpec`` of an ``einsum`` statement for operands of ``ranks`` (a CoarsenError
    where NumPy refuses it)."""
    spec = s.attr("spec")
    if not isinstance(spec, str):
        raise err(s, "np.einsum's subscripts must be a string constant", EINSUM_HINT)
    try:
        return normalize(spec, ranks)
    except ValueError as e:
        raise err(s, f"np.einsum {spec!r}: {e}", EINSUM_HINT) from None


def _einsum_type(c, s, ts):
    if not ts:
        raise err(s, "np.einsum needs at least one operand", EINSUM_HINT)
    if len(ts) > MAX_OPERANDS:
        raise err(s, f"np.einsum of {len(ts)} operands: at most {MAX_OPERANDS}")
    es = spec_of(s, [nd(t) for t in ts])
    if all(dt(t) != "f64" for t in ts):
        raise err(s, "np.einsum of integer or boolean operands only is not supported "
                     "(NumPy would compute in integers)", "convert one of them: x.astype(np.float64)")
    return make("f64", len(es.out))


def _stmt_spec(em, s):
    return spec_of(s, [em.nd(a) for a in s.args])


def emit_spec(em, es, values):
    """The primal of the normalized ``es`` on the operand expressions ``values``."""
    if em.input_language:
        return B.call("np.einsum", B.const(es.text()), *values)
    return B.call(em.helper(R.einsum(es.ins, es.out, False, es.fixed)), *values)


def _emit_einsum(em, s, v):
    return emit_spec(em, _stmt_spec(em, s), v)


def vjp_spec(em, es, s, p, g, pre_fwd, pre_rev, out_):
    """Add operand ``p``'s part of the adjoint ``g`` of ``s`` (the einsum ``es`` of its
    operands): einsum of ``g`` and the other operands into ``p``'s letters and shape."""
    arg = s.args[p]
    mine = es.ins[p]
    ins = (es.out,) + tuple(t for k, t in enumerate(es.ins) if k != p)
    vals = [g] + [em.val(a) for k, a in enumerate(s.args) if k != p]
    if mine:
        vals.append(em.shape_of(arg, pre_fwd, pre_rev) if arg.name in em.f.set_temps
                    else B.attr(f"{em.bar(arg.name)}.shape"))
    contrib = B.call(em.helper(R.einsum(ins, mine, bool(mine), es.fixed)), *vals)
    em.accumulate(arg.name, X(contrib, bool(mine)), pre_fwd, pre_rev, out_)


def _vjp_einsum(em, s, p, g, pre_fwd, pre_rev, out_):
    vjp_spec(em, _stmt_spec(em, s), s, p, g, pre_fwd, pre_rev, out_)


register(Primitive("einsum", _einsum_type, _emit_einsum, numpy=("einsum",), cost=CostClass.CALL))
defstructural("einsum", _vjp_einsum, tuple(range(MAX_OPERANDS)))
deflinear("einsum", tuple(range(MAX_OPERANDS)))       # forward mode: linear in each operand


# ------------------------------------------------------------------ @ and np.dot above 2-D
def product_spec(op, na, nb):
    """The ``EinSpec`` of ``a @ b`` (``op`` "matmul") or ``np.dot(a, b)`` for arrays of ranks
    ``na``, ``nb`` (both at least 1)."""
    if op == "matmul":
        a = "j" if na == 1 else "ij"
        b = "j" if nb == 1 else "jk"
        nba, nbb = max(na - 2, 0), max(nb - 2, 0)
        batch = LETTERS[:max(nba, nbb)]
        ins = (batch[len(batch) - nba:] + a, batch[len(batch) - nbb:] + b)
        out = batch + ("i" if na > 1 else "") + ("k" if nb > 1 else "")
        return EinSpec(ins, out, "ijk")
    a = LETTERS[:na - 1] + "j"
    b = "j" if nb == 1 else "pqrstuvwxyz"[:nb - 2] + "jk"
    out = a[:-1] + b.replace("j", "")
    return EinSpec((a, b), out, "".join(dict.fromkeys(a + b)))


def emit_product(em, s, v):
    if em.input_language:
        return B.binop(v[0], "@", v[1]) if s.op == "matmul" else B.call("np.dot", *v)
    return emit_spec(em, product_spec(s.op, em.nd(s.args[0]), em.nd(s.args[1])), v)


def vjp_product(em, s, p, g, pre_fwd, pre_rev, out_):
    es = product_spec(s.op, em.nd(s.args[0]), em.nd(s.args[1]))
    vjp_spec(em, es, s, p, g, pre_fwd, pre_rev, out_)
