"""gemver: rank-2 update ``A + u1 v1^T + u2 v2^T``, then ``x = x + beta A^T y + z`` and
``w = w + alpha A x``; loss ``1/2 ||w||^2``.  The harness's app of the same name
(``apps.gemver``): its objective, JAX version, inputs and differentiated parameters."""
from __future__ import annotations

from apps.gemver import SIZES, WRT, jax_objective, make_inputs, objective

__all__ = ["SIZES", "WRT", "jax_objective", "make_inputs", "objective"]
