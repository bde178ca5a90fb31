"""Lowering calls: NumPy, ``math`` and builtin functions (through the primitive registry's
spellings), methods, the frontend's sugar (``np.square``, ``np.clip``, ``np.outer``,
``np.linalg.norm``, ``math.log(x, base)``, n-ary ``min``/``max``, ``len``), static arguments
(``axis``, ``keepdims``, ``dtype``, ``np.transpose``'s ``axes``) and calls of user functions
(inlined; by their custom rules, ``coarsen.frontend.custom_calls``, where they have some).

Requires: a ``Lowerer`` it is mixed into (``coarsen.frontend.lower``).
Guarantees: each call of a NumPy/math/builtin function or array method is bound to its NumPy
signature first (``coarsen.frontend.signatures``: by position or keyword, as Python binds it);
the parameters its lowering reads are ``UNDERSTOOD[op]`` (a registry primitive not listed: its
first ``arity`` positional parameters, or its ``*args``) or ``METHOD_UNDERSTOOD[method]``, and
any other argument is refused with a ``CoarsenError`` naming it (``ARGUMENT_HINTS``: what to
write instead), as is an understood argument the lowering did not read (``Bound.finish``).  So
no argument is dropped: ``np.transpose(x, (1, 0, 2))`` permutes by its axes (the attribute
``axes`` of ``transpose``), ``np.log(x, y)`` is refused (``y`` is NumPy's ``out``, not
``math.log``'s base), ``np.std(x, 0, None, None, 1)`` reads its ``ddof``.  Each call becomes
primitives with static attributes, or an inlined body; anything else raises ``CoarsenError``
with a hint.
"""
from __future__ import annotations

import gast
import numpy as np

from ..ir.nodes import (Const, NEWAXIS, Slice)
from ..ir.primitives import ops_where, primitive
from .array_literals import DtypeLike, lower_array_call
from .custom_calls import lower_custom_call
from .numpy_forms import (FORM_METHODS, FORM_OPS, FORMS_UNDERSTOOD, lower_form, lower_form_method,
                          tuple_axis_reduction)
from .growable import lower_list_len, lower_list_sum
from .helpers_inline import TupleValue
from .nested_defs import call_nested, nested_name
from .joins import JOIN_OPS, JOIN_UNDERSTOOD, lower_join_call, lower_list, stack_tuple
from .source import (CustomFunction, Known, Module, UserFunction, UserModule)
from .signatures import REDUCTION_METHODS, bind, signature_of
from .static_attrs import STATIC_ATTR_OPS, lower_static_attr_call

REDUCTIONS = ops_where(lambda p: p.reduction)

FLOAT32_PROBLEM = "float32 is not supported: coarsen computes in float64"
FLOAT32_HINT = ("use np.float64 (float32 input arrays are computed in float64 too, and their "
                "gradients cast back to float32); float32 storage computed in float64 would not "
                "give NumPy's float32 values")


