"""One registry of primitives (see ``core``); importing the package registers every family."""
from .core import (REGISTRY, Primitive, defstructural, defvjp, dt, dtype_join, err, make, nd,
                   ops_where, primitive, spelled, spellings)
from . import (elementwise, logic, casts, shapes, reductions, linalg, constructors,  # noqa: F401
               cumulative, arrays)

__all__ = ["REGISTRY", "Primitive", "defstructural", "defvjp", "dt", "dtype_join", "err", "make",
           "nd", "ops_where", "primitive", "spelled", "spellings"]
