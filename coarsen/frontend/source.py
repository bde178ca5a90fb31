"""Reading a function's source and resolving the names it uses, recording every read.

Requires: a plain Python function defined in a file (or a ``numba.njit`` dispatcher, read
through ``.py_func``).
Guarantees: ``FunctionSource`` with the gast ``FunctionDef`` whose line and column numbers
are those of the file, the file's lines for error messages, and a resolver that maps a free
name to what it denotes at the time of the call (module, known math/NumPy function, user
function, or numeric constant).  Anything else is a ``CoarsenError`` with a location.

Dependencies: every read the frontend makes of the world outside the function's own text is
recorded, in order, on one ``Dependencies`` object shared by a lowering (``get_source(fn,
deps)`` passes it on to inlined helpers): each function whose source is read (module,
qualified name, file, first line, a hash of its text, its default values) and each lookup of
a free name in a closure or a module's globals, or of a user module's attribute, with a
description of the value found (numbers exactly, arrays by dtype and rank, functions and
modules by name, anything else by type; absent names too).  ``FunctionSource.globals`` and
``.closure`` are read-only views that record each lookup, so a read cannot bypass the record.
The lowering is a deterministic function of that sequence of reads (and coarsen's own code),
so ``Dependencies.fingerprint()`` identifies the generated code's inputs: equal fingerprints
mean equal lowerings.  (The lowering also reads a helper's ``__name__`` and ``__defaults__``
from the function object; both are part of its ``FunctionRead``.)

``display_path(fn)``: the file defining ``fn`` relative to the folder holding its top-level
package (``mypkg/model.py``), for headers of generated and exported code; never absolute.
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import inspect
import json
import math
import os
import sys
import textwrap
import types
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field

import gast
import numpy as np

from .custom import CustomRules
from ..errors import CoarsenError
from ..ir.primitives import spellings


# ------------------------------------------------------------------ dependencies
@dataclass(frozen=True)
class FunctionRead:
    """A function whose source the frontend read: the differentiated one or an inlined helper."""
    module: str
    qualname: str
    name: str
    filename: str
    lineno: int            # first line of the function (its first decorator) in the file
    source_sha256: str     # of the function's own source text
    defaults: tuple        # ``describe`` of each default value (positional, then keyword-only)


@dataclass(frozen=True)
class NameRead:
    """One lookup of a free name: in a function's ``closure`` or ``global`` scope, or an
    ``attribute`` of a user module (``name`` is then ``module.attr``)."""
    owner: str             # "module:qualname" of the function whose code made the lookup
    scope: str
    name: str
    value: tuple           # ``describe`` of the value found, or ``ABSENT``


ABSENT = ("absent",)


@dataclass
class Dependencies:
    """Every read one lowering made outside the function's own text, in order (see the module
    docstring).  Repeated reads are kept: the sequence, not the set, determines the lowering."""
    reads: list = field(default_factory=list)   # FunctionRead | NameRead

    def record(self, read) -> None:
        self.reads.append(read)

    @property
    def functions(self) -> list:
        """The functions whose source was read, each once, in first-read order."""
        out = []
        for r in self.reads:
            if isinstance(r, FunctionRead) and r not in out:
                out.append(r)
        return out

    def fingerprint(self) -> str:
        """sha256 (64 hex digits) of the whole sequence of reads."""
        h = hashlib.sha256()
        for r in self.reads:
            h.update(json.dumps([type(r).__name__, *astuple(r)], separators=(",", ":"),
                                ensure_ascii=False).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()


def describe(value) -> tuple:
    """What the frontend can make of ``value``, as JSON-able data: numbers exactly (they are
    baked into the generated code), arrays by dtype and rank (they are passed in), functions
    and modules by name (a function's source is recorded when it is read), known math/NumPy
    functions by primitive, anything else by type."""
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, (int, np.integer)):
        return ("int", str(int(value)))
    if isinstance(value, (float, np.floating)):
        return ("float", float(value).hex(), type(value).__name__)
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, int(value.ndim))
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    known = _known_by_identity().get(id(value))
    if known is not None:
        return ("known", known.op, known.origin)
    if isinstance(value, CustomRules):      # its rules' sources are read where it is called
        return (value.kind, str(value.__module__), value.__qualname__)
    py = getattr(value, "py_func", None)
    if isinstance(py, types.FunctionType):
        return ("jit function", str(py.__module__), py.__qualname__)
    if isinstance(value, types.FunctionType):
        return ("function", str(value.__module__), value.__qualname__)
    return ("object", f"{type(value).__module__}.{type(value).__qualname__}")


class RecordingScope(Mapping):
    """A read-only view of a scope (a function's globals or closure) that records each lookup
    (``in``, ``[]``, ``get``; iteration records the sorted names) on a ``Dependencies``."""

    __slots__ = ("_data", "_deps", "_owner", "_scope")

    def __init__(self, data, deps: Dependencies, owner: str, scope: str):
        self._data = data
        self._deps = deps
        self._owner = owner
        self._scope = scope

    def _note(self, name, value=ABSENT):
        self._deps.record(NameRead(self._owner, self._scope, str(name), value))

    def __getitem__(self, name):
        try:
            value = self._data[name]
        except KeyError:
            self._note(name)
            raise
        self._note(name, describe(value))
        return value

    def __contains__(self, name):
        if name in self._data:
            self._note(name, describe(self._data[name]))
            return True
        self._note(name)
        return False

    def __iter__(self):
        names = sorted(str(k) for k in self._data)
        self._note("*", ("names", *names))
        return iter(names)

    def __len__(self):
        self._note("*", ("count", len(self._data)))
        return len(self._data)


def _owner(fn) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


@dataclass
class FunctionSource:
    fn: types.FunctionType
    node: gast.FunctionDef
    filename: str
    lines: list
    globals: Mapping       # a RecordingScope over fn.__globals__
    closure: Mapping       # a RecordingScope over the closure's cell contents
    deps: Dependencies = field(default_factory=Dependencies)

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


def get_source(fn, deps: Dependencies | None = None) -> FunctionSource:
    """The source of ``fn``; the read (and every later lookup through the returned scopes) is
    recorded on ``deps`` (a new ``Dependencies`` when None)."""
    fn = unwrap(fn)
    if isinstance(fn, CustomRules):
        raise CoarsenError(f"{fn.__name__} is a {fn.kind} function: its rule applies where a "
                           "differentiated function calls it",
                           hint=f"differentiate a function that calls it: def loss(x): return "
                                f"{fn.__name__}(x)")
    if not isinstance(fn, types.FunctionType):
        raise CoarsenError(f"{fn!r} is not a plain Python function",
                           hint="pass a function defined with `def` in a file (or a numba.njit dispatcher)")
    if fn.__name__ == "<lambda>":
        raise CoarsenError("lambdas cannot be differentiated",
                           filename=fn.__code__.co_filename, lineno=fn.__code__.co_firstlineno,
                           hint="define the function with `def` in a file")
    if deps is None:
        deps = Dependencies()
    # code objects compare equal across files (CPython leaves co_filename out of code
    # equality): two modules' identical helpers would share one file's source and locations
    key = (fn.__code__, fn.__code__.co_filename)
    cached = _SOURCE_CACHE.get(key)
    closure = {}
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    if cached is None:
        cached = _read_source(fn)
        _SOURCE_CACHE[key] = cached
    node, filename, lines, first, text_sha = cached
    defaults = tuple(describe(v) for v in (fn.__defaults__ or ())) + \
        tuple((k, describe(v)) for k, v in sorted((fn.__kwdefaults__ or {}).items()))
    deps.record(FunctionRead(str(fn.__module__), fn.__qualname__, fn.__name__, filename, first,
                             text_sha, defaults))
    owner = _owner(fn)
    return FunctionSource(fn, node, filename, lines,
                          RecordingScope(fn.__globals__, deps, owner, "global"),
                          RecordingScope(closure, deps, owner, "closure"), deps)


def _read_source(fn):
    """(node, filename, module lines, first line, sha256 of the function's text) of ``fn``."""
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
    if all_lines is not None and os.path.exists(filename):
        _check_current(fn, "".join(all_lines), filename)
    if all_lines is None:
        all_lines = [""] * (first - 1) + lines
    all_lines = [ln.rstrip("\n") for ln in all_lines]
    if isinstance(node, gast.AsyncFunctionDef):
        raise CoarsenError("async functions cannot be differentiated", filename=filename,
                           lineno=node.lineno, col_offset=node.col_offset,
                           source_line=all_lines[node.lineno - 1] if node.lineno <= len(all_lines) else None,
                           hint="write a plain `def` function")
    return node, filename, all_lines, first, hashlib.sha256(text.encode("utf-8")).hexdigest()


def _code_text(code):
    """What a function's code object says it computes: its bytecode, constants and names."""
    return (code.co_code, tuple(c for c in code.co_consts if not isinstance(c, types.CodeType)),
            code.co_names, code.co_varnames)


@functools.lru_cache(maxsize=32)
def _module_defs(module_text, filename):
    """The code objects of a module text's top-level functions, compiled once per text (the
    function and its helpers in one file share it); none where it does not compile."""
    try:
        compiled = compile(module_text, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return ()
    return tuple(c for c in compiled.co_consts if isinstance(c, types.CodeType))


def _check_current(fn, module_text, filename):
    """``CoarsenError`` where the file's text of ``fn`` is not the code Python runs: the file
    was edited after the module was imported (coarsen would differentiate the new text while
    ``fn`` runs the old one).  The whole file is compiled, as the import compiled it (a
    function's text compiled alone can give other bytecode), and its function of the same
    name and first line compared with ``fn``'s code.  Module-level functions only; a file that
    does not compile is not compared."""
    code = fn.__code__
    if "<locals>" in fn.__qualname__ or code.co_freevars or module_text is None:
        return
    defs = [c for c in _module_defs(module_text, filename) if c.co_name == code.co_name]
    if not defs:
        return          # not a module-level def (made by a decorator, exec...): not compared
    if not any(c.co_firstlineno == code.co_firstlineno and _code_text(c) == _code_text(code)
               for c in defs):
        raise CoarsenError(f"the source of {fn.__qualname__} in {os.path.basename(filename)} is not "
                           "the code Python runs: the file changed after the module was imported",
                           filename=filename, lineno=code.co_firstlineno,
                           hint="reload the module (importlib.reload) or restart, so that the "
                                "function and its file agree")


def display_path(fn) -> str:
    """The file defining ``fn`` as a portable path: relative to the folder that holds its
    top-level package (``mypkg/model.py`` for ``mypkg.model``), found through the module's
    ``__name__`` and the package's ``__path__``; just the file name for a module outside any
    package (or ``__main__``).  Never an absolute path."""
    fn = unwrap(fn)
    filename = fn.__code__.co_filename
    modname = str(getattr(fn, "__module__", "") or "")
    top = modname.split(".")[0]
    pkg = sys.modules.get(top) if top and top != "__main__" else None
    real = os.path.realpath(filename)
    for entry in list(getattr(pkg, "__path__", None) or []):
        root = os.path.dirname(os.path.realpath(entry))
        try:
            rel = os.path.relpath(real, root)
        except ValueError:      # another drive
            continue
        if not rel.startswith(os.pardir + os.sep) and rel != os.pardir and not os.path.isabs(rel):
            return rel.replace(os.sep, "/")
    return os.path.basename(filename)


# ------------------------------------------------------------------ known functions
# spellings of primitives come from the registry (coarsen.ir.primitives); the frontend adds
# its own sugar, lowered into primitives by coarsen.frontend.lower (square, clip, outer, shape;
# array and asarray by coarsen.frontend.array_literals)
MATH_FUNCS = spellings("math")
NUMPY_FUNCS = {**spellings("numpy"), "square": "square", "clip": "clip", "outer": "outer",
               "shape": "shape", "array": "array", "asarray": "asarray",
               # joining, splitting and building arrays (coarsen.frontend.joins)
               **{f: f for f in ("vstack", "hstack", "row_stack", "column_stack", "append",
                                 "roll", "flipud", "fliplr", "rot90", "tile", "repeat",
                                 "gradient", "split", "array_split", "vsplit", "hsplit",
                                 "dsplit", "select")}}
# np.linalg.<attr>: the registry's spellings and the frontend's norm
LINALG_FUNCS = {**spellings("linalg"), "norm": "norm"}
BUILTIN_FUNCS = {"abs": "abs", "min": "min", "max": "max", "float": "float", "int": "int",
                 "len": "len", "range": "range", "bool": "bool",
                 "sum": "builtin_sum"}       # sum([a, b]) (coarsen.frontend.joins)
CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "tau": math.tau, "nan": math.nan}


@dataclass(frozen=True)
class Module:
    kind: str  # 'math' | 'numpy'


@dataclass(frozen=True)
class Known:
    op: str        # canonical primitive name
    origin: str    # 'math' | 'numpy' | 'builtin' | 'numba' (prange) | 'dtype'
    # the spelling, as ``coarsen.frontend.signatures`` names it ("np.transpose", "math.log",
    # "np.linalg.norm", "min"): the signature a call of it is bound to
    name: str = field(default="", compare=False)


@dataclass(frozen=True)
class GlobalArray:
    """A NumPy array bound to a module-level name: a read-only input of the gradient.
    ``where``: the namespace (a module's or function's globals dict) and the name it was read
    under, for the check that it is not rebound later (``coarsen.transforms.module_arrays``); None for a
    closure's cell."""
    name: str
    value: object = field(compare=False, hash=False)
    where: object = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class UserModule:
    module: types.ModuleType


@dataclass(frozen=True)
class UserFunction:
    fn: types.FunctionType


@dataclass(frozen=True)
class CustomFunction:
    """A function with custom derivative rules (``coarsen.frontend.custom``)."""
    obj: CustomRules


_IDENTITY: dict = {}


def _known_by_identity():
    if not _IDENTITY:
        for name, op in MATH_FUNCS.items():
            _IDENTITY[id(getattr(math, name))] = Known(op, "math", "math." + name)
        for name, op in NUMPY_FUNCS.items():
            obj = getattr(np, name, None)
            if obj is not None and id(obj) not in _IDENTITY:
                _IDENTITY[id(obj)] = Known(op, "numpy", "np." + name)
        import numba        # numba.prange: a for loop's header, like range (coarsen.frontend.lower)
        _IDENTITY[id(numba.prange)] = Known("prange", "numba", "numba.prange")
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
    if isinstance(value, CustomRules):
        return CustomFunction(value)
    py = getattr(value, "py_func", None)
    if isinstance(py, types.FunctionType):
        return UserFunction(py)
    if isinstance(value, types.FunctionType):
        return UserFunction(value)
    return None


def resolve_attribute(src: FunctionSource, module: types.ModuleType, attr: str):
    """``(found, classification)`` of ``module.attr`` read by ``src``'s code (recorded)."""
    owner = _owner(src.fn)
    name = f"{module.__name__}.{attr}"
    try:
        value = getattr(module, attr)
    except AttributeError:
        src.deps.record(NameRead(owner, "attribute", name, ABSENT))
        return False, None
    src.deps.record(NameRead(owner, "attribute", name, describe(value)))
    if isinstance(value, np.ndarray):
        return True, GlobalArray(attr, value, (vars(module), attr))
    return True, classify(value)


def resolve(src: FunctionSource, name: str):
    """Resolve a free (non-local) name of ``src``; returns a classification or raises KeyError.
    The lookups are recorded on ``src.deps`` (through its recording scopes)."""
    for scope in (src.closure, src.globals):
        if name in scope:
            value = scope[name]
            if isinstance(value, np.ndarray):
                where = (src.fn.__globals__, name) if scope is src.globals else None
                return GlobalArray(name, value, where), value
            return classify(value), value
    if hasattr(builtins, name) and name in BUILTIN_FUNCS:
        return Known(BUILTIN_FUNCS[name], "builtin", name), getattr(builtins, name)
    raise KeyError(name)
