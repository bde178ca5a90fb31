"""Building gast nodes for generated code (the bottom of the code-generation layer).

Requires: nothing but gast (no module of coarsen: the primitive registry, the analyses and
both AD modes build their code with this module, so it sits below all of them).
Guarantees: generated code is assembled from AST nodes (names, numeric constants, calls),
never by pasting user strings; ``X`` wraps an expression node with Python operators so
derivative rules read like the formulas they implement.  A primitive applied by name
(``math.<f>`` or ``np.<f>`` as the registry spells it) is ``coarsen.ir.primitives.calls.fn``.
"""
from __future__ import annotations

import gast

_BIN = {"+": gast.Add, "-": gast.Sub, "*": gast.Mult, "/": gast.Div, "**": gast.Pow,
        "//": gast.FloorDiv, "%": gast.Mod, "@": gast.MatMult}
_CMP = {"<": gast.Lt, "<=": gast.LtE, ">": gast.Gt, ">=": gast.GtE, "==": gast.Eq, "!=": gast.NotEq}


def name(n, store=False):
    return gast.Name(id=n, ctx=gast.Store() if store else gast.Load(), annotation=None,
                     type_comment=None)


def const(v):
    if isinstance(v, bool) or v is None:
        return gast.Constant(value=v, kind=None)
    if isinstance(v, (int, float)) and (v < 0 or (isinstance(v, float) and str(v).startswith("-"))):
        return gast.UnaryOp(op=gast.USub(), operand=gast.Constant(value=-v, kind=None))
    if isinstance(v, float) and v != v:
        return call("float", const("nan"))
    if isinstance(v, float) and v in (float("inf"),):
        return attr("math.inf")
    return gast.Constant(value=v, kind=None)


def attr(path):
    parts = path.split(".")
    node = name(parts[0])
    for p in parts[1:]:
        node = gast.Attribute(value=node, attr=p, ctx=gast.Load())
    return node


def call(fn, *args, **kwargs):
    func = attr(fn) if isinstance(fn, str) else fn
    return gast.Call(func=func, args=[ex(a) for a in args],
                     keywords=[gast.keyword(arg=k, value=ex(v)) for k, v in kwargs.items()])


def ex(v):
    """Coerce to an expression node."""
    if isinstance(v, X):
        return v.node
    if isinstance(v, gast.AST):
        return v
    if isinstance(v, (int, float, bool)):
        return const(v)
    if isinstance(v, str):
        return name(v)
    if isinstance(v, tuple):
        return gast.Tuple(elts=[ex(e) for e in v], ctx=gast.Load())
    raise TypeError(v)


def _int_const(node):
    return isinstance(node, gast.Constant) and type(node.value) is int


def binop(a, op, b):
    """``a op b``; two integer constants are folded (``0 - 1`` is ``-1``: loop bounds read as
    written)."""
    left, right = ex(a), ex(b)
    if op in ("+", "-", "*") and _int_const(left) and _int_const(right):
        x, y = left.value, right.value
        return const(x + y if op == "+" else x - y if op == "-" else x * y)
    return gast.BinOp(left=left, op=_BIN[op](), right=right)


def compare(a, op, b):
    return gast.Compare(left=ex(a), ops=[_CMP[op]()], comparators=[ex(b)])


def subscript(a, index):
    idx = index if isinstance(index, gast.AST) else ex(index)
    return gast.Subscript(value=ex(a), slice=idx, ctx=gast.Load())


def slice_(lower=None, upper=None, step=None):
    return gast.Slice(lower=None if lower is None else ex(lower),
                      upper=None if upper is None else ex(upper),
                      step=None if step is None else ex(step))


def ifexp(c, a, b):
    return gast.IfExp(test=ex(c), body=ex(a), orelse=ex(b))


def tuple_(*elts):
    return gast.Tuple(elts=[ex(e) for e in elts], ctx=gast.Load())


