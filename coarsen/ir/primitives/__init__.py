"""One registry of primitives (see ``core``); importing the package registers every family."""
from .core import (REGISTRY, CostClass, Primitive, defjvp, deflinear, defstructural, defvjp, dt,
                   dtype_join, err, forward_rule, make, nd, ops_where, primitive, refuse_jvp,
                   spelled, spellings)
from . import (elementwise, logic, casts, shapes, reductions, einsum, linalg,  # noqa: F401
               constructors, cumulative, arrays, custom, checks, fancy, lists)
from . import joins, building  # noqa: F401  (joining and building arrays, issue 44b)
from . import elementwise_numpy, axes, diagonals, products, sorting, padding  # noqa: F401

__all__ = ["REGISTRY", "CostClass", "Primitive", "defjvp", "deflinear", "defstructural",
           "defvjp", "dt", "dtype_join", "err", "forward_rule", "make", "nd", "ops_where", "primitive",
           "refuse_jvp", "spelled", "spellings"]
