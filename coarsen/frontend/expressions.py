"""Lowering expressions: operands in A-normal form, names and attributes resolved, short-circuit
``and``/``or`` and conditional expressions kept in Python's order.

Requires: a ``Lowerer`` (``coarsen.frontend.lower``) it is mixed into: ``emit``, ``tmp``,
``err``, ``loc``, ``name``, and the call lowering (``coarsen.frontend.calls``).
Guarantees: ``lower_expr(node)`` returns an operand (``Var`` or ``Const``) after emitting the
statements that compute it; every expression outside the language raises ``CoarsenError``.
"""
from __future__ import annotations

import builtins

import gast
import numpy as np

from ..ir.nodes import (Assign, Const, If, Var)
from ..ir.primitives import REGISTRY, spellings
from .growable import lower_list_index, lower_list_value
from .helpers_inline import TupleValue, constant_index
from .source import (CONSTANTS, LINALG_FUNCS, MATH_FUNCS, NUMPY_FUNCS, GlobalArray, Known,
                     Module, UserModule, resolve, resolve_attribute)

# Python's operators, spelled by the primitive registry (gast class -> primitive)
OPERATORS = {getattr(gast, cls): op for cls, op in spellings("operator").items()}



#: what to write instead of a builtin coarsen does not take
_BUILTIN_ALTERNATIVES = {
    "round": "use math.floor(x + 0.5) (halves up; round() takes the even neighbour of a half)",
    "sum": "use np.sum(a), or add the elements in a loop",
    "pow": "use a ** b or math.pow(a, b)",
    "divmod": "use a // b and a % b",
    "isinstance": "coarsen specializes on the argument types: write one function per type",
    "print": "remove it: coarsen generates compiled code, without I/O",
    "range": "use range(...) as the iterable of a for loop",
}

