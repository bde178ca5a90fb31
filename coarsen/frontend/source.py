"""Reading a function's source and resolving the names it uses.

Requires: a plain Python function defined in a file (or a ``numba.njit`` dispatcher, read
through ``.py_func``).
Guarantees: ``FunctionSource`` with the gast ``FunctionDef`` whose line and column numbers
are those of the file, the file's lines for error messages, and a resolver that maps a free
name to what it denotes at the time of the call (module, known math/NumPy function, user
function, or numeric constant).  Anything else is a ``CoarsenError`` with a location.
"""
from __future__ import annotations

import builtins
import inspect
import math
import textwrap
import types
from dataclasses import dataclass, field

import gast
import numpy as np

from ..errors import CoarsenError


@dataclass
class FunctionSource:
    fn: types.FunctionType
    node: gast.FunctionDef
    filename: str
    lines: list
    globals: dict
    closure: dict

    def line(self, lineno):
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1]
        return None

    def error(self, node, problem, hint=None):
        lineno = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", None)
        return CoarsenError(problem, filename=self.filename, lineno=lineno, col_offset=col,
                            source_line=self.line(lineno) if lineno else None, hint=hint)


def unwrap(fn):
    """The Python function behind ``fn`` (a ``numba`` dispatcher gives its ``py_func``)."""
    py = getattr(fn, "py_func", None)
    if py is not None and isinstance(py, types.FunctionType):
        return py
    return fn


_SOURCE_CACHE: dict = {}


def _shift(tree, dline, dcol):
    for node in gast.walk(tree):
        if hasattr(node, "lineno") and node.lineno is not None:
            node.lineno += dline
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno += dline
            if getattr(node, "col_offset", None) is not None:
                node.col_offset += dcol
            if getattr(node, "end_col_offset", None) is not None:
                node.end_col_offset += dcol


def get_source(fn) -> FunctionSource:
    fn = unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise CoarsenError(f"{fn!r} is not a plain Python function",
                           hint="pass a function defined with `def` in a file (or a numba.njit dispatcher)")
    if fn.__name__ == "<lambda>":
        raise CoarsenError("lambdas cannot be differentiated",
                           filename=fn.__code__.co_filename, lineno=fn.__code__.co_firstlineno,
                           hint="define the function with `def` in a file")
    key = fn.__code__
    cached = _SOURCE_CACHE.get(key)
    closure = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    if cached is not None:
        node, filename, lines = cached
        return FunctionSource(fn, node, filename, lines, fn.__globals__, closure)
    filename = fn.__code__.co_filename
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise CoarsenError(f"cannot read the source of {fn.__qualname__} ({exc})",
                           filename=filename, lineno=fn.__code__.co_firstlineno,
                           hint="coarsen reads source code: define the function in a .py file, "
                                "not in a REPL, exec or a notebook cell without source") from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = gast.parse(dedented)
    fdefs = [n for n in tree.body if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef))]
    if not fdefs:
        raise CoarsenError(f"cannot find the definition of {fn.__qualname__}", filename=filename,
                           lineno=first)
    node = fdefs[0]
    _shift(node, first - 1, indent)
    try:
        all_lines = inspect.getsourcelines(inspect.getmodule(fn))[0] if inspect.getmodule(fn) else None
    except (OSError, TypeError):
        all_lines = None
    if all_lines is None:
        all_lines = [""] * (first - 1) + lines
    all_lines = [ln.rstrip("\n") for ln in all_lines]
    if isinstance(node, gast.AsyncFunctionDef):
        raise CoarsenError("async functions cannot be differentiated", filename=filename,
                           lineno=node.lineno, col_offset=node.col_offset,
                           source_line=all_lines[node.lineno - 1] if node.lineno <= len(all_lines) else None,
                           hint="write a plain `def` function")
    _SOURCE_CACHE[key] = (node, filename, all_lines)
    return FunctionSource(fn, node, filename, all_lines, fn.__globals__, closure)


