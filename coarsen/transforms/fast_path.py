"""The gradient's fast path, written out per number of arguments.

Requires: a class with the general ``__call__`` and the attributes the written-out call reads
(``coarsen.transforms.gradient.Gradient``: ``_fast``, ``_first_run``, ``_last``, ``_tape``, ``_keep_tapes``).
Guarantees: ``type_key(n, table)`` gives the functions that build the fast path's key (the
arguments' types) and look it up; ``arity_class(cls, n)`` the subclass of ``cls`` whose
``__call__`` takes ``n`` positional arguments straight to a direct hit; ``array_key(args)``
the key of arguments with arrays (dtype and rank too).  Moved out of ``coarsen.transforms.gradient`` as is.
"""
from __future__ import annotations

import numpy as np

__all__ = ["arity_class", "array_key", "type_key"]


def type_key(n, table):
    """Two functions of a tuple of ``n`` values: ``types`` gives the tuple of their types (the
    key of the fast path), ``lookup`` what ``table`` holds for that key (or None).  Written out
    for ``n``: twice as fast as ``tuple(map(type, args))``."""
    names = [f"a{k}" for k in range(n)]
    unpack = f"    {', '.join(names)}, = args\n" if n else ""
    key = f"({''.join(f'type({a}), ' for a in names)})"
    text = (f"def types(args):\n{unpack}    return {key}\n\n\n"
            f"def lookup(args, get=table.get):\n{unpack}    return get({key})\n")
    scope = {"table": table}
    exec(compile(text, "<coarsen argument types>", "exec"), scope)
    return scope["types"], scope["lookup"]


def arity_class(cls, n):
    """``cls`` with ``__call__`` written out for ``n`` positional arguments (the fast path of
    ``cls.__call__`` without its calls of ``_lookup`` and of ``*args``; any other call goes to
    ``cls.__call__``): one subclass per arity, made once, named as ``cls``."""
    sub = _CLASSES.get((cls, n))
    if sub is not None:
        return sub
    names = [f"a{k}" for k in range(n)]
    key = f"({''.join(f'type({a}), ' for a in names)})"
    plain = ", ".join(names)
    star = f"{plain}, *arrays" if n else "*arrays"
    args = f"({plain},)" if n else "()"
    if n:
        # positional-only parameters, each defaulting to a marker: positions fill from the
        # left, so the last one is the marker exactly when fewer were given (the general path
        # binds keywords and defaults, and raises the function's own TypeError)
        head = (f"def __call__(self, {', '.join(a + '=_UNSET' for a in names)}, /, *rest, **kwargs):\n"
                f"    if rest or kwargs or {names[-1]} is _UNSET:\n"
                f"        return base.__call__(self, *[a for a in {args} if a is not _UNSET], "
                f"*rest, **kwargs)\n")
    else:
        head = ("def __call__(self, *args, **kwargs):\n"
                "    if kwargs or args:\n"
                "        return base.__call__(self, *args, **kwargs)\n")
    text = (head +
            f"    hit = self._fast.get({key})\n"
            f"    if type(hit) is not tuple:\n"
            f"        return (hit or self._first_run)({args}, False)[1]\n"
            f"    art, _, entry, arrays, single, limit, scratch_limit = hit\n"
            f"    r = entry({star}) if arrays else entry({plain})\n"
            f"    t = r[2]\n"
            f"    self._last = art\n"
            f"    self._tape = t\n"
            f"    if t[0] + t[1] > limit or t[-1] > scratch_limit:\n"
            f"        self._keep_tapes({args}, art)\n"
            f"    return r[1][0] if single else r[1]\n")
    scope = {"base": cls, "_UNSET": _UNSET}
    exec(compile(text, f"<coarsen gradient call, {n} arguments>", "exec"), scope)
    sub = type(cls.__name__, (cls,), {"__call__": scope["__call__"], "__module__": cls.__module__,
                                      "__qualname__": cls.__qualname__,
                                      "__doc__": cls.__doc__, "_arity": n})
    _CLASSES[(cls, n)] = sub
    return sub


_CLASSES = {}
#: the default of the fast path's parameters: an argument not given
_UNSET = object()


def array_key(args):
    """What picks an artifact for arguments with arrays: each one's type, and an array's
    dtype (a ``np.dtype``: byte order included) and rank.  Written out per number of
    arguments (0.28 us for five, against 1.2 us for a generator over them reading
    ``dtype.str``: every call with arrays computes it)."""
    key = _ARRAY_KEYS.get(len(args))
    if key is None:
        key = _ARRAY_KEYS[len(args)] = _array_key_of(len(args))
    return key(args)


def _array_key_of(n):
    names = [f"a{k}" for k in range(n)]
    unpack = f"    {', '.join(names)}, = args\n" if n else ""
    items = "".join(f"(type({a}), {a}.dtype, {a}.ndim) if isinstance({a}, nd) else type({a}), "
                    for a in names)
    scope = {"nd": np.ndarray}
    exec(compile(f"def array_key(args):\n{unpack}    return ({items})\n",
                 "<coarsen argument kinds>", "exec"), scope)
    return scope["array_key"]


_ARRAY_KEYS = {}