class CallMixin:
    def expr_Call(self, node, target):
        f = node.func
        # methods on arrays: a.sum(), a.copy(), a.reshape(...), a.astype(...)
        if isinstance(f, gast.Attribute) and not isinstance(self.resolve_value(f.value, quiet=True),
                                                            (Module, UserModule)):
            return self.method_call(node, target)
        if isinstance(f, gast.Name) and (f.id in self.nested or nested_name(self, f.id)):
            return call_nested(self, node, target)             # a nested def's call
        kind = self.resolve_value(f)
        if isinstance(kind, UserFunction):
            return self.inline(node, kind.fn, target)
        if isinstance(kind, CustomFunction):        # its rules take precedence over inlining
            return lower_custom_call(self, node, kind.obj, target)
        if isinstance(kind, Known):
            return self.known_call(node, kind, target)
        raise self.err(f, "this call cannot be differentiated",
                       "call math/NumPy functions or plain Python functions defined in files")

    def _static_int(self, node, what):
        if node is None:
            return None
        if isinstance(node, gast.Constant) and node.value is None:
            return None
        if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub) and isinstance(node.operand, gast.Constant):
            return -node.operand.value
        if isinstance(node, gast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        raise self.err(node, f"{what} must be an integer constant")

    def _static_bool(self, node, what):
        if node is None:
            return False
        if isinstance(node, gast.Constant) and isinstance(node.value, bool):
            return node.value
        raise self.err(node, f"{what} must be True or False")

    def dtype_of(self, node, like_ok=True):
        """The IR dtype a ``dtype=`` argument names: ``"f64"`` (``np.float64``, ``float``,
        absent), ``"i64"`` (``np.int64``, ``int``), or a ``DtypeLike`` for ``x.dtype`` (resolved
        by type inference; only where ``like_ok``).  ``np.float32`` is refused: coarsen computes
        in float64, and float32 storage computed in float64 would not give NumPy's values."""
        if node is None:
            return "f64"
        if isinstance(node, gast.Constant) and isinstance(node.value, str):
            return self._dtype_string(node)
        if isinstance(node, gast.Attribute) and node.attr == "dtype":
            if not like_ok:
                raise self.err(node, "dtype=x.dtype is not supported here",
                               "write the dtype: np.float64 or np.int64")
            return DtypeLike(self.lower_expr(node.value))
        k = self.resolve_value(node, quiet=True)
        if isinstance(k, Known) and k.origin == "dtype":
            if k.op == "float32":
                raise self.err(node, FLOAT32_PROBLEM, FLOAT32_HINT)
            if k.op in ("float64", "int64"):
                return {"float64": "f64", "int64": "i64"}[k.op]
        if isinstance(k, Known) and k.origin == "numpy" and k.op == "float":
            return "f64"                # np.float64 is also the function float64(x)
        if isinstance(node, gast.Name) and node.id == "float" and node.id not in self.local_names:
            return "f64"
        if isinstance(node, gast.Name) and node.id == "int" and node.id not in self.local_names:
            return "i64"
        raise self.err(node, "dtype must be np.float64, np.int64, float, int or x.dtype")

    def _dtype_string(self, node):
        """A dtype named by a string (``"float64"``, ``"f8"``, ``"int64"``...): NumPy's names
        of float64 and int64; ``"float32"`` and its names refused as ``np.float32`` is; any
        other string refused naming it."""
        name = node.value
        try:
            dtype = np.dtype(name)
        except TypeError:
            dtype = None
        if dtype == np.float32:
            raise self.err(node, FLOAT32_PROBLEM, FLOAT32_HINT)
        if dtype == np.float64 or dtype == np.int64:
            return "f64" if dtype == np.float64 else "i64"
        raise self.err(node, f"the dtype {name!r} is not supported",
                       "write 'float64' or 'int64' (np.float64, np.int64)")

    def bind(self, node, spelling, understood, hints=None):
        """The call's arguments bound to ``spelling``'s NumPy signature
        (``coarsen.frontend.signatures``); an argument outside ``understood`` is refused,
        naming its parameter.  The caller reads them and calls ``finish()``."""
        op_hints = {p: h for (o, p), h in OP_ARGUMENT_HINTS.items() if spelling.endswith("." + o)}
        return bind(self, node, spelling, understood,
                    {**ARGUMENT_HINTS, **op_hints, **(hints or {})})

    def check_string_argument(self, stmt, const):
        """The fence, before it refuses the string constant ``const`` in ``stmt``: where it is
        an argument of a call of a NumPy function or array method, that call's arguments are
        bound first, so that one passed for a parameter coarsen does not understand
        (``np.ravel(x, order='F')``) is refused naming the parameter."""
        for call in gast.walk(stmt):
            if isinstance(call, gast.Call) and any(
                    a is const for a in call.args + [k.value for k in call.keywords]):
                self.check_call_arguments(call)

    def check_call_arguments(self, node):
        """Bind a call's arguments to its signature (refusing what is not understood) without
        lowering it; nothing for calls of anything but NumPy/math/builtin functions and the
        array methods coarsen lowers."""
        f = node.func
        if isinstance(f, gast.Attribute) and not isinstance(
                self.resolve_value(f.value, quiet=True), (Module, UserModule)):
            if f.attr in METHOD_UNDERSTOOD:
                self.bind(node, "." + f.attr, METHOD_UNDERSTOOD[f.attr])
            return
        kind = self.resolve_value(f, quiet=True)
        if isinstance(kind, Known) and kind.origin in ("numpy", "math", "builtin") \
                and signature_of(kind.name) is not None:
            self.bind(node, kind.name, self.understood(kind.op, kind.name))

    def _given(self, b, name):
        """The node of ``name`` (read), or None where it is absent or the constant None
        (NumPy's default for ``dtype``, ``axis``, ``axes``)."""
        v = b.get(name)
        return None if isinstance(v, gast.Constant) and v.value is None else v

    def method_call(self, node, target):
        f = node.func
        name = f.attr
        obj = self.lower_expr(f.value)
        if name not in METHOD_UNDERSTOOD:
            raise self.err(f, f"method .{name}() is not supported",
                           "supported methods: " + ", ".join(METHOD_UNDERSTOOD))
        b = self.bind(node, "." + name, METHOD_UNDERSTOOD[name])
        out = self._method(node, b, name, obj, target)
        b.finish()
        return out

    def _method(self, node, b, name, obj, target):
        if name == "copy":
            return self.op(node, target, "copyarr", [obj])
        if name in REDUCTION_METHODS:
            canon = {"max": "amax", "min": "amin"}.get(name, name)
            return self.reduction(node, target, canon, obj, b.get("axis"), b.get("keepdims"),
                                  b.get("ddof") if name in ("std", "var") else None)
        if name in FORM_METHODS:
            return lower_form_method(self, node, name, obj, b, target)
        if name == "reshape":
            dims = b.get("shape") or []
            if len(dims) == 1 and _is_shape(dims[0]):                 # x.reshape(a.shape)
                return self.op(node, target, "reshape", [obj, self.lower_expr(dims[0].value)],
                               attrs=(("like", True),))
            if len(dims) == 1 and isinstance(dims[0], gast.Tuple):   # x.reshape((n, m))
                dims = dims[0].elts
            if not dims:
                raise self.err(node, ".reshape() needs the new shape")
            return self.op(node, target, "reshape", [obj] + [self.lower_expr(d) for d in dims])
        if name == "transpose":
            axes = b.get("axes") or []
            if len(axes) == 1 and (isinstance(axes[0], gast.Tuple) or (
                    isinstance(axes[0], gast.Constant) and axes[0].value is None)):
                axes = axes[0]                  # x.transpose((1, 0, 2)) or x.transpose(None)
            return self.transpose(node, target, obj, axes or None)
        if name == "astype":
            dt = self.dtype_of(b["dtype"], like_ok=False)
            return self.op(node, target, "astype", [obj], attrs=(("dtype", dt),))
        if name == "dot":
            return self.op(node, target, "dot", [obj, self.lower_expr(b["other"])])
        return self.op(node, target, "ravel", [obj])                 # flatten, ravel

    def transpose(self, node, target, arr, axes_node):
        """``np.transpose(a, axes)``/``a.transpose(*axes)``: ``axes_node`` is None (every
        axis reversed, ``.T``), the constant None, a tuple node of integer constants, or a
        list of such nodes.  Explicit axes become the attribute ``axes``, a permutation with
        negative axes counted from its length (the type rule checks it against the rank)."""
        if axes_node is None or (isinstance(axes_node, gast.Constant) and axes_node.value is None):
            return self.op(node, target, "transpose", [arr])
        elts = axes_node.elts if isinstance(axes_node, gast.Tuple) else \
            axes_node if isinstance(axes_node, list) else None
        if elts is None:
            raise self.err(axes_node, "the axes of a transpose must be a tuple of integer constants",
                           "write them out: np.transpose(x, (1, 0, 2))")
        axes = [_constant_int(e) for e in elts]
        n = len(axes)
        for e, a in zip(elts, axes):
            if a is None:
                raise self.err(e, "an axis of a transpose must be an integer constant",
                               "write the axes as integer constants: np.transpose(x, (1, 0, 2))")
        if not all(-n <= a < n for a in axes) or \
                sorted(a % n for a in axes) != list(range(n)):
            raise self.err(axes_node if not isinstance(axes_node, list) else node,
                           f"transpose axes {tuple(axes)} are not a permutation of the axes",
                           f"give each of the array's axes once, e.g. {tuple(reversed(range(max(n, 2))))}")
        return self.op(node, target, "transpose", [arr], attrs=(("axes", tuple(a % n for a in axes)),))

    def reduction(self, node, target, op, arr, axis_node, keepdims_node, ddof_node=None):
        keep = self._static_bool(keepdims_node, "keepdims")
        ddof = self._static_int(ddof_node, "ddof") or 0
        if isinstance(axis_node, gast.Tuple):       # axis=(0, 2): numpy_forms
            axes = tuple(self._static_int(e, "axis") for e in axis_node.elts)
            return tuple_axis_reduction(self, node, target, op, arr, axes, keep, ddof)
        axis = self._static_int(axis_node, "axis")
        attrs = (("axis", axis), ("keepdims", keep)) + ((("ddof", ddof),) if ddof else ())
        return self.op(node, target, op, [arr], attrs=attrs)

    def known_call(self, node, kind, target):
        op = kind.op
        if op in ("range", "prange"):
            raise self.err(node, f"{op}() is only supported as the iterable of a for loop")
        if op == "shape":
            raise self.err(node, "np.shape(a) is supported only in unpacking: n, m = np.shape(a)")
        if kind.origin == "dtype":
            if op == "float32":
                raise self.err(node.func, FLOAT32_PROBLEM, FLOAT32_HINT)
            if op != "float64":
                raise self.err(node.func, f"np.{op}(...) is not supported here")
            op = "float"
        b = self.bind(node, kind.name, self.understood(op, kind.name))
        out = self._known(node, kind, op, b, target)
        b.finish()
        return out

    def list_argument(self, node):
        """Is ``node`` the name of a growable list (``coarsen.frontend.growable``)?"""
        return isinstance(node, gast.Name) and node.id in self.growable

    def understood(self, op, spelling):
        """The parameters the lowering of ``op`` reads (``understood_parameters``)."""
        out = understood_parameters(op, spelling)
        if out is None:
            raise self.err(None, f"internal: no signature known for {spelling}")
        return out

    def expr_List(self, node, target):
        """A list display the fence let through (a NumPy function's argument:
        ``coarsen.frontend.joins.list_argument_literals``): ``np.array`` of it."""
        return lower_list(self, node, target)

    def lower_operand(self, node):
        """An array operand of a NumPy function: a tuple display (``np.mean((a, b))``) or
        value (``np.sum(np.split(x, 2))``, a helper's tuple) is ``np.array`` of it, as NumPy
        converts it (``stack``)."""
        if isinstance(node, gast.Tuple):
            return lower_list(self, node)
        val = self.lower_expr(node, allow_tuple=True)
        return stack_tuple(self, node, val) if isinstance(val, TupleValue) else val

    def _known(self, node, kind, op, b, target):
        if op == "builtin_sum" and self.list_argument(b.get("iterable")):   # sum(xs) of a list
            return lower_list_sum(self, node, b["iterable"].id, b.get("start"), target)
        if op in JOIN_OPS:             # joining, splitting, building; lists (frontend.joins)
            return lower_join_call(self, node, op, b, target)
        if op in STATIC_ATTR_OPS:      # np.cumsum, np.diff, np.einsum: static arguments as attrs
            return lower_static_attr_call(self, node, op, b, target)
        if kind.origin == "math" and op in ("floor", "ceil"):
            # Python's (and Numba's) math.floor and math.ceil return an int, np.floor a float
            rounded = self.op(node, None, op, [self.lower_expr(b["x"])])
            return self.op(node, target, "int", [rounded])
        if op in FORM_OPS:             # issue 44a's forms (coarsen.frontend.numpy_forms)
            return lower_form(self, node, kind, op, b, target)
        if op in REDUCTIONS:
            arr = self.lower_operand(b["a"])
            return self.reduction(node, target, op, arr, b.get("axis"), b.get("keepdims"),
                                  b.get("ddof") if op in ("std", "var") else None)
        if op in ("zeros", "ones", "empty", "full"):
            shape = b["shape"]
            dt_node = self._given(b, "dtype")
            if op != "full" and isinstance(shape, gast.Attribute) and shape.attr == "shape":
                # np.zeros(a.shape): an array shaped like a, of the dtype given (float64)
                dt = self.dtype_of(dt_node)
                like = self.lower_expr(shape.value)
                if isinstance(dt, DtypeLike):
                    return self.op(node, target, op + "_like", [like, dt.operand],
                                   attrs=(("dtype", "like"),))
                return self.op(node, target, op + "_like", [like], attrs=(("dtype", dt),))
            dims = shape.elts if isinstance(shape, gast.Tuple) else [shape]
            dimops = [self.lower_expr(d) for d in dims]
            extra = [self.lower_expr(b["fill_value"])] if op == "full" else []
            # np.full without a dtype takes the fill value's (type inference reads it)
            dt = "fill" if op == "full" and dt_node is None else self.dtype_of(dt_node)
            attrs = (("dtype", "f64" if isinstance(dt, DtypeLike) else dt), ("ndim", len(dimops)))
            if isinstance(dt, DtypeLike):
                # dtype=x.dtype: the same array built ``*_like`` an array of the shape, with x's
                # dtype (a trailing operand that type inference reads)
                shaped = self.op(node, None, "empty", dimops, attrs=attrs)
                return self.op(node, target, op + "_like", [shaped] + extra + [dt.operand],
                               attrs=(("dtype", "like"),))
            return self.op(node, target, op, dimops + extra, attrs=attrs)
        if op in ("zeros_like", "ones_like", "empty_like", "full_like"):
            a = self.lower_expr(b["prototype"] if op == "empty_like" else b["a"])
            extra = [self.lower_expr(b["fill_value"])] if op == "full_like" else []
            dt_node = self._given(b, "dtype")
            dt = self.dtype_of(dt_node) if dt_node is not None else None
            if isinstance(dt, DtypeLike):
                return self.op(node, target, op, [a] + extra + [dt.operand], attrs=(("dtype", "like"),))
            return self.op(node, target, op, [a] + extra, attrs=(("dtype", dt),))
        if op == "eye":
            n = b["N"] if "N" in b.given() else b["n"]
            return self.op(node, target, "eye", [self.lower_expr(n)],
                           attrs=(("dtype", self.dtype_of(self._given(b, "dtype"), like_ok=False)),))
        if op in ("array", "asarray"):
            return lower_array_call(self, node, op, b, target)
        if op == "len" and self.list_argument(b["obj"]):       # len(xs) of a growable list
            return lower_list_len(self, node, b["obj"].id, target)
        if op == "len":
            return self.op(node, target, "dim", [self.lower_expr(b["obj"]), Const(0)])
        if op in ("min", "max"):
            args = b.get("args") or []
            if len(args) < 2:
                raise self.err(node, f"{op}() of one iterable is not supported",
                               f"use np.{op}(a) for arrays, or {op}(a, b) for scalars")
            acc = self.lower_expr(args[0])
            prim = "minimum" if op == "min" else "maximum"
            for k, a in enumerate(args[1:]):
                v = self.lower_expr(a)
                acc = self.op(node, target if k == len(args) - 2 else None, prim, [acc, v])
            return acc
        if op == "bool":
            return self.op(node, target, "truth", [self.lower_expr(b["x"])])
        if op == "log" and "base" in b.given():              # math.log(x, base)
            x = self.op(node, None, "log", [self.lower_expr(b["x"])])
            base = self.op(node, None, "log", [self.lower_expr(b["base"])])
            return self.op(node, target, "div", [x, base])
        if op == "square":
            x = self.lower_expr(b["x"])
            return self.op(node, target, "mul", [x, x])
        if op == "clip":
            lo_node, hi_node = self._given(b, "a_min"), self._given(b, "a_max")
            if lo_node is None and hi_node is None:
                raise self.err(node, "np.clip needs a bound", "give a_min, a_max or both")
            x = self.lower_expr(b["a"])
            if lo_node is None:         # one bound (the other None): NumPy's minimum or maximum
                return self.op(node, target, "minimum", [x, self.lower_expr(hi_node)])
            lo = self.lower_expr(lo_node)
            if hi_node is None:
                return self.op(node, target, "maximum", [x, lo])
            t = self.op(node, None, "maximum", [x, lo])
            return self.op(node, target, "minimum", [t, self.lower_expr(hi_node)])
        if op == "outer":
            a, c = (self.lower_expr(x) for x in (b["a"], b["b"]))
            ra = self.op(node, None, "ravel", [a])
            rb = self.op(node, None, "ravel", [c])
            col = self.op(node, None, "getitem", [ra], index=(Slice(None, None, None), NEWAXIS))
            row = self.op(node, None, "getitem", [rb], index=(NEWAXIS, Slice(None, None, None)))
            return self.op(node, target, "mul", [col, row])
        if op == "norm":
            x = self.lower_expr(b["x"])
            sq = self.op(node, None, "mul", [x, x])
            tot = self.op(node, None, "sum", [sq], attrs=(("axis", None), ("keepdims", False)))
            return self.op(node, target, "sqrt", [tot])
        if op == "expand_dims":
            a = self.lower_expr(b["a"])
            ax = self._static_int(b["axis"], "axis")
            if ax is None:
                raise self.err(b["axis"], "np.expand_dims needs an integer axis")
            return self.op(node, target, "expand_dims", [a], attrs=(("axis", ax),))
        if op == "transpose":
            return self.transpose(node, target, self.lower_expr(b["a"]), b.get("axes"))
        if op == "reshape":
            a = self.lower_expr(b["a"])
            shape = b["shape"]
            if _is_shape(shape):                                     # np.reshape(x, a.shape)
                return self.op(node, target, "reshape", [a, self.lower_expr(shape.value)],
                               attrs=(("like", True),))
            dims = shape.elts if isinstance(shape, gast.Tuple) else [shape]
            return self.op(node, target, "reshape", [a] + [self.lower_expr(d) for d in dims])
        if op == "copyarr":
            return self.op(node, target, "copyarr", [self.lower_expr(b["a"])])
        # a registry primitive, called with its operands (``understood``)
        arity = primitive(op).arity or 1
        params = [p for p in signature_of(kind.name).parameters.values()
                  if p.name in b.given()]
        args = [a for p in params for a in (b[p.name] if p.kind == p.VAR_POSITIONAL else [b[p.name]])]
        if len(args) != arity:
            hint = "nest the calls: math.hypot(math.hypot(x, y), z)" if op == "hypot" else \
                f"call {op} with {arity} argument(s)"
            raise self.err(node, f"{op} takes {arity} argument(s) here, got {len(args)}", hint)
        ops = [self.lower_operand(a) for a in args]
        return self.op(node, target, op, ops)


# the parameters each lowering reads, by op (the names of every spelling of it: np.eye's N,
# np.identity's n); a registry primitive not listed here reads its first ``arity`` positional
# parameters, or its *args (CallMixin.understood). Anything else a call passes is refused.
_REDUCTION_ARGS = frozenset({"a", "axis", "keepdims"})
UNDERSTOOD = {
    **JOIN_UNDERSTOOD,
    **{op: _REDUCTION_ARGS for op in REDUCTIONS},
    "std": _REDUCTION_ARGS | {"ddof"}, "var": _REDUCTION_ARGS | {"ddof"},
    "zeros": frozenset({"shape", "dtype"}), "ones": frozenset({"shape", "dtype"}),
    "empty": frozenset({"shape", "dtype"}), "full": frozenset({"shape", "fill_value", "dtype"}),
    "zeros_like": frozenset({"a", "dtype"}), "ones_like": frozenset({"a", "dtype"}),
    "empty_like": frozenset({"prototype", "dtype"}),
    "full_like": frozenset({"a", "fill_value", "dtype"}),
    "eye": frozenset({"N", "n", "dtype"}),
    "array": frozenset({"object", "dtype"}), "asarray": frozenset({"a", "dtype"}),
    "len": frozenset({"obj"}), "min": frozenset({"args"}), "max": frozenset({"args"}),
    "bool": frozenset({"x"}),
    "log": frozenset({"x", "base"}),        # math.log(x, base); np.log's second is ``out``
    "floor": frozenset({"x"}), "ceil": frozenset({"x"}),
    "square": frozenset({"x"}), "clip": frozenset({"a", "a_min", "a_max"}),
    "outer": frozenset({"a", "b"}), "norm": frozenset({"x"}),
    "expand_dims": frozenset({"a", "axis"}), "transpose": frozenset({"a", "axes"}),
    "reshape": frozenset({"a", "shape"}), "copyarr": frozenset({"a"}),
    "cumsum": frozenset({"a", "axis"}), "diff": frozenset({"a", "n", "axis"}),
    "einsum": frozenset({"operands"}), "shape": frozenset({"a"}),
    **FORMS_UNDERSTOOD,
}

# the array methods coarsen lowers, and the parameters each reads (without the array)
METHOD_UNDERSTOOD = {
    "copy": frozenset(), **{m: frozenset({"axis", "keepdims"}) for m in REDUCTION_METHODS},
    "reshape": frozenset({"shape"}), "transpose": frozenset({"axes"}),
    "astype": frozenset({"dtype"}), "dot": frozenset({"other"}),
    "flatten": frozenset(), "ravel": frozenset(),
    "std": frozenset({"axis", "keepdims", "ddof"}), "var": frozenset({"axis", "keepdims", "ddof"}),
    **FORM_METHODS,
}

# what to write instead of an argument coarsen refuses, by parameter name
ARGUMENT_HINTS = {
    "out": "assign the result instead (y = f(x)); copy it into an array with y[...] = f(x)",
    "dtype": "convert the operand or the result instead: x.astype(np.float64), np.float64(s)",
    "ddof": "write it out: np.sum((x - np.mean(x)) ** 2) / (x.size - ddof)",
    "where": "mask the operand instead: np.where(mask, x, 0.0)",
    "initial": "combine it with the result instead: max(np.max(x), initial)",
    "order": "remove it: coarsen's arrays are C-ordered",
    "ord": "write the norm out: np.sum(np.abs(x) ** p) ** (1 / p), np.max(np.abs(x))",
    "min": "write np.clip(a, lo, hi)",
    "max": "write np.clip(a, lo, hi)",
    "M": "build the matrix with np.zeros and element writes",
    "k": "build the matrix with np.zeros and element writes",
}
# ... where one function's parameter needs its own: (the function's name, parameter)
OP_ARGUMENT_HINTS = {
    ("flip", "axis"): "slice instead: x[::-1] flips axis 0, x[:, ::-1] axis 1",
    ("norm", "axis"): "write it out: np.sqrt(np.sum(x * x, axis=k))",
}


def understood_parameters(op, spelling):
    """The parameters the lowering of ``op`` called as ``spelling`` reads: ``UNDERSTOOD[op]``,
    else (a registry primitive called as it is) its first ``arity`` positional parameters or
    its ``*args``; None where ``spelling`` has no signature.  (Also what the README's table of
    NumPy functions lists, ``coarsen.docs``.)"""
    if op in UNDERSTOOD:
        return UNDERSTOOD[op]
    sig = signature_of(spelling)
    if sig is None:
        return None
    params = list(sig.parameters.values())
    var = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
    if var:
        return frozenset(var)
    arity = primitive(op).arity or 1
    return frozenset(p.name for p in params[:arity] if p.kind in (p.POSITIONAL_ONLY,
                                                                  p.POSITIONAL_OR_KEYWORD))


def _is_shape(node):
    """``<expr>.shape``: an array's whole shape, as an argument of ``reshape``."""
    return isinstance(node, gast.Attribute) and node.attr == "shape"


def _constant_int(node):
    """The value of an integer constant node (``-k`` too), else None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        v = _constant_int(node.operand)
        return None if v is None else -v
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return node.value
    return None
