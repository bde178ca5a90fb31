"""Derivative rules: one registry, in the style of autograd's ``defvjp``.

Requires: ``coarsen.ad.build`` expression wrappers.
Guarantees: ``PARTIALS[op]`` gives, for each operand of an element-wise primitive, a function
of the operands' expressions returning the local partial derivative (or ``None`` where the
partial is zero); the reverse sweep multiplies it by the output's adjoint and sums over
broadcast axes.  Partials are written from the operands only (the output is recomputed where
needed), so the reverse sweep needs exactly the operands a rule mentions: the tape analysis
reads them off the generated expressions.  Non-element-wise primitives (indexing, reductions,
matrix products, reshapes) have their vector-Jacobian products in ``coarsen.ad.reverse``.

Conventions at non-differentiable points (those of JAX, checked against jax.grad):
``abs'(0) = 1``;
``max``/``min``/``maximum``/``minimum`` split the adjoint evenly between tied operands;
comparisons, ``floor``, ``ceil``, ``sign``, ``//`` and integer operations have zero derivative.
"""
from __future__ import annotations

import math

from .build import X, fn, select

PARTIALS: dict = {}


def defvjp(op, *partials):
    """Register the local partials of ``op``, one per operand (``None``: zero)."""
    PARTIALS[op] = partials


def _one(*_):
    return X(1.0)


def _pow_base(x, y, yconst=None):
    if yconst is not None:
        if yconst == 1:
            return X(1.0)
        if yconst == 2:
            return 2.0 * x
        if yconst == 0.5:
            return 0.5 / fn("sqrt", x)
        return X(float(yconst)) * x ** X(float(yconst - 1) if isinstance(yconst, float) else yconst - 1)
    return y * x ** (y - 1.0)


defvjp("add", _one, _one)
defvjp("sub", _one, lambda x, y: X(-1.0))
defvjp("mul", lambda x, y: y, lambda x, y: x)
defvjp("div", lambda x, y: 1.0 / y, lambda x, y: -(x / y) / y)
defvjp("pow", _pow_base, lambda x, y: fn("log", x) * x ** y)
defvjp("neg", lambda x: X(-1.0))
defvjp("copy", _one)
defvjp("astype", _one)
defvjp("float", _one)
defvjp("sin", lambda x: fn("cos", x))
defvjp("cos", lambda x: -fn("sin", x))
defvjp("tan", lambda x: 1.0 / (fn("cos", x) * fn("cos", x)))
defvjp("arcsin", lambda x: 1.0 / fn("sqrt", 1.0 - x * x))
defvjp("arccos", lambda x: -1.0 / fn("sqrt", 1.0 - x * x))
defvjp("arctan", lambda x: 1.0 / (1.0 + x * x))
defvjp("sinh", lambda x: fn("cosh", x))
defvjp("cosh", lambda x: fn("sinh", x))
defvjp("tanh", lambda x: 1.0 - fn("tanh", x) * fn("tanh", x))
defvjp("arcsinh", lambda x: 1.0 / fn("sqrt", x * x + 1.0))
defvjp("arccosh", lambda x: 1.0 / fn("sqrt", x * x - 1.0))
defvjp("arctanh", lambda x: 1.0 / (1.0 - x * x))
defvjp("exp", lambda x: fn("exp", x))
defvjp("expm1", lambda x: fn("exp", x))
defvjp("log", lambda x: 1.0 / x)
defvjp("log1p", lambda x: 1.0 / (1.0 + x))
defvjp("log10", lambda x: 1.0 / (x * math.log(10.0)))
defvjp("log2", lambda x: 1.0 / (x * math.log(2.0)))
defvjp("sqrt", lambda x: 0.5 / fn("sqrt", x))
defvjp("abs", lambda x: select(x.cmp(">=", 0.0), 1.0, -1.0))
defvjp("erf", lambda x: (2.0 / math.sqrt(math.pi)) * fn("exp", -(x * x)))
defvjp("erfc", lambda x: (-2.0 / math.sqrt(math.pi)) * fn("exp", -(x * x)))
defvjp("arctan2", lambda y, x: x / (x * x + y * y), lambda y, x: -y / (x * x + y * y))
defvjp("hypot", lambda x, y: x / fn("hypot", x, y), lambda x, y: y / fn("hypot", x, y))
defvjp("minimum",
       lambda x, y: select(x.cmp("<", y), 1.0, select(x.cmp("==", y), 0.5, 0.0)),
       lambda x, y: select(y.cmp("<", x), 1.0, select(x.cmp("==", y), 0.5, 0.0)))
defvjp("maximum",
       lambda x, y: select(x.cmp(">", y), 1.0, select(x.cmp("==", y), 0.5, 0.0)),
       lambda x, y: select(y.cmp(">", x), 1.0, select(x.cmp("==", y), 0.5, 0.0)))
defvjp("mod", _one, lambda x, y: -fn("floor", x / y))
defvjp("where", None, lambda c, a, b: select(c, 1.0, 0.0), lambda c, a, b: select(c, 0.0, 1.0))
defvjp("logaddexp", lambda x, y: fn("exp", x - fn("logaddexp", x, y)),
       lambda x, y: fn("exp", y - fn("logaddexp", x, y)))

# primitives with zero derivative everywhere they are defined
ZERO = {"floordiv", "floor", "ceil", "sign", "lt", "le", "gt", "ge", "eq", "ne", "not", "truth",
        "or", "and", "range_cont", "dim", "size", "ndim", "int", "zeros", "ones", "empty", "eye",
        "zeros_like", "ones_like", "empty_like"}

# primitives coarsen evaluates but cannot differentiate (math has no digamma): allowed only
# where no differentiated value flows into them (activity analysis refuses the rest)
NO_DERIVATIVE = {"lgamma", "gamma"}

# primitives whose vector-Jacobian products are structural (coarsen.ad.reverse)
STRUCTURAL = {"getitem": (0,), "sum": (0,), "mean": (0,), "prod": (0,), "amax": (0,),
              "amin": (0,), "std": (0,), "var": (0,), "matmul": (0, 1), "dot": (0, 1),
              "transpose": (0,), "reshape": (0,), "ravel": (0,), "flip": (0,),
              "expand_dims": (0,), "copyarr": (0,), "full": (-1,), "full_like": (1,)}


def diff_positions(op, nargs):
    """Operand positions through which derivatives flow."""
    if op in ZERO:
        return ()
    if op in NO_DERIVATIVE:
        return tuple(range(nargs))
    if op in PARTIALS:
        return tuple(i for i, p in enumerate(PARTIALS[op]) if p is not None)
    if op in STRUCTURAL:
        return tuple(p % nargs for p in STRUCTURAL[op])
    raise KeyError(op)
