"""The signatures of the functions and array methods coarsen lowers, and the binding of a call's
arguments to them: no argument of a call is ever dropped.

Requires: ``gast`` call nodes and a ``Lowerer`` (``coarsen.frontend.lower``) for its errors
(``lw.err``).
Guarantees:

* ``signature_of(spelling)``: the ``inspect.Signature`` of a spelling, ``"np.transpose"``,
  ``"np.linalg.norm"``, ``"math.log"``, ``"min"`` (a builtin) or ``".sum"`` (the array method),
  read from the live function with ``inspect.signature`` (NumPy's own parameter names, order and
  kinds: ``np.sin``'s second positional parameter is ``out``), or from ``FALLBACK`` where Python
  gives none (``math.log``, ``math.hypot``, ``min``, ``max``, ``int``, ``bool``); a reduction
  method (``.sum``, ``.std``...) hides its parameters behind ``**kwargs``, so it takes those of
  the NumPy function of the same name without the array (``x.std(0, None, None, 1)`` is
  ``np.std(x, 0, None, None, 1)``, ``ddof=1``). ``None`` for a spelling with no signature.
* ``bind(lw, call, spelling, understood)`` binds the call's positional and keyword arguments
  to the parameters as Python would and returns a ``Bound``.  The constant ``None`` passed for
  a parameter of ``NONE_IS_DEFAULT`` whose default is ``None`` (``out=None``, ``dtype=None``)
  is that default: as if absent.  A ``CoarsenError`` at the
  argument, naming the parameter and the spelling, refuses: an argument whose parameter the
  lowering does not understand (not in ``understood``: ``np.sum(x, dtype=...)``,
  ``np.sin(x, out)``), too many positional arguments, an unknown keyword, a positional-only
  parameter given by keyword, a parameter given twice, ``*args``/``**kwargs`` in the call and
  a missing required parameter.
* ``Bound``: the argument nodes by parameter name (a var-positional parameter's value is the
  list of its nodes); ``b[name]``, ``b.get(name)`` and ``name in b`` mark a parameter as read,
  and ``Bound.finish()`` refuses, as above, an argument that the lowering accepted but never
  read.  So each argument of a call is either consumed by its lowering or refused.
"""
from __future__ import annotations

import builtins
import inspect
import math
from functools import lru_cache

import gast
import numpy as np

P = inspect.Parameter


def _sig(*params):
    """An ``inspect.Signature`` from ``(name, kind[, default])`` triples."""
    return inspect.Signature([P(n, k, default=d[0] if d else P.empty) for n, k, *d in params])


_POS, _POK, _VAR, _KW = P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.VAR_POSITIONAL, P.KEYWORD_ONLY

# where inspect.signature has no answer (the documented signatures)
FALLBACK = {
    "math.log": _sig(("x", _POS), ("base", _POS, math.e)),
    "math.hypot": _sig(("coordinates", _VAR)),
    "min": _sig(("args", _VAR), ("key", _KW, None), ("default", _KW, None)),
    "max": _sig(("args", _VAR), ("key", _KW, None), ("default", _KW, None)),
    "int": _sig(("x", _POS, 0), ("base", _POK, 10)),
    "bool": _sig(("x", _POS, False)),
    "range": _sig(("args", _VAR)),
}

# the parameters for which NumPy (and Python) take None as absent, where None is their default
# (a ufunc's ``signature=None`` is a TypeError)
NONE_IS_DEFAULT = frozenset({"out", "dtype", "like", "device", "copy", "order", "M", "key",
                             "axis", "ord", "kind", "stable"})

# the array methods whose parameters are the NumPy function's without the array
REDUCTION_METHODS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "max", "min": "min",
                     "std": "std", "var": "var"}


def spelling_object(spelling):
    """The Python object a spelling names (``"np.linalg.norm"`` -> ``np.linalg.norm``), or
    None."""
    for prefix, owner in (("np.linalg.", np.linalg), ("np.", np), ("math.", math),
                          ("numba.", None), (".", None)):
        if spelling.startswith(prefix):
            return getattr(owner, spelling[len(prefix):], None) if owner is not None else None
    return getattr(builtins, spelling, None)


