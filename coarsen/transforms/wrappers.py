"""Generated wrapper functions: small Python functions, written as source text, that call a
user's function (or generated code) and that the frontend reads and inlines like any user code.

Requires: a name, parameter names, body lines (valid Python in coarsen's input language, one
statement a line, without indentation) and the free names the body reads with their values
(the wrapped function, ``np``, module-level arrays).
Guarantees: ``make_wrapper(...)`` returns a ``Wrapper`` whose ``fn`` is a plain Python function
compiled from ``source``; the source is registered in ``linecache`` under ``filename`` (which
names the wrapped function and a hash of the text: the same text always has the same name and
content, different texts never share a name), so ``inspect.getsource`` and coarsen's frontend
read it as they read a file, and its line numbers are those of ``source``.  Its module name is
``_coarsen_wrappers`` (outside any package: headers show the file name).  The transforms built
on other transforms use it: reverse rows of ``coarsen.jacobian`` (``np.sum(f(...) * _seed)``),
tuple results made arrays, and the Hessian-vector products of ``coarsen.hessian`` (the
tangent of a generated JVP).  ``tuple_length(src)`` is ``k`` where every ``return`` of a
function is a tuple of ``k`` values (None where none is a tuple; ``CoarsenError`` for a mix);
``array_form(fn, src, params, k)`` the wrapper returning those ``k`` values as one array (``fn``
itself for ``k=None``).  Deterministic: equal inputs give equal source, file name and
hence equal cache keys of what is built from it.  Nothing here is kept but the ``linecache``
entry.
"""
from __future__ import annotations

import hashlib
import keyword
import linecache
from dataclasses import dataclass

import gast
import numpy as np

from ..errors import CoarsenError

MODULE = "_coarsen_wrappers"


@dataclass(frozen=True)
class Wrapper:
    """A generated function and where its text lives."""
    fn: object          # the plain Python function
    source: str         # its text
    filename: str       # its ``linecache`` name


def fresh_name(base, taken):
    """``base``, or ``base2``, ``base3``... : the first not in ``taken``."""
    name, k = base, 2
    while name in taken or keyword.iskeyword(name):
        name, k = f"{base}{k}", k + 1
    return name


def make_wrapper(kind, name, params, body, bindings, about):
    """The ``Wrapper`` ``def name(params): body`` whose free names are ``bindings``; ``kind``
    and ``about`` (the wrapped function's qualified name) name its file."""
    lines = [f"def {name}({', '.join(params)}):"] + [f"    {line}" for line in body]
    source = "\n".join(lines) + "\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<coarsen {kind} of {about} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": MODULE, **bindings}
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)
    return Wrapper(namespace[name], source, filename)


def tuple_length(src):
    """``k`` when every ``return`` of the function is a literal tuple of ``k`` values, ``None``
    when none is a tuple; a mix raises ``CoarsenError`` at the first odd one."""
    rets = [n for n in gast.walk(src.node) if isinstance(n, gast.Return) and n.value is not None]
    lengths = [len(r.value.elts) if isinstance(r.value, gast.Tuple) else None for r in rets]
    if not any(k is not None for k in lengths):
        return None
    for r, k in zip(rets, lengths):
        if k != lengths[0] or k is None:
            raise CoarsenError("the function's returns differ: a tuple of "
                               f"{lengths[0]} values at one, {'one value' if k is None else k} here",
                               filename=src.filename, lineno=r.lineno, col_offset=r.col_offset,
                               source_line=src.line(r.lineno),
                               hint="return the same kind of result on every path")
    return lengths[0]


def array_form(fn, src, params, k):
    """``fn`` itself, or for a function returning ``k`` scalars the generated wrapper that
    returns them as one array."""
    if k is None:
        return fn
    taken = set(params)
    f, np_, r = fresh_name("_f", taken), fresh_name("np", taken), fresh_name("_r", taken)
    items = ", ".join(f"{r}[{i}]" for i in range(k))
    return make_wrapper("array result", f"_array_{fn.__name__}", params,
                        [f"{r} = {f}({', '.join(params)})", f"return {np_}.array([{items}])"],
                        {f: fn, np_: np}, f"{fn.__module__}.{fn.__qualname__}").fn
