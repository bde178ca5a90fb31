"""The module-level arrays a transform reads, checked at each call for being rebound.

A transform (``Gradient``, ``Jvp``, ``Jacobian``, ``Hessian``, ``Hvp``) finds the module-level
arrays its function reads when it is made, and passes them to the compiled code as extra
read-only arguments, by reference: a write into one (``W[:] = ...``) is seen by the next call.
A name bound to another array afterwards (``module.W = new``) is not: the transform would go on
with the old one while the function itself reads the new one.

Requires: a ``Function`` from ``coarsen.frontend.lower`` (``global_arrays`` and
``global_array_origins``: per array, the name it was read under and where, a namespace dict
and a key, or None for a closure's cell, which is not checked).
Guarantees: ``ModuleArrays.of(fn_ir, fname).check()`` returns when every name is still bound
to the array found, else raises ``CoarsenError`` naming it; one dictionary lookup per array,
nothing where the function reads none (``bool(ModuleArrays)`` is False then).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CoarsenError

__all__ = ["ModuleArrays"]


@dataclass(frozen=True)
class ModuleArrays:
    fname: str
    arrays: tuple       # the arrays found, in the order the compiled code takes them
    names: tuple        # the name each was read under
    places: tuple       # (namespace dict, key) per array, or None

    @classmethod
    def of(cls, fn_ir, fname):
        origins = getattr(fn_ir, "global_array_origins", None) or \
            [(None, None)] * len(fn_ir.global_arrays)
        return cls(fname, tuple(fn_ir.global_arrays), tuple(n for n, _ in origins),
                   tuple(w for _, w in origins))

    def __bool__(self):
        return bool(self.arrays)

    def check(self):
        for array, name, place in zip(self.arrays, self.names, self.places):
            if place is not None and place[0].get(place[1]) is not array:
                raise CoarsenError(
                    f"the module-level array {name!r} that {self.fname} reads was rebound after "
                    "the transform was made; it computes with the array it found then",
                    hint=f"make the transform again (e.g. coarsen.differentiate({self.fname})) "
                         f"after rebinding {name}, or write into the array in place "
                         f"({name}[...] = new values), which every call sees")
