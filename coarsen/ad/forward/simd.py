"""The SIMD form of a vector JVP: the single-direction tangent code of forward mode rewritten
so that every tangent holds K lanes at once, a float's tangent one ``Lanes(K)`` vector
(``coarsen.ad.forward.lanes``) and an array's tangent one lane-last array of shape
``shape + (K,)`` (the K lanes of an element contiguous), so that each tangent statement is
K-wide vector code and an element's lanes are one vector load or store.

Requires: the statements ``ForwardEmitter.block`` gave for one direction (``directions=0``)
and that emitter (``names``: the tangents' names; ``types``: every name's IR type).
Guarantees: ``simd_body(stmts, em, K)`` returns the rewritten statements (new nodes; the
primal statements unchanged) or raises ``NotVectorized`` (with the reason) where the code
has a tangent form the rewrite does not know: it never guesses.  What it rewrites:

* a float tangent assigned ``0.0`` gets ``_lanes_zeros(K)``; an array tangent's
  ``np.zeros_like(x)`` becomes ``np.zeros(x.shape + (K,))``;
* an element read of an array tangent ``x_dot[i, j]`` (as many integer indices as ``x``'s
  rank) becomes ``_lanes_at(x_dot, (i, j), K)``; an element store ``x_dot[i, j] = v``
  becomes ``_lanes_put(x_dot, (i, j), v)``, ``x_dot[i, j] += v`` becomes
  ``_lanes_put(x_dot, (i, j), _lanes_at(x_dot, (i, j), K) + v)`` (the same operation);
  ``t_dot += v`` on a float tangent becomes ``t_dot = t_dot + v``;
* everything else is kept as written where it is known to mean the same lane by lane:
  ``+``, ``-``, ``*``, ``/`` and unary ``-`` of float tangents with each other or with
  primal floats (each lane the scalar operation, bit for bit: ``Lanes``' operators), of
  array tangents with each other (the lane axis is last, so NumPy's broadcasting of the
  primal shapes is unchanged) or with primal floats; basic slices of array tangents
  (integers and slices on the leading axes: the lane axis stays last); ``.copy()``.
  A tangent anywhere else (a call, a comparison, an attribute such as ``.shape``, an
  operand beside a primal array or an expression of unknown kind) raises ``NotVectorized``.
So lane k of the result is what the single-direction code computes for direction k,
operation for operation.
"""
from __future__ import annotations

import copy

import gast

from ...ir.nodes import Array
from ...codegen import build as B

__all__ = ["NotVectorized", "simd_body", "LANE_HELPERS"]

#: the names the rewritten code calls, imported from ``coarsen.ad.forward.lanes``
LANE_HELPERS = {"_lanes_zeros": "lanes_zeros", "_lanes_at": "lanes_at",
                "_lanes_put": "lanes_put"}

# kinds of expressions: primal float (S), primal array (A), primal of unknown kind (U),
# float tangent (L: Lanes), array tangent (T: lane-last array)
S, A, U, L, T = "S", "A", "U", "L", "T"
TANGENT = (L, T)
_ARITH = (gast.Add, gast.Sub, gast.Mult, gast.Div)
_SCALAR_CALLS = {"float", "abs", "min", "max", "int"}


class NotVectorized(Exception):
    """The tangent code has a form the SIMD rewrite does not know (the reason)."""


def simd_body(stmts, em, lanes):
    """The statements with K-lane tangents (see the module docstring)."""
    return _Rewrite(em, lanes).block(stmts)


