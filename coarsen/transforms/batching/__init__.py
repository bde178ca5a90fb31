"""Batched transforms, in the spirit of ``jax.vmap``: ``g.batch(in_axes, target=...)``.

Requires: a ``Gradient`` (``batched_gradient``) or a ``Jvp``, ``Hessian`` or ``Hvp``
(``sweeps``), and ``in_axes`` with ``0`` (batched along a leading axis) or ``None`` (shared) per
parameter.
Guarantees: ``batched_gradient(g, in_axes, target=None, **options)`` is the batch of the chosen
backend: ``cpu.BatchedGradient`` for ``"cpu"`` (a ``numba.prange`` driver) and ``"python"``,
``cuda.CudaBatchedGradient`` for ``"cuda"``, ``dask.DaskBatchedGradient`` for ``"dask"`` (the
only one taking ``client=``, ``chunks=``, ``nchunks=``; any other option raises
``CoarsenError``).  The backends import the host batch (``cpu``) and nothing of each other.
"""
from __future__ import annotations

from ...errors import CoarsenError
from .cpu import BatchedGradient
from .cuda import CudaBatchedGradient
from .dask import DaskBatchedGradient

__all__ = ["batched_gradient"]


def batched_gradient(g, in_axes, *, target=None, **options):
    """``g.batch(in_axes, target=...)``: see the module docstring."""
    if target == "dask":
        return DaskBatchedGradient(g, in_axes, **options)
    if options:
        raise CoarsenError(f"g.batch: {', '.join(sorted(options))} "
                           f"{'applies' if len(options) == 1 else 'apply'} to target='dask' only",
                           hint="pass target='dask', or drop the keyword")
    if target == "cuda":
        return CudaBatchedGradient(g, in_axes)
    return BatchedGradient(g, in_axes, target=target)
