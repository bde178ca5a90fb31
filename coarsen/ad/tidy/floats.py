"""Which expressions of a generated function are float64 scalars, from the IR's types.

Requires: the typed IR's ``types`` ({name: ``Scalar`` or ``Array``}; the emitter adds the
variables it makes) and the adjoint suffix (``_bar``): the adjoint of a float64 variable is a
float64 of the same shape.
Guarantees: ``FloatFacts.of(types)``; ``scalar(e)`` is True only when the expression ``e``
evaluates to a Python/Numba float (never an int, a bool, an array or a complex): a float
constant, a float64 scalar name (or its adjoint), an element of a float64 array indexed at all
its axes by int scalars, ``float(...)``, a float-valued ``math`` function, and ``+ - * /`` and
unary ``+ -`` of those (with int scalars on one side), ``a if c else b`` of two.  ``holds(t)``
is True when an augmented-assignment target ``t`` is a float64 scalar name, a float64 array
name, or an element of one: ``t += 1.0 * e`` and ``t += e`` then give the same value
(``e`` converted to float64 either way).  Anything unknown is not a float.
``extended(fn)`` adds the names of one function whose every binding is known to be a float
(or an int) scalar; the float tape ``_ftape`` is a float64 vector.
"""
from __future__ import annotations

from dataclasses import dataclass

import gast

from .nodes import walk
BAR = "_bar"
#: the float tape (``coarsen.ad.reverse.tapes.FT``): a float64 vector
FLOAT_TAPE = "_ftape"

#: math functions that always return a float (never an int, as ``floor``/``ceil`` do)
_FLOAT_MATH = frozenset({
    "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "gamma",
    "lgamma", "pow", "hypot", "fabs", "copysign", "fmod", "degrees", "radians"})