# ------------------------------------------------------------------ known functions
MATH_FUNCS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
    "atan2": "arctan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh",
    "acosh": "arccosh", "atanh": "arctanh", "exp": "exp", "expm1": "expm1", "log": "log",
    "log1p": "log1p", "log10": "log10", "log2": "log2", "sqrt": "sqrt", "pow": "pow",
    "fabs": "abs", "hypot": "hypot", "erf": "erf", "erfc": "erfc", "floor": "floor", "ceil": "ceil",
    "lgamma": "lgamma", "gamma": "gamma",
}
NUMPY_FUNCS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "arcsin", "arccos": "arccos",
    "arctan": "arctan", "arctan2": "arctan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "arcsinh": "arcsinh", "arccosh": "arccosh", "arctanh": "arctanh",
    "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "log10": "log10",
    "log2": "log2", "sqrt": "sqrt", "abs": "abs", "absolute": "abs", "fabs": "abs",
    "square": "square", "power": "pow", "hypot": "hypot", "minimum": "minimum",
    "maximum": "maximum", "fmin": "minimum", "fmax": "maximum", "clip": "clip", "where": "where",
    "sum": "sum", "mean": "mean", "prod": "prod", "max": "amax", "amax": "amax", "min": "amin",
    "amin": "amin", "std": "std", "var": "var", "dot": "dot", "matmul": "matmul",
    "outer": "outer", "flip": "flip", "transpose": "transpose", "reshape": "reshape",
    "zeros": "zeros", "ones": "ones", "empty": "empty", "full": "full", "eye": "eye",
    "identity": "eye", "zeros_like": "zeros_like", "ones_like": "ones_like",
    "empty_like": "empty_like", "full_like": "full_like", "copy": "copyarr",
    "float64": "float", "floor": "floor", "ceil": "ceil", "sign": "sign", "tanh": "tanh",
    "shape": "shape", "expand_dims": "expand_dims", "logaddexp": "logaddexp",
}
BUILTIN_FUNCS = {"abs": "abs", "min": "min", "max": "max", "float": "float", "int": "int",
                 "len": "len", "range": "range", "bool": "bool"}
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "tau": math.tau, "nan": math.nan}


@dataclass(frozen=True)
class Module:
    kind: str  # 'math' | 'numpy'


@dataclass(frozen=True)
class Known:
    op: str        # canonical primitive name
    origin: str    # 'math' | 'numpy' | 'builtin'


@dataclass(frozen=True)
class GlobalArray:
    """A NumPy array bound to a module-level name: a read-only input of the gradient."""
    name: str
    value: object = field(compare=False, hash=False)


@dataclass(frozen=True)
class UserModule:
    module: types.ModuleType


@dataclass(frozen=True)
class UserFunction:
    fn: types.FunctionType


_IDENTITY: dict = {}


def _known_by_identity():
    if not _IDENTITY:
        for name, op in MATH_FUNCS.items():
            _IDENTITY[id(getattr(math, name))] = Known(op, "math")
        for name, op in NUMPY_FUNCS.items():
            obj = getattr(np, name, None)
            if obj is not None and id(obj) not in _IDENTITY:
                _IDENTITY[id(obj)] = Known(op, "numpy")
    return _IDENTITY


def classify(value):
    """What a free name's value means to coarsen, or None when it means nothing."""
    if value is math:
        return Module("math")
    if value is np:
        return Module("numpy")
    if isinstance(value, types.ModuleType):
        return UserModule(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return value.item() if isinstance(value, (np.integer, np.floating)) else value
    known = _known_by_identity().get(id(value))
    if known is not None:
        return known
    py = getattr(value, "py_func", None)
    if isinstance(py, types.FunctionType):
        return UserFunction(py)
    if isinstance(value, types.FunctionType):
        return UserFunction(value)
    return None


def resolve(src: FunctionSource, name: str):
    """Resolve a free (non-local) name of ``src``; returns a classification or raises KeyError."""
    for scope in (src.closure, src.globals):
        if name in scope:
            value = scope[name]
            if isinstance(value, np.ndarray):
                return GlobalArray(name, value), value
            return classify(value), value
    if hasattr(builtins, name) and name in BUILTIN_FUNCS:
        return Known(BUILTIN_FUNCS[name], "builtin"), getattr(builtins, name)
    raise KeyError(name)
