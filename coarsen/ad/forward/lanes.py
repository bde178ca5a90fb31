"""SIMD lanes for the vector JVP of forward over reverse: a Numba type ``Lanes(K)`` holding the
tangents of K directions of one float as LLVM vectors (``K / 8`` vectors ``<8 x double>``
where 8 divides K, else one ``<K x double>``), so that the K lanes of a tangent statement are
vector instructions (Numba's LLVM keeps the vectors in registers across loop iterations;
Numba runs no SLP vectorizer, so K unrolled scalar lanes stay scalar code).

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
    """K float64 lanes: ``K / 8`` LLVM vectors of 8 where 8 divides K, else one vector of K
    (Numba's LLVM makes a single vector of 24 lanes into scalar code; chunks of 8, one
    AVX-512 register each, stay vectors)."""

    def __init__(self, n):
        self.n = int(n)
        super().__init__(name=f"Lanes({self.n})")

    @property
    def width(self):
        return 8 if self.n % 8 == 0 else self.n

    @property
    def chunks(self):
        return self.n // self.width


def _vector_type(lanes):
    return ir.VectorType(_F64, lanes.width)


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.ArrayType(_vector_type(fe_type), fe_type.chunks))


def _scalar_ok(t):
    return isinstance(t, (types.Float, types.Integer)) and not isinstance(t, types.Boolean)


def _chunks(builder, lanes, val):
    return [builder.extract_value(val, i) for i in range(lanes.chunks)]


def _pack(builder, lanes, chunks):
    out = ir.Constant(ir.ArrayType(_vector_type(lanes), lanes.chunks), ir.Undefined)
    for i, c in enumerate(chunks):
        out = builder.insert_value(out, c, i)
    return out


def _broadcast(builder, lanes, val, fromty):
    """The chunks of ``val``: a ``Lanes`` value's, or a number of type ``fromty`` splat."""
    if isinstance(fromty, Lanes):
        return _chunks(builder, lanes, val)
    if isinstance(fromty, types.Integer):
        val = (builder.sitofp if fromty.signed else builder.uitofp)(val, _F64)
    elif fromty.bitwidth < 64:
        val = builder.fpext(val, _F64)
    vt = _vector_type(lanes)
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, ir.Constant(_I32, 0))
    v = builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                               ir.Constant(ir.VectorType(_I32, lanes.width), [0] * lanes.width))
    return [v] * lanes.chunks


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
        lanes = sig.return_type
        xs = _broadcast(builder, lanes, args[0], sig.args[0])
        ys = _broadcast(builder, lanes, args[1], sig.args[1])
        return _pack(builder, lanes, [getattr(builder, inst)(x, y) for x, y in zip(xs, ys)])

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
    lanes = sig.return_type
    zero = ir.Constant(_vector_type(lanes), [-0.0] * lanes.width)
    return _pack(builder, lanes, [builder.fsub(zero, x) for x in _chunks(builder, lanes, args[0])])


@intrinsic
def lanes_zeros(typingctx, n):
    """K lanes of 0.0."""
    if not isinstance(n, types.IntegerLiteral):
        return None
    lanes = Lanes(n.literal_value)

    def codegen(context, builder, sig, args):
        zero = ir.Constant(_vector_type(lanes), [0.0] * lanes.width)
        return ir.Constant(ir.ArrayType(_vector_type(lanes), lanes.chunks), [zero] * lanes.chunks)
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


def _lane_pointers(context, builder, arrty, arr, idxty, idx, lanes):
    """The pointers to the chunks of ``arr[idx + (0,)]`` on (pointers to vectors)."""
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
    ptr = builder.bitcast(ptr, ir.PointerType(_vector_type(lanes)))
    return [builder.gep(ptr, [ir.Constant(ir.IntType(64), i)]) for i in range(lanes.chunks)]


@intrinsic
def lanes_at(typingctx, arr, idx, n):
    """The K lanes of element ``idx`` of the lane-last array ``arr``."""
    if not isinstance(n, types.IntegerLiteral) or not _index_ok(arr, idx):
        return None
    lanes = Lanes(n.literal_value)

    def codegen(context, builder, sig, args):
        ptrs = _lane_pointers(context, builder, sig.args[0], args[0], sig.args[1], args[1],
                              lanes)
        return _pack(builder, lanes, [builder.load(p, align=8) for p in ptrs])
    return lanes(arr, idx, n), codegen


@intrinsic
def lanes_put(typingctx, arr, idx, v):
    """Write the K lanes ``v`` into element ``idx`` of the lane-last array ``arr``."""
    if not isinstance(v, Lanes) or not _index_ok(arr, idx):
        return None

    def codegen(context, builder, sig, args):
        ptrs = _lane_pointers(context, builder, sig.args[0], args[0], sig.args[1], args[1], v)
        for p, c in zip(ptrs, _chunks(builder, v, args[2])):
            builder.store(c, p, align=8)
        return context.get_dummy_value()
    return types.none(arr, idx, v), codegen