@dataclass(frozen=True)
class FloatFacts:
    float_scalars: frozenset
    int_scalars: frozenset
    float_arrays: tuple         # ((name, ndim), ...), sorted

    @staticmethod
    def of(types):
        fs, ints, arrays = set(), set(), {}
        for v, t in (types or {}).items():
            kind = getattr(t, "kind", None)
            if kind == "f64":
                fs |= {v, v + BAR}
            elif kind == "i64":
                ints.add(v)
            elif getattr(t, "dtype", None) == "f64" and hasattr(t, "ndim"):
                arrays[v] = arrays[v + BAR] = t.ndim
        arrays.setdefault(FLOAT_TAPE, 1)
        return FloatFacts(frozenset(fs), frozenset(ints), tuple(sorted(arrays.items())))

    def extended(self, fn):
        """These facts and the function's own: a name of ``fn`` none of whose bindings is
        unknown (every one ``name = e`` with ``e`` a float scalar, or ``name += e`` /
        ``name -= e`` / ``name *= e`` with ``e`` a float scalar or int scalar) is a float scalar;
        likewise int scalars (``int(...)``, ``len``, ``.shape[k]``, int arithmetic, ``max`` /
        ``min`` of ints).  The least fixed point: a name is added only once all its bindings
        are known, so a cycle of unknowns stays unknown."""
        binds = {}
        for node in walk(fn):
            if isinstance(node, gast.Assign):
                for t in node.targets:
                    for n in walk(t):
                        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                            binds.setdefault(n.id, []).append(
                                ("=", node.value) if t is n else ("?", None))
            elif isinstance(node, gast.AugAssign) and isinstance(node.target, gast.Name):
                op = type(node.op).__name__ if isinstance(
                    node.op, (gast.Add, gast.Sub, gast.Mult)) else "?"
                binds.setdefault(node.target.id, []).append((op, node.value))
            elif isinstance(node, (gast.For, gast.AnnAssign)):
                for n in walk(node.target):
                    if isinstance(n, gast.Name):
                        binds.setdefault(n.id, []).append(("?", None))
        for a in fn.args.args:
            binds.setdefault(a.id, []).append(("?", None))
        facts = self
        while True:
            fs, ints = set(facts.float_scalars), set(facts.int_scalars)
            for name, bs in binds.items():
                if name in fs or name in ints or name in dict(facts.float_arrays):
                    continue
                if all(k != "?" and (facts.scalar(v) if k == "=" else
                                     facts.scalar(v) or facts.int_scalar(v)) for k, v in bs):
                    fs.add(name)
                elif all(k != "?" and facts.int_scalar(v) for k, v in bs):
                    ints.add(name)
            if len(fs) == len(facts.float_scalars) and len(ints) == len(facts.int_scalars):
                return facts
            facts = FloatFacts(frozenset(fs), frozenset(ints), facts.float_arrays)

    def _ndim(self, name):
        return dict(self.float_arrays).get(name)

    def int_scalar(self, e):
        """``e`` evaluates to an int (never a float, a bool, an array)."""
        if isinstance(e, gast.Constant):
            return type(e.value) is int
        if isinstance(e, gast.Name):
            return e.id in self.int_scalars
        if isinstance(e, gast.BinOp) and isinstance(e.op, (gast.Add, gast.Sub, gast.Mult,
                                                           gast.FloorDiv, gast.Mod)):
            return self.int_scalar(e.left) and self.int_scalar(e.right)
        if isinstance(e, gast.UnaryOp) and isinstance(e.op, (gast.USub, gast.UAdd)):
            return self.int_scalar(e.operand)
        if isinstance(e, gast.Call) and isinstance(e.func, gast.Name) and not e.keywords:
            if e.func.id in ("int", "len") and len(e.args) == 1:
                return True
            return e.func.id in ("max", "min") and len(e.args) >= 2 and \
                all(self.int_scalar(a) for a in e.args)
        # X.shape[k]
        return isinstance(e, gast.Subscript) and isinstance(e.value, gast.Attribute) and \
            e.value.attr == "shape" and isinstance(e.value.value, gast.Name) and \
            isinstance(e.slice, gast.Constant) and type(e.slice.value) is int

    def _element(self, e):
        """``a[i, j]``: a float64 array indexed at all its axes by int scalars."""
        if not (isinstance(e, gast.Subscript) and isinstance(e.value, gast.Name)):
            return False
        ndim = self._ndim(e.value.id)
        idx = e.slice.elts if isinstance(e.slice, gast.Tuple) else [e.slice]
        return ndim is not None and len(idx) == ndim and all(self.int_scalar(i) for i in idx)

    def scalar(self, e):
        """See the module docstring."""
        if isinstance(e, gast.Constant):
            return type(e.value) is float
        if isinstance(e, gast.Name):
            return e.id in self.float_scalars
        if isinstance(e, gast.Subscript):
            return self._element(e)
        if isinstance(e, gast.Call):
            f = e.func
            if isinstance(f, gast.Name) and f.id == "float" and len(e.args) == 1 and not e.keywords:
                return True
            return isinstance(f, gast.Attribute) and isinstance(f.value, gast.Name) and \
                f.value.id == "math" and f.attr in _FLOAT_MATH
        if isinstance(e, gast.UnaryOp) and isinstance(e.op, (gast.USub, gast.UAdd)):
            return self.scalar(e.operand)
        if isinstance(e, gast.BinOp) and isinstance(e.op, (gast.Add, gast.Sub, gast.Mult, gast.Div)):
            a, b = self.scalar(e.left), self.scalar(e.right)
            return (a and (b or self.int_scalar(e.right))) or (b and self.int_scalar(e.left))
        if isinstance(e, gast.IfExp):
            return self.scalar(e.body) and self.scalar(e.orelse)
        return False

    def holds(self, t):
        """See the module docstring."""
        if isinstance(t, gast.Name):
            return t.id in self.float_scalars or self._ndim(t.id) is not None
        return self._element(t)