@lru_cache(maxsize=None)
def signature_of(spelling):
    """The ``inspect.Signature`` of ``spelling`` (see the module docstring), or None."""
    if spelling in FALLBACK:
        return FALLBACK[spelling]
    if spelling.startswith("."):
        name = spelling[1:]
        if name in REDUCTION_METHODS:
            full = signature_of("np." + REDUCTION_METHODS[name])
            return full.replace(parameters=list(full.parameters.values())[1:])
        method = getattr(np.ndarray, name, None)
        if method is None:
            return None
        try:
            full = inspect.signature(method)
        except (TypeError, ValueError):
            return None
        return full.replace(parameters=list(full.parameters.values())[1:])     # without self
    obj = spelling_object(spelling)
    if obj is None:
        return None
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


class Bound:
    """A call's arguments by parameter name (see the module docstring)."""

    def __init__(self, lw, call, spelling, values):
        self.lw, self.call, self.spelling = lw, call, spelling
        self.values = values            # name -> gast node (a list for *args)
        self.read = set()

    def __contains__(self, name):
        self.read.add(name)
        return name in self.values

    def __getitem__(self, name):
        self.read.add(name)
        return self.values[name]

    def get(self, name, default=None):
        self.read.add(name)
        return self.values.get(name, default)

    def given(self):
        """The names of the parameters the call passes (marks nothing as read)."""
        return tuple(self.values)

    def finish(self):
        """Refuse an argument the lowering accepted but did not read."""
        for name, val in self.values.items():
            if name not in self.read:
                raise _refuse(self.lw, self.spelling, name, val, self.call)


def _refuse(lw, spelling, name, value, call, hint=None):
    where = (value[0] if value else call) if isinstance(value, list) else value
    return lw.err(where, f"{spelling}'s argument {name!r} is not supported",
                  hint or f"remove {name!r} from the call and write what it does with the "
                  "operations coarsen supports (coarsen refuses it rather than ignore it)")


def bind(lw, call, spelling, understood, hints=None):
    """Bind ``call``'s arguments to ``spelling``'s signature; refuse any argument whose
    parameter is not in ``understood`` (``hints``: parameter -> what to do instead)."""
    hints = hints or {}
    sig = signature_of(spelling)
    if sig is None:
        raise lw.err(call, f"internal: no signature known for {spelling}")
    params = list(sig.parameters.values())
    positional = [p for p in params if p.kind in (_POS, _POK)]
    var = next((p for p in params if p.kind == _VAR), None)
    var_kw = any(p.kind == P.VAR_KEYWORD for p in params)
    by_name = {p.name: p for p in params if p.kind not in (_VAR, P.VAR_KEYWORD)}
    values = {}
    for k, a in enumerate(call.args):
        if isinstance(a, gast.Starred):
            raise lw.err(a, f"*args in a call of {spelling} is not supported",
                         "pass the arguments one by one")
        if k < len(positional):
            values[positional[k].name] = a
        elif var is not None:
            values.setdefault(var.name, []).append(a)
        else:
            raise lw.err(a, f"{spelling} takes at most {len(positional)} positional "
                         f"argument(s), got {len(call.args)}")
    for kw in call.keywords:
        if kw.arg is None:
            raise lw.err(kw.value, f"**kwargs in a call of {spelling} is not supported",
                         "pass the arguments by name")
        p = by_name.get(kw.arg)
        if p is not None and p.kind == _POS:
            raise lw.err(kw.value, f"{spelling} takes {kw.arg!r} by position only, not by keyword")
        if p is None and not var_kw:
            raise lw.err(kw.value, f"{spelling} has no argument {kw.arg!r}")
        if kw.arg in values:
            raise lw.err(kw.value, f"{spelling}'s argument {kw.arg!r} is given twice")
        values[kw.arg] = kw.value
    for name, val in list(values.items()):
        if name not in understood:
            p = by_name.get(name)
            if p is not None and p.default is None and name in NONE_IS_DEFAULT \
                    and isinstance(val, gast.Constant) and val.value is None:
                del values[name]        # ``out=None``, ``dtype=None``: NumPy's default, as absent
                continue
            raise _refuse(lw, spelling, name, val, call, hints.get(name))
    for p in params:
        if p.kind in (_POS, _POK, _KW) and p.default is P.empty and p.name not in values:
            raise lw.err(call, f"{spelling} needs its argument {p.name!r}")
    return Bound(lw, call, spelling, values)
