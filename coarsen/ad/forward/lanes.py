"""SIMD lanes for the vector JVP of forward over reverse: a Numba type ``Lanes(K)`` holding the
tangents of K directions of one float as one LLVM vector ``<K x double>``, so that the K lanes
of a tangent statement are K-wide vector instructions (Numba's LLVM keeps the vector in
registers across loop iterations; Numba runs no SLP vectorizer, so K unrolled scalar lanes
stay scalar code).

Requires: Numba and llvmlite (this module registers the type, its operators and the
functions below with Numba when it is imported; the generated modules that use it import it).
Guarantees:

* ``lanes_zeros(K)`` (``K`` a literal int): K lanes of ``0.0``.
* ``lanes_at(a, idx, K)``: the K lanes of element ``idx`` of a lane-last, C-contiguous array
  ``a`` (shape ``shape + (K,)``; ``idx`` an int, a tuple of ints, or ``()`` for a 1-D array
  of K), read from ``a[idx + (0,)]`` on; ``lanes_put(a, idx, v)`` writes them.  A negative
  index counts from the end, as Numba's indexing; no bounds checks (as Numba's indexing: the
  generated code checks its indices on the primal arrays, which have the same leading axes).
* ``+``, ``-``, ``*``, ``/`` of two ``Lanes(K)``, or of ``Lanes(K)`` and a float or an int
  (converted to float64 as Numba converts it, then broadcast), and unary ``-``: lane by lane
  the IEEE operation Numba emits for two floats (``fadd``/``fsub``/``fmul``/``fdiv``, no
  fast-math flags, no contraction; negation as ``-0.0 - x``), so lane k of an expression is
  the scalar expression on lane k's values, bit for bit.
"""
from __future__ import annotations

import operator

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.typing.templates import AbstractTemplate, infer_global, signature
from numba.extending import intrinsic, lower_builtin, models, register_model

__all__ = ["Lanes", "lanes_at", "lanes_put", "lanes_zeros"]

_F64 = ir.DoubleType()
_I32 = ir.IntType(32)


class Lanes(types.Type):
    """K float64 lanes (one LLVM vector)."""

    def __init__(self, n):
        self.n = int(n)
        super().__init__(name=f"Lanes({self.n})")


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(_F64, fe_type.n))


def _scalar_ok(t):
    return isinstance(t, (types.Float, types.Integer)) and not isinstance(t, types.Boolean)


def _broadcast(builder, n, val, fromty):
    """``val`` (a ``Lanes`` value, or a number of type ``fromty``) as a vector of ``n``."""
    if isinstance(fromty, Lanes):
        return val
    if isinstance(fromty, types.Integer):
        val = (builder.sitofp if fromty.signed else builder.uitofp)(val, _F64)
    elif fromty.bitwidth < 64:
        val = builder.fpext(val, _F64)
    vt = ir.VectorType(_F64, n)
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, n), [0] * n))


def _register_binop(op, inst):
    class _Typing(AbstractTemplate):
        def generic(self, args, kws):
            if len(args) != 2 or kws:
                return None
            a, b = args
            lanes = [t for t in args if isinstance(t, Lanes)]
            if not lanes or not all(isinstance(t, Lanes) or _scalar_ok(t) for t in args):
                return None
            if len(lanes) == 2 and a.n != b.n:
                return None
            return signature(lanes[0], a, b)

    infer_global(op)(_Typing)

    def _lower(context, builder, sig, args):
        n = sig.return_type.n
        x = _broadcast(builder, n, args[0], sig.args[0])
        y = _broadcast(builder, n, args[1], sig.args[1])
        return getattr(builder, inst)(x, y)

    for pair in ((Lanes, Lanes), (Lanes, types.Number), (types.Number, Lanes)):
        lower_builtin(op, *pair)(_lower)


for _op, _inst in ((operator.add, "fadd"), (operator.sub, "fsub"), (operator.mul, "fmul"),
                   (operator.truediv, "fdiv")):
    _register_binop(_op, _inst)


@infer_global(operator.neg)
class _NegTyping(AbstractTemplate):
    def generic(self, args, kws):
        if len(args) == 1 and not kws and isinstance(args[0], Lanes):
            return signature(args[0], args[0])
        return None


@lower_builtin(operator.neg, Lanes)
def _neg(context, builder, sig, args):
    # as Numba negates a float: -0.0 - x
    n = sig.return_type.n
    return builder.fsub(ir.Constant(ir.VectorType(_F64, n), [-0.0] * n), args[0])


@intrinsic
def lanes_zeros(typingctx, n):
    """K lanes of 0.0."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    lanes = Lanes(n.literal_value)

    def codegen(context, builder, sig, args):
        return ir.Constant(ir.VectorType(_F64, lanes.n), [0.0] * lanes.n)
    return lanes(n), codegen


def _index_values(builder, idxty, idx):
    if isinstance(idxty, types.BaseTuple):
        return [v for v in cgutils.unpack_tuple(builder, idx, len(idxty))]
    return [idx]


def _index_ok(arr, idx):
    if not (isinstance(arr, types.Array) and arr.layout == "C" and arr.dtype == types.float64):
        return False
    ints = list(idx) if isinstance(idx, types.BaseTuple) else [idx]
    return all(isinstance(t, types.Integer) for t in ints) and len(ints) == arr.ndim - 1


def _lane_pointer(context, builder, arrty, arr, idxty, idx, n):
    """The pointer to ``arr[idx + (0,)]`` as a pointer to ``<n x double>``."""
    ary = context.make_array(arrty)(context, builder, arr)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(
        _index_values(builder, idxty, idx),
        list(idxty) if isinstance(idxty, types.BaseTuple) else [idxty])]
    inds.append(ir.Constant(ir.IntType(64), 0))
    shapes = cgutils.unpack_tuple(builder, ary.shape, arrty.ndim)
    strides = cgutils.unpack_tuple(builder, ary.strides, arrty.ndim)
    # a negative index counts from the end, as Numba's own indexing reads it
    ptr = cgutils.get_item_pointer2(context, builder, ary.data, shapes, strides, arrty.layout,
                                    inds, wraparound=True)
    return builder.bitcast(ptr, ir.PointerType(ir.VectorType(_F64, n)))


@intrinsic
def lanes_at(typingctx, arr, idx, n):
    """The K lanes of element ``idx`` of the lane-last array ``arr``."""
    if not isinstance(n, types.IntegerLiteral) or not _index_ok(arr, idx):
        return None
    lanes = Lanes(n.literal_value)

    def codegen(context, builder, sig, args):
        ptr = _lane_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                            lanes.n)
        return builder.load(ptr, align=8)
    return lanes(arr, idx, n), codegen


@intrinsic
def lanes_put(typingctx, arr, idx, v):
    """Write the K lanes ``v`` into element ``idx`` of the lane-last array ``arr``."""
    if not isinstance(v, Lanes) or not _index_ok(arr, idx):
        return None

    def codegen(context, builder, sig, args):
        ptr = _lane_pointer(context, builder, sig.args[0], args[0], sig.args[1], args[1], v.n)
        builder.store(args[2], ptr, align=8)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen

