"""Lowering calls: NumPy, ``math`` and builtin functions (through the primitive registry's
spellings), methods, the frontend's sugar (``np.square``, ``np.clip``, ``np.outer``,
``np.linalg.norm``, ``math.log(x, base)``, n-ary ``min``/``max``, ``len``), static arguments
(``axis``, ``keepdims``, ``dtype``) and calls of user functions (inlined; by their custom
rules, ``coarsen.frontend.custom_calls``, where they have some).

Requires: a ``Lowerer`` it is mixed into (``coarsen.frontend.lower``).
Guarantees: each call becomes primitives with static attributes, or an inlined body; anything
else raises ``CoarsenError`` with a hint.
"""
from __future__ import annotations

import gast

from ..ir.nodes import (Const, NEWAXIS, Slice)
from ..ir.primitives import ops_where, primitive
from .array_literals import DtypeLike, lower_array_call
from .custom_calls import lower_custom_call
from .source import (CustomFunction, Known, Module, UserFunction, UserModule)
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
        kind = self.resolve_value(f)
        if isinstance(kind, UserFunction):
            return self.inline(node, kind.fn, target)
        if isinstance(kind, CustomFunction):        # its rules take precedence over inlining
            return lower_custom_call(self, node, kind.obj, target)
        if isinstance(kind, Known):
            return self.known_call(node, kind, target)
        raise self.err(f, "this call cannot be differentiated",
                       "call math/NumPy functions or plain Python functions defined in files")

    def keywords(self, node, allowed):
        out = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err(node, "**kwargs in calls are not supported")
            if kw.arg not in allowed:
                known = f" (it takes {', '.join(sorted(allowed))} by keyword)" if allowed else ""
                raise self.err(kw.value, f"keyword argument {kw.arg!r} is not supported here{known}",
                               "pass it by position, as the README's function list writes it "
                               "(e.g. np.clip(a, lo, hi))")
            out[kw.arg] = kw.value
        return out

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

    def method_call(self, node, target):
        f = node.func
        name = f.attr
        obj = self.lower_expr(f.value)
        if name == "copy":
            self.keywords(node, ())
            return self.op(node, target, "copyarr", [obj])
        if name in ("sum", "mean", "max", "min", "prod", "std", "var"):
            kw = self.keywords(node, ("axis", "keepdims"))
            axis_node = node.args[0] if node.args else kw.get("axis")
            canon = {"max": "amax", "min": "amin"}.get(name, name)
            return self.reduction(node, target, canon, obj, axis_node, kw.get("keepdims"))
        if name == "reshape":
            self.keywords(node, ())
            if len(node.args) == 1 and _is_shape(node.args[0]):       # x.reshape(a.shape)
                return self.op(node, target, "reshape", [obj, self.lower_expr(node.args[0].value)],
                               attrs=(("like", True),))
            dims = node.args[0].elts if len(node.args) == 1 and isinstance(node.args[0], gast.Tuple) else node.args
            return self.op(node, target, "reshape", [obj] + [self.lower_expr(d) for d in dims])
        if name == "transpose":
            if node.args:
                raise self.err(node, "transpose with axes is not supported", "use .T for 2-D arrays")
            return self.op(node, target, "transpose", [obj])
        if name == "astype":
            dt = self.dtype_of(node.args[0] if node.args else None, like_ok=False)
            return self.op(node, target, "astype", [obj], attrs=(("dtype", dt),))
        if name == "dot":
            return self.op(node, target, "dot", [obj, self.lower_expr(node.args[0])])
        if name == "flatten" or name == "ravel":
            return self.op(node, target, "ravel", [obj])
        raise self.err(f, f"method .{name}() is not supported",
                       "supported methods: copy, sum, mean, max, min, prod, std, var, reshape, transpose, astype, dot, ravel")

    def reduction(self, node, target, op, arr, axis_node, keepdims_node):
        axis = self._static_int(axis_node, "axis")
        keep = self._static_bool(keepdims_node, "keepdims")
        attrs = (("axis", axis), ("keepdims", keep))
        return self.op(node, target, op, [arr], attrs=attrs)

    def known_call(self, node, kind, target):
        op = kind.op
        if op in STATIC_ATTR_OPS:      # np.cumsum, np.diff, np.einsum: static arguments as attrs
            return lower_static_attr_call(self, node, op, target)
        if kind.origin == "dtype":
            if op == "float32":
                raise self.err(node.func, FLOAT32_PROBLEM, FLOAT32_HINT)
            if op == "float64":
                op = "float"
            else:
                raise self.err(node.func, f"np.{op}(...) is not supported here")
        args = node.args
        if kind.origin == "math" and op in ("floor", "ceil") and len(args) == 1 and \
                not node.keywords:
            # Python's (and Numba's) math.floor and math.ceil return an int, np.floor a float
            rounded = self.op(node, None, op, [self.lower_expr(args[0])])
            return self.op(node, target, "int", [rounded])
        if op in REDUCTIONS:
            kw = self.keywords(node, ("axis", "keepdims"))
            if not args:
                raise self.err(node, f"{op} needs an array argument")
            if kind.origin == "builtin":
                pass
            arr = self.lower_expr(args[0])
            axis_node = args[1] if len(args) > 1 else kw.get("axis")
            return self.reduction(node, target, op, arr, axis_node, kw.get("keepdims"))
        if op in ("zeros", "ones", "empty", "full"):
            kw = self.keywords(node, ("dtype",) + (("fill_value",) if op == "full" else ()))
            if not args:
                raise self.err(node, f"np.{op} needs a shape")
            shape = args[0]
            if op != "full" and isinstance(shape, gast.Attribute) and shape.attr == "shape":
                # np.zeros(a.shape): an array shaped like a, of the dtype given (float64)
                dt = self.dtype_of(args[1] if len(args) > 1 else kw.get("dtype"))
                like = self.lower_expr(shape.value)
                if isinstance(dt, DtypeLike):
                    return self.op(node, target, op + "_like", [like, dt.operand],
                                   attrs=(("dtype", "like"),))
                return self.op(node, target, op + "_like", [like], attrs=(("dtype", dt),))
            dims = shape.elts if isinstance(shape, gast.Tuple) else [shape]
            dimops = [self.lower_expr(d) for d in dims]
            extra = []
            if op == "full":
                fv = args[1] if len(args) > 1 else kw.get("fill_value")
                if fv is None:
                    raise self.err(node, "np.full needs a fill value")
                extra = [self.lower_expr(fv)]
            dt_node = args[2] if op == "full" and len(args) > 2 else \
                (args[1] if op != "full" and len(args) > 1 else kw.get("dtype"))
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
            kw = self.keywords(node, ("dtype",))
            a = self.lower_expr(args[0])
            extra = [self.lower_expr(args[1])] if op == "full_like" else []
            dt = self.dtype_of(kw.get("dtype")) if "dtype" in kw else None
            if isinstance(dt, DtypeLike):
                return self.op(node, target, op, [a] + extra + [dt.operand], attrs=(("dtype", "like"),))
            return self.op(node, target, op, [a] + extra, attrs=(("dtype", dt),))
        if op == "eye":
            kw = self.keywords(node, ("dtype",))
            return self.op(node, target, "eye", [self.lower_expr(args[0])],
                           attrs=(("dtype", self.dtype_of(kw.get("dtype"), like_ok=False)),))
        if op in ("array", "asarray"):
            return lower_array_call(self, node, op, target)
        self.keywords(node, ())
        if op in ("range", "prange"):
            raise self.err(node, f"{op}() is only supported as the iterable of a for loop")
        if op == "len":
            a = self.lower_expr(args[0])
            return self.op(node, target, "dim", [a, Const(0)])
        if op == "shape":
            raise self.err(node, "np.shape(a) is supported only in unpacking: n, m = np.shape(a)")
        if op in ("min", "max"):
            if len(args) < 2:
                raise self.err(node, f"{op}() of one iterable is not supported",
                               f"use np.{op}(a) for arrays, or {op}(a, b) for scalars")
            acc = self.lower_expr(args[0])
            prim = "minimum" if op == "min" else "maximum"
            for k, a in enumerate(args[1:]):
                b = self.lower_expr(a)
                acc = self.op(node, target if k == len(args) - 2 else None, prim, [acc, b])
            return acc
        if op == "bool":
            return self.op(node, target, "truth", [self.lower_expr(args[0])])
        if op == "log" and len(args) == 2:
            x = self.op(node, None, "log", [self.lower_expr(args[0])])
            base = self.op(node, None, "log", [self.lower_expr(args[1])])
            return self.op(node, target, "div", [x, base])
        if op == "square":
            x = self.lower_expr(args[0])
            return self.op(node, target, "mul", [x, x])
        if op == "clip":
            x, lo, hi = (self.lower_expr(a) for a in args)
            t = self.op(node, None, "maximum", [x, lo])
            return self.op(node, target, "minimum", [t, hi])
        if op == "outer":
            a, b = (self.lower_expr(x) for x in args)
            ra = self.op(node, None, "ravel", [a])
            rb = self.op(node, None, "ravel", [b])
            col = self.op(node, None, "getitem", [ra], index=(Slice(None, None, None), NEWAXIS))
            row = self.op(node, None, "getitem", [rb], index=(NEWAXIS, Slice(None, None, None)))
            return self.op(node, target, "mul", [col, row])
        if op == "norm":
            if len(args) != 1:
                raise self.err(node, "np.linalg.norm is supported with one argument (the 2-norm / Frobenius norm)")
            x = self.lower_expr(args[0])
            sq = self.op(node, None, "mul", [x, x])
            tot = self.op(node, None, "sum", [sq], attrs=(("axis", None), ("keepdims", False)))
            return self.op(node, target, "sqrt", [tot])
        if op == "expand_dims":
            a = self.lower_expr(args[0])
            ax = self._static_int(args[1], "axis")
            return self.op(node, target, "expand_dims", [a], attrs=(("axis", ax),))
        if op == "transpose":
            return self.op(node, target, "transpose", [self.lower_expr(args[0])])
        if op == "reshape":
            a = self.lower_expr(args[0])
            if len(args) == 2 and _is_shape(args[1]):                 # np.reshape(x, a.shape)
                return self.op(node, target, "reshape", [a, self.lower_expr(args[1].value)],
                               attrs=(("like", True),))
            dims = args[1].elts if isinstance(args[1], gast.Tuple) else args[1:]
            return self.op(node, target, "reshape", [a] + [self.lower_expr(d) for d in dims])
        if op == "copyarr":
            return self.op(node, target, "copyarr", [self.lower_expr(args[0])])
        arity = primitive(op).arity or 1
        if len(args) != arity:
            hint = "nest the calls: math.hypot(math.hypot(x, y), z)" if op == "hypot" else \
                f"call {op} with {arity} argument(s)"
            raise self.err(node, f"{op} takes {arity} argument(s) here, got {len(args)}", hint)
        ops = [self.lower_expr(a) for a in args]
        return self.op(node, target, op, ops)


def _is_shape(node):
    """``<expr>.shape``: an array's whole shape, as an argument of ``reshape``."""
    return isinstance(node, gast.Attribute) and node.attr == "shape"