class ExpressionMixin:
    # ------------------------------------------------------------------ expressions
    def lower_expr(self, node, target=None, allow_tuple=False):
        """Lower an expression; returns its operand. With ``target``, the result is assigned
        to that variable (and Var(target) is returned).  A tuple (a tuple helper's call, a name
        bound to one) is returned as a ``TupleValue`` with ``allow_tuple`` and refused
        otherwise."""
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.err(node, f"{type(node).__name__} expressions are not supported")
        res = method(node, target)
        if isinstance(res, TupleValue):
            if allow_tuple:
                return res
            raise self.err(node, f"{res.what} is a tuple of {len(res)} values, not one value",
                           "unpack it (a, b = f(...)) or take one element with a constant index (t[0])")
        if target is not None and not (isinstance(res, Var) and res.name == target):
            self.emit(Assign(target, "copy", (res,), self.loc(node)))
            return Var(target)
        return res

    def op(self, node, target, op, args, index=(), attrs=()):
        """Emit ``target = op(args)``; ``op`` names a registered primitive (the frontend's
        sugar builds primitives by name: an unknown name is a bug here, not user input)."""
        if op not in REGISTRY:  # pragma: no cover - internal
            raise KeyError(f"the frontend built an unregistered primitive {op!r}")
        t = target or self.tmp()
        self.emit(Assign(t, op, tuple(args), self.loc(node), index=tuple(index), attrs=tuple(attrs)))
        return Var(t)

    def expr_Constant(self, node, target):
        v = node.value
        if isinstance(v, bool) or isinstance(v, (int, float)):
            return Const(v)
        if v is None:
            raise self.err(node, "None is not supported here")
        raise self.err(node, f"constants of type {type(v).__name__} are not supported")

    def expr_Name(self, node, target):
        if node.id in self.growable:      # a list as NumPy's argument: its rows so far
            return lower_list_value(self, node, target)
        if node.id in self.tuples:
            return self.tuples[node.id]
        if node.id in self.local_names:
            return Var(self.name(node.id))
        val = self.resolve_value(node)
        if isinstance(val, GlobalArray):
            return Var(self.namer.global_array(self.usable_array(node, val), self.src))
        if isinstance(val, bool) or isinstance(val, (int, float)):
            return Const(val)
        raise self.err(node, f"{node.id!r} cannot be used as a value here",
                       "only numbers, arrays and local variables are values in differentiated code")

    def usable_array(self, node, ga):
        """``ga`` where the compiled code can take it as an argument; else refused here, with
        its name (not at the first call, as an anonymous argument)."""
        a = ga.value
        if a.ndim == 0:
            raise self.err(node, f"the module-level array {ga.name!r} is 0-d",
                           f"make it a number ({ga.name} = float(...)), or a 1-element array "
                           f"read as {ga.name}[0]")
        if not (a.dtype.kind in "iub" or (a.dtype.kind == "f" and a.dtype.itemsize in (4, 8))):
            raise self.err(node, f"the module-level array {ga.name!r} has dtype {a.dtype}",
                           "use float64, float32, integer or bool arrays")
        if type(a) is not np.ndarray and not isinstance(a, np.memmap):
            raise self.err(node, f"the module-level array {ga.name!r} is a "
                           f"{type(a).__qualname__}, a subclass of np.ndarray whose operations "
                           "may differ from plain arrays'", f"bind {ga.name} to np.asarray(...)")
        return ga

    def resolve_value(self, node, quiet=False):
        """Static meaning of a non-local name or module attribute."""
        if isinstance(node, gast.Name):
            if node.id in self.local_names:
                return None
            try:
                kind, _ = resolve(self.src, node.id)
            except KeyError:
                if quiet:
                    return None
                if hasattr(builtins, node.id):
                    alt = _BUILTIN_ALTERNATIVES.get(node.id, "")
                    raise self.err(node, f"the builtin {node.id}() is not supported in "
                                   "differentiated code (the builtins are abs, min, max, float, "
                                   "int and len)", alt or None) from None
                raise self.err(node, f"name {node.id!r} is not defined") from None
            if kind is None and not quiet:
                raise self.err(node, f"{node.id!r} refers to something coarsen cannot differentiate",
                               "use numbers, NumPy arrays, math/NumPy functions and plain "
                               "functions (a tuple of numbers: make it a NumPy array)")
            return kind
        if isinstance(node, gast.Attribute):
            base = self.resolve_value(node.value, quiet=True)
            if isinstance(base, UserModule):
                found, kind = resolve_attribute(self.src, base.module, node.attr)
                if not found:
                    if quiet:
                        return None
                    raise self.err(node, f"module {base.module.__name__!r} has no attribute {node.attr!r}")
                if kind is None and not quiet:
                    raise self.err(node, f"{node.attr!r} refers to something coarsen cannot differentiate",
                                   "use numbers, NumPy arrays, math/NumPy functions and plain functions")
                return kind
            if isinstance(base, Module) and base.kind == "linalg":
                if node.attr in LINALG_FUNCS:
                    return Known(LINALG_FUNCS[node.attr], "numpy", "np.linalg." + node.attr)
                if quiet:
                    return None
                raise self.err(node, f"np.linalg.{node.attr} is not supported",
                               "np.linalg.norm(x) and np.linalg.solve(A, b) are; write other linear "
                               "algebra with loops and @")
            if isinstance(base, Module) and base.kind == "numpy" and node.attr == "linalg":
                return Module("linalg")
            if isinstance(base, Module):
                if node.attr in CONSTANTS:
                    return CONSTANTS[node.attr]
                table = MATH_FUNCS if base.kind == "math" else NUMPY_FUNCS
                if node.attr in table:
                    return Known(table[node.attr], base.kind,
                                 ("np." if base.kind == "numpy" else "math.") + node.attr)
                if base.kind == "numpy" and node.attr in ("float64", "float32", "int64", "newaxis"):
                    return Known(node.attr, "dtype", "np." + node.attr)
                if quiet:
                    return None
                raise self.err(node, f"{'np' if base.kind == 'numpy' else 'math'}.{node.attr} is not supported",
                               "see the README's list of supported functions; random numbers must be "
                               "drawn outside and passed in as arrays" if node.attr == "random" else
                               "see the README's list of supported functions")
        return None

    def expr_Attribute(self, node, target):
        val = self.resolve_value(node, quiet=True)
        if isinstance(val, (int, float)):       # bools too (consts.FLAG), as a name's value
            return Const(val)
        if isinstance(val, GlobalArray):        # module.ARRAY: a read-only input, as ARRAY is
            return Var(self.namer.global_array(self.usable_array(node, val), self.src))
        if node.attr == "T":
            a = self.lower_expr(node.value)
            return self.op(node, target, "transpose", [a])
        if node.attr in ("size",):
            a = self.lower_expr(node.value)
            return self.op(node, target, "size", [a])
        if node.attr == "ndim":
            a = self.lower_expr(node.value)
            return self.op(node, target, "ndim", [a])
        if node.attr == "shape":
            raise self.err(node, "use .shape[k] or unpack it: n, m = a.shape")
        raise self.err(node, f"attribute .{node.attr} is not supported here",
                       "see the README's list of supported functions and attributes")

    def expr_BinOp(self, node, target):
        op = OPERATORS.get(type(node.op))
        if op is None:
            raise self.err(node, f"operator {type(node.op).__name__} is not supported",
                           "use arithmetic operators (+ - * / ** // % @)")
        a = self.lower_expr(node.left)
        b = self.lower_expr(node.right)
        return self.op(node, target, op, [a, b])

    def expr_UnaryOp(self, node, target):
        a = self.lower_expr(node.operand)
        if isinstance(node.op, gast.USub) and isinstance(a, Const) and not isinstance(a.value, bool):
            return Const(-a.value)
        if isinstance(node.op, gast.UAdd):
            return a
        op = OPERATORS.get(type(node.op))
        if op is not None:
            return self.op(node, target, op, [a])
        raise self.err(node, "bitwise inversion (~) is not supported")

    def expr_BoolOp(self, node, target):
        # short-circuit: result = first; if result (and) / if not result (or): result = next.
        # In a test (``lower_cond``) the result's truth is all that is read; elsewhere the
        # operands must be booleans (``bool_operand``: Python's value would be an operand)
        truth = "truth" if id(node) in getattr(self, "condition_nodes", ()) else "bool_operand"
        res = target or self.tmp()
        first = self.lower_expr(node.values[0])
        self.emit(Assign(res, truth, (first,), self.loc(node)))
        out = self.out
        for v in node.values[1:]:
            cond = Var(res)
            if isinstance(node.op, gast.Or):
                t = self.tmp()
                self.emit(Assign(t, "not", (cond,), self.loc(node)))
                cond = Var(t)
            inner = []
            self.emit(If(cond, inner, [], self.loc(node)))
            self.out = inner
            val = self.lower_expr(v)
            self.emit(Assign(res, truth, (val,), self.loc(v)))
        self.out = out
        return Var(res)

    def expr_Compare(self, node, target):
        ops = [OPERATORS.get(type(o)) for o in node.ops]
        if None in ops:
            raise self.err(node, "only < <= > >= == != comparisons are supported "
                           "(`in`, `is` and their negations are not)",
                           "for an optional argument, use a number as the default instead of "
                           "None (e.g. scale=1.0) and compare with ==")
        left = self.lower_expr(node.left)
        if len(ops) == 1:
            right = self.lower_expr(node.comparators[0])
            return self.op(node, target, ops[0], [left, right])
        res = target or self.tmp()
        right = self.lower_expr(node.comparators[0])
        self.emit(Assign(res, ops[0], (left, right), self.loc(node)))
        out = self.out
        prev = right
        for o, comp in zip(ops[1:], node.comparators[1:]):
            inner = []
            self.emit(If(Var(res), inner, [], self.loc(node)))
            self.out = inner
            nxt = self.lower_expr(comp)
            self.emit(Assign(res, o, (prev, nxt), self.loc(node)))
            prev = nxt
        self.out = out
        return Var(res)

    def expr_IfExp(self, node, target):
        cond = self.lower_cond(node.test)
        res = target or self.tmp()
        body, orelse = [], []
        self.emit(If(cond, body, orelse, self.loc(node)))
        out = self.out
        self.out = body
        self.lower_expr(node.body, target=res)
        self.out = orelse
        self.lower_expr(node.orelse, target=res)
        self.out = out
        return Var(res)

    def expr_Subscript(self, node, target):
        if isinstance(node.value, gast.Attribute) and node.value.attr == "shape":
            arr = self.lower_expr(node.value.value)
            k = self.lower_expr(node.slice)
            if not isinstance(k, Const) or not isinstance(k.value, int):
                raise self.err(node.slice, "shape must be indexed with an integer constant")
            return self.op(node, target, "dim", [arr, k])
        if isinstance(node.value, gast.Name) and node.value.id in self.growable:
            return lower_list_index(self, node, target)       # xs[k] of a growable list
        arr = self.lower_expr(node.value, allow_tuple=True)
        if isinstance(arr, TupleValue):
            k = constant_index(node.slice, len(arr))
            if k is None:
                raise self.err(node.slice, f"{arr.what} is a tuple of {len(arr)} values: index it "
                               f"with an integer constant from {-len(arr)} to {len(arr) - 1}",
                               "or unpack it: a, b = ...")
            return arr.items[k]
        if not isinstance(arr, Var):
            raise self.err(node.value, "only arrays can be indexed")
        index = self.lower_index(node.slice)
        return self.op(node, target, "getitem", [arr], index=index)

    def expr_Tuple(self, node, target):
        raise self.err(node, "tuples are supported only in unpacking assignments and shapes",
                       "index with the numbers themselves (B[1, -1], not idx = (1, -1); "
                       "B[idx]), and unpack tuples into names (a, b = t)")

