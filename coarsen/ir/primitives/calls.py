"""A primitive applied by name in generated code, spelled as the registry spells it.

Requires: the registry (``core``; the entry must be registered by the time a rule calls
``fn``, which is when code is emitted) and the gast builders ``coarsen.codegen.build``.
Guarantees: ``fn(name, *args)`` is ``math.<f>(args)`` for scalars and ``np.<f>(args)`` when
any argument is an array expression (``X.array``) or the primitive is ``np_only``, ``<f>``
being the entry's ``math_name``/``np_name`` (default: ``name``); the result is an ``X``.
"""
from __future__ import annotations

from ...codegen.build import X, call
from .core import primitive


def fn(fname, *args):
    """The primitive ``fname`` applied: ``math.<f>`` for scalars, ``np.<f>`` when any argument
    is an array expression (names from the primitive registry, ``coarsen.ir.primitives``)."""
    prim = primitive(fname)
    arr = any(isinstance(a, X) and a.array for a in args)
    if arr or prim.np_only:
        return X(call(f"np.{prim.np_name or fname}", *args), arr)
    return X(call(f"math.{prim.math_name or fname}", *args), arr)