class _Rewrite:
    def __init__(self, em, lanes):
        self.k = lanes
        self.types = em.types
        self.tangents = {}          # tangent name -> (kind, rank)
        for d in em.names.values():
            t = em.types.get(d)
            self.tangents[d] = (T, t.ndim) if isinstance(t, Array) else (L, 0)

    # ------------------------------------------------------------------ expressions
    def kind_of_name(self, n):
        if n in self.tangents:
            return self.tangents[n][0]
        t = self.types.get(n)
        if t is None:
            return U
        return A if isinstance(t, Array) else S

    def zeros(self):
        return B.call("_lanes_zeros", B.const(self.k))

    def expr(self, node):
        """``(rewritten node, kind)``."""
        if isinstance(node, gast.Name):
            return node, self.kind_of_name(node.id)
        if isinstance(node, gast.Constant):
            ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
            return node, S if ok else U
        if isinstance(node, gast.BinOp):
            return self.binop(node)
        if isinstance(node, gast.UnaryOp):
            operand, k = self.expr(node.operand)
            if k in TANGENT and not isinstance(node.op, (gast.USub, gast.UAdd)):
                raise NotVectorized(f"{type(node.op).__name__} of a tangent")
            return gast.UnaryOp(op=node.op, operand=operand), k
        if isinstance(node, gast.Subscript):
            return self.subscript(node)
        if isinstance(node, gast.Call):
            return self.call(node)
        # attributes, comparisons, conditionals, tuples...: primal only
        self.primal_only(node)
        return node, U

    def primal_only(self, node):
        for sub in gast.walk(node):
            if isinstance(sub, gast.Name) and sub.id in self.tangents:
                raise NotVectorized(f"the tangent {sub.id} in a {type(node).__name__}")

    def binop(self, node):
        left, kl = self.expr(node.left)
        right, kr = self.expr(node.right)
        out = gast.BinOp(left=left, op=node.op, right=right)
        if kl not in TANGENT and kr not in TANGENT:
            return out, A if A in (kl, kr) else (S if kl == kr == S else U)
        if not isinstance(node.op, _ARITH):
            raise NotVectorized(f"{type(node.op).__name__} of a tangent")
        kinds = {kl, kr}
        if kinds <= {L, S}:
            return out, L
        if kinds <= {T, S}:
            return out, T
        raise NotVectorized(f"a tangent ({'/'.join(sorted(k for k in kinds if k in TANGENT))}) "
                            f"combined with a {'primal array' if A in kinds else 'value'} "
                            "of another kind")

    def index_parts(self, node):
        """``(index node, [(node, kind)], has slices)`` of a subscript's index."""
        idx = node.slice
        elts = list(idx.elts) if isinstance(idx, gast.Tuple) else [idx]
        parts, sliced = [], False
        for e in elts:
            if isinstance(e, gast.Slice):
                sliced = True
                for b in (e.lower, e.upper, e.step):
                    if b is not None and self.expr(b)[1] != S:
                        raise NotVectorized("a slice bound that is not a primal int")
                parts.append((e, None))
            else:
                e2, k = self.expr(e)
                if k != S:
                    raise NotVectorized("an index of a tangent that is not a primal int")
                parts.append((e2, k))
        return parts, sliced

    def subscript(self, node):
        base = node.value
        if isinstance(base, gast.Name) and base.id in self.tangents:
            kind, rank = self.tangents[base.id]
            if kind != T:
                raise NotVectorized(f"a subscript of the float tangent {base.id}")
            parts, sliced = self.index_parts(node)
            if sliced or len(parts) < rank:
                return node, T              # basic indexing on the leading axes
            if len(parts) != rank:
                raise NotVectorized(f"{len(parts)} indices into {base.id} of rank {rank}")
            return B.call("_lanes_at", base, self.element_index(parts), B.const(self.k)), L
        self.primal_only(node)
        if isinstance(base, gast.Name) and isinstance(self.types.get(base.id), Array):
            elts = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
            if len(elts) == self.types[base.id].ndim and all(
                    not isinstance(e, gast.Slice) and self.expr(e)[1] == S for e in elts):
                return node, S              # an element of a primal array
        return node, U

    @staticmethod
    def element_index(parts):
        nodes = [p for p, _ in parts]
        return nodes[0] if len(nodes) == 1 else gast.Tuple(elts=nodes, ctx=gast.Load())

    def call(self, node):
        f = node.func
        if isinstance(f, gast.Attribute) and f.attr == "copy" and not node.args \
                and not node.keywords:
            base, k = self.expr(f.value)
            if k == T:
                return node, T
            if k == L:
                raise NotVectorized("copy of a float tangent")
        self.primal_only(node)
        kinds = [self.expr(a)[1] for a in node.args]
        fname = f.id if isinstance(f, gast.Name) else None
        scalar = fname in _SCALAR_CALLS or (isinstance(f, gast.Attribute)
                                            and isinstance(f.value, gast.Name)
                                            and f.value.id == "math")
        if scalar and all(k == S for k in kinds) and not node.keywords:
            return node, S
        return node, U

    # ------------------------------------------------------------------ statements
    def block(self, stmts):
        out = []
        for st in stmts:
            new = self.stmt(st)
            if new and new[0] is not st:
                for attr in ("coarsen_comment", "_coarsen_loc"):
                    if hasattr(st, attr):
                        setattr(new[0], attr, getattr(st, attr))
            out.extend(new)
        return out

    def stmt(self, st):
        if isinstance(st, gast.Assign):
            if len(st.targets) != 1:
                raise NotVectorized("an assignment to several targets")
            return [self.assign(st, st.targets[0], st.value)]
        if isinstance(st, gast.AugAssign):
            return [self.augassign(st)]
        if isinstance(st, gast.If):
            self.primal_only(st.test)
            new = copy.copy(st)
            new.body, new.orelse = self.block(st.body), self.block(st.orelse)
            return [new]
        if isinstance(st, gast.For):
            self.primal_only(st.target)
            self.primal_only(st.iter)
            if st.orelse:
                raise NotVectorized("a for loop with an else")
            new = copy.copy(st)
            new.body = self.block(st.body)
            return [new]
        if isinstance(st, gast.While):
            self.primal_only(st.test)
            if st.orelse:
                raise NotVectorized("a while loop with an else")
            new = copy.copy(st)
            new.body = self.block(st.body)
            return [new]
        if isinstance(st, (gast.Expr, gast.Raise, gast.Pass, gast.Break, gast.Continue)):
            self.primal_only(st)
            return [st]
        raise NotVectorized(f"a {type(st).__name__} statement")

    def assign(self, st, target, value):
        v, k = self.expr(value)
        if isinstance(target, gast.Name) and target.id in self.tangents:
            want = self.tangents[target.id][0]
            if want == L:
                if k == L:
                    return B.assign(target.id, v)
                if _is_zero(value):
                    return B.assign(target.id, self.zeros())
            elif k == T:
                return B.assign(target.id, v)
            elif _is_zeros_like(value):
                shape = gast.Attribute(value=value.args[0], attr="shape", ctx=gast.Load())
                return B.assign(target.id, B.call("np.zeros", B.binop(
                    shape, "+", B.tuple_(B.const(self.k)))))
            raise NotVectorized(f"the tangent {target.id} assigned a value of kind {k}")
        if isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name) \
                and target.value.id in self.tangents:
            base = target.value
            kind, rank = self.tangents[base.id]
            if kind != T:
                raise NotVectorized(f"a store into the float tangent {base.id}")
            parts, sliced = self.index_parts(target)
            if not sliced and len(parts) == rank:
                if k != L:
                    if not _is_zero(value):
                        raise NotVectorized(f"an element of {base.id} assigned a value of "
                                            f"kind {k}")
                    v = self.zeros()
                return gast.Expr(value=B.call("_lanes_put", base, self.element_index(parts), v))
            if k == T or _is_zero(value):
                return gast.Assign(targets=[target], value=v, type_comment=None)
            raise NotVectorized(f"a region of {base.id} assigned a value of kind {k}")
        if k in TANGENT:
            raise NotVectorized("a tangent assigned to a primal variable")
        self.primal_only(target)
        return gast.Assign(targets=[target], value=v, type_comment=None)

    def augassign(self, st):
        target = st.target
        if not isinstance(st.op, (gast.Add, gast.Sub)):
            self.primal_only(st)
            return st
        v, k = self.expr(st.value)
        if isinstance(target, gast.Name) and target.id in self.tangents:
            kind = self.tangents[target.id][0]
            if kind == L and k in (L, S):
                return B.assign(target.id, gast.BinOp(left=B.name(target.id), op=st.op, right=v))
            if kind == T and k in (T, S):
                return gast.AugAssign(target=target, op=st.op, value=v)
            raise NotVectorized(f"{target.id} updated with a value of kind {k}")
        if isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name) \
                and target.value.id in self.tangents:
            base = target.value
            kind, rank = self.tangents[base.id]
            if kind != T:
                raise NotVectorized(f"a store into the float tangent {base.id}")
            parts, sliced = self.index_parts(target)
            if not sliced and len(parts) == rank and k == L:
                idx = self.element_index(parts)
                old = B.call("_lanes_at", base, idx, B.const(self.k))
                return gast.Expr(value=B.call("_lanes_put", base, copy.deepcopy(idx),
                                              gast.BinOp(left=old, op=st.op, right=v)))
            if (sliced or len(parts) < rank) and k in (T, S):
                return gast.AugAssign(target=target, op=st.op, value=v)
            raise NotVectorized(f"an update of {base.id} with a value of kind {k}")
        if k in TANGENT:
            raise NotVectorized("a tangent added to a primal variable")
        self.primal_only(target)
        return gast.AugAssign(target=target, op=st.op, value=v)


def _is_zero(node):
    return isinstance(node, gast.Constant) and not isinstance(node.value, bool) \
        and isinstance(node.value, (int, float)) and node.value == 0


def _is_zeros_like(node):
    return isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
        and node.func.attr == "zeros_like" and isinstance(node.func.value, gast.Name) \
        and node.func.value.id == "np" and len(node.args) == 1 and not node.keywords \
        and isinstance(node.args[0], gast.Name)
