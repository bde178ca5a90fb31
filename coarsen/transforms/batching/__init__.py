"""Batched transforms: ``g.batch(in_axes, target=...)`` of a ``Gradient`` (cpu, cuda, dask
backends) and of a ``Jvp``, ``Hessian`` or ``Hvp`` (``sweeps``)."""
