"""Shared helpers: a cpu-target module's helper functions, compiled once per process.

Every generated module carries the runtime helpers it calls (``_grow``, ``_reserve``,
``_bcast_len``...), so that exported code stands alone.  Built as they are, each module would
make Numba compile its own copy of every helper: about 1 s per module for the two tape
helpers alone, paid again by the gradient-only variant.  ``split(source)`` moves such helpers
into modules of their own, one per helper, named by the hash of their text, which every
module that carries the same text imports instead, so Numba compiles a helper once per
process per signature (and, with ``cache=True``, once per cache directory).

Requires: the source of a target-"cpu" module (``printer.render``).
Guarantees:
    * ``split(source)`` returns ``(text, helpers)``: ``helpers`` are the ``SharedHelper``s to
      build first, dependencies before their users; ``text`` is ``source`` with each shared
      helper's lines (decorators to the end of its body) replaced by one
      ``from <module> import <name>`` line and blank lines, so every other line keeps its
      number (tracebacks and the source-line comments stay right).
    * A top-level function is shared only when it cannot mean anything else in a module of its
      own: its name starts with ``_``, it is defined once, it has no nested scopes and no
      ``global``/``nonlocal``, and every global name it reads is a builtin that the module
      does not rebind, one of ``math``, ``np`` and ``numba`` (which the module binds by the
      standard imports only), or another shared helper.  A helper's module is its exact text
      under those imports and the imports of the helpers it calls, so its name (the hash)
      changes whenever its text or any callee's text changes; a module that carries other
      text for a name keeps its own copy.
    * A source with nothing to share is returned unchanged; the result is deterministic.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from .cache import sha256_hex

__all__ = ["SharedHelper", "split", "module_name"]

#: the module names a helper may read, bound as the printer binds them
_STANDARD = {"math": "import math", "np": "import numpy as np", "numba": "import numba"}
_HEADER = "import math\n\nimport numba\nimport numpy as np\n"
_PREFIX_LEN = 20


def module_name(source: str, name: str) -> str:
    """The name ``build`` imports ``source`` under (``_coarsen_gen_<name>_<sha[:20]>``)."""
    return f"_coarsen_gen_{name}_{sha256_hex(source)[:_PREFIX_LEN]}"


@dataclass(frozen=True)
class SharedHelper:
    """One helper's module: ``build(source, name=build_name, target="cpu")`` imports it as
    ``module``, which defines ``function``."""
    function: str
    build_name: str
    source: str
    module: str


def _free_names(fdef):
    """The global names ``fdef`` reads, or None when its scoping is not plain."""
    bound = set()
    loads = set()
    args = fdef.args
    for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if a is not None:
            bound.add(a.arg)
    for node in ast.walk(fdef):
        if node is not fdef and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                  ast.ClassDef, ast.ListComp, ast.SetComp,
                                                  ast.DictComp, ast.GeneratorExp)):
            return None
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return None
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    for d in fdef.decorator_list:
        for node in ast.walk(d):
            if isinstance(node, ast.Name):
                loads.add(node.id)
    return loads - bound


def _top_level_bindings(tree):
    """{name: [statement, ...]} of what the module's top level binds."""
    out = {}
    for st in tree.body:
        names = []
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [st.name]
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in st.names]
        else:
            names = [n.id for n in ast.walk(st) if isinstance(n, ast.Name)
                     and not isinstance(n.ctx, ast.Load)]
        for n in names:
            out.setdefault(n, []).append(st)
    return out


def _standard_binding(name, stmts):
    return (len(stmts) == 1 and isinstance(stmts[0], ast.Import)
            and ast.unparse(stmts[0]) == _STANDARD[name])


def split(source: str):
    """``(text, helpers)``: see the module docstring."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, ()
    binds = _top_level_bindings(tree)
    base = {n for n in _STANDARD if n in binds and _standard_binding(n, binds[n])}
    candidates = {}
    for st in tree.body:
        if (isinstance(st, ast.FunctionDef) and st.name.startswith("_") and len(binds[st.name]) == 1
                and st.decorator_list):
            free = _free_names(st)
            if free is not None:
                candidates[st.name] = (st, free)
    # the fixed point: a helper is shared when every global it reads is safe
    shared = set(candidates)
    changed = True
    while changed:
        changed = False
        for name in sorted(shared):
            _, free = candidates[name]
            for g in free:
                ok = g in shared or g in base or (g not in binds and hasattr(builtins, g))
                if not ok:
                    shared.discard(name)
                    changed = True
                    break
    if not shared:
        return source, ()
    lines = source.splitlines(keepends=True)
    # name -> SharedHelper, inserted after the helpers it calls (so in an order to build them)
    helpers = {}

    def helper(name, visiting=()):
        if name in helpers:
            return helpers[name]
        if name in visiting:
            return None                 # a cycle: not shared
        st, free = candidates[name]
        deps = []
        for g in sorted(free & shared):
            h = helper(g, visiting + (name,))
            if h is None:
                return None
            deps.append(h)
        text = "".join(lines[_first_line(st) - 1:st.end_lineno])
        imports = "".join(f"from {d.module} import {d.function}\n" for d in deps)
        src = _HEADER + (("\n" + imports) if imports else "") + "\n\n" + text.rstrip("\n") + "\n"
        build_name = "rt" + name
        h = SharedHelper(name, build_name, src, module_name(src, build_name))
        helpers[name] = h
        return h

    for name in sorted(shared):
        helper(name)
    if not helpers:
        return source, ()
    out = list(lines)
    for h in helpers.values():
        st, _ = candidates[h.function]
        first = _first_line(st)
        out[first - 1] = f"from {h.module} import {h.function}\n"
        for k in range(first, st.end_lineno):
            out[k] = "\n"
    return "".join(out), tuple(helpers.values())


def _first_line(st):
    """The first line of a function definition, its decorators included."""
    return min([d.lineno for d in st.decorator_list] + [st.lineno])