def to_store(node):
    node = ex(node)
    if isinstance(node, gast.Name):
        return name(node.id, store=True)
    if isinstance(node, gast.Subscript):
        return gast.Subscript(value=node.value, slice=node.slice, ctx=gast.Store())
    if isinstance(node, gast.Tuple):
        return gast.Tuple(elts=[to_store(e) for e in node.elts], ctx=gast.Store())
    raise TypeError(node)


def assign(target, value, comment=None):
    node = gast.Assign(targets=[to_store(target)], value=ex(value), type_comment=None)
    if comment:
        node.coarsen_comment = comment
    return node


def augassign(target, op, value):
    return gast.AugAssign(target=to_store(target), op=_BIN[op](), value=ex(value))


def if_(test, body, orelse=()):
    return gast.If(test=ex(test), body=list(body) or [gast.Pass()], orelse=list(orelse))


def for_range(var, args, body):
    return gast.For(target=name(var, store=True), iter=call("range", *args), body=list(body) or [gast.Pass()],
                    orelse=[], type_comment=None)


def while_(test, body):
    return gast.While(test=ex(test), body=list(body), orelse=[])


def break_():
    return gast.Break()


def return_(value):
    return gast.Return(value=ex(value))


def funcdef(fname, params, body):
    args = gast.arguments(args=[name(p, store=False) for p in params], posonlyargs=[], vararg=None,
                          kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    for a in args.args:
        a.ctx = gast.Param()
    return gast.FunctionDef(name=fname, args=args, body=list(body), decorator_list=[], returns=None,
                            type_comment=None, type_params=[])


class X:
    """An expression with arithmetic operators; ``X.mode`` picks ``math`` or ``np`` calls."""

    __slots__ = ("node", "array")

    def __init__(self, node, array=False):
        self.node = ex(node)
        self.array = array

    def _wrap(self, other, node):
        arr = self.array or (isinstance(other, X) and other.array)
        return X(node, arr)

    def __add__(self, o):
        return self._wrap(o, binop(self, "+", o))

    def __radd__(self, o):
        return self._wrap(o, binop(o, "+", self))

    def __sub__(self, o):
        return self._wrap(o, binop(self, "-", o))

    def __rsub__(self, o):
        return self._wrap(o, binop(o, "-", self))

    def __mul__(self, o):
        return self._wrap(o, binop(self, "*", o))

    def __rmul__(self, o):
        return self._wrap(o, binop(o, "*", self))

    def __truediv__(self, o):
        return self._wrap(o, binop(self, "/", o))

    def __rtruediv__(self, o):
        return self._wrap(o, binop(o, "/", self))

    def __floordiv__(self, o):
        return self._wrap(o, binop(self, "//", o))

    def __pow__(self, o):
        return self._wrap(o, binop(self, "**", o))

    def __neg__(self):
        return X(gast.UnaryOp(op=gast.USub(), operand=self.node), self.array)

    def cmp(self, op, o):
        return self._wrap(o, compare(self, op, o))


def select(cond, a, b):
    """cond ? a : b, elementwise for arrays."""
    arr = any(isinstance(v, X) and v.array for v in (cond, a, b))
    if arr:
        return X(call("np.where", cond, a, b), True)
    return X(ifexp(cond, a, b), False)


def path_chain(branches, val):
    """Statements running one of a segment's paths: ``branches`` is ``[(decisions, body)]``
    (``decisions``: ((condition operand, flag), ...), ``val`` giving an operand's expression);
    the last path is the ``else`` of the others, tested in order."""
    if len(branches) == 1:
        return list(branches[0][1])
    chain = None
    for decisions, body in reversed(branches):
        if chain is None:
            chain = body or [gast.Pass()]
            continue
        tests = []
        for cond, flag in decisions:
            t = ex(val(cond))
            tests.append(t if flag else gast.UnaryOp(op=gast.Not(), operand=t))
        test = tests[0] if len(tests) == 1 else gast.BoolOp(op=gast.And(), values=tests)
        chain = [if_(test, body, chain)]
    return chain
