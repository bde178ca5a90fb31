"""The transforms layer: the public transforms and everything they share.

Requires: the frontend, IR, analyses and AD modes of this package (``coarsen.frontend``,
``coarsen.ir``, ``coarsen.analysis``, ``coarsen.ad``) and ``coarsen.lowering``; nothing below
imports this package.
Guarantees: ``gradient`` (``differentiate``/``Gradient``), ``jvp`` (``jvp``/``Jvp``),
``jacobian`` (``jacobian``/``Jacobian``) and ``hessian`` (``hessian``/``Hessian``,
``hvp``/``Hvp``), re-exported by ``coarsen``.  This package imports none of its modules, so
that ``coarsen.transforms.jvp`` is the module (``coarsen.jvp`` is the function).
"""
