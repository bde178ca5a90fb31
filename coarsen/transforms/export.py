"""Export a gradient as a standalone, reviewable Python module.

Requires: a ``Gradient`` (``coarsen.differentiate``) and a signature, either in Numba notation
("float64[:], float64[:, :], int64"; one type per parameter of the user's function) or, by
default, the signature of the gradient's last call.

Guarantees: ``export_gradient(g, path, signature=None)`` writes ``path`` atomically (through
``coarsen.lowering.export_module``) and returns it as a ``pathlib.Path``. The file

* starts with a comment header: the source function (qualified name, and file and line with
  the file relative to the folder holding its top-level package, e.g. ``mypkg/model.py``,
  never an absolute path: ``coarsen.frontend.source.display_path``), the signature, ``wrt``,
  coarse or fine-grained AD, the target and coarsen's version, and the command that
  regenerates it;
* contains the specialization's generated module unchanged except for the name of its entry,
  which becomes ``_value_and_grad_<f>_entry`` (it returns ``(value, grads, (tape_floats,
  tape_ints))``; same text, so Numba compiles the same code);
* defines ``value_and_grad_<f>(<the user's parameter names>)`` and ``grad_<f>(...)`` with the
  calling convention of ``g``: a tuple of gradients in ``wrt`` order, or a single value when g
  was built with a single ``wrt``; scalar gradients as Python floats, array gradients in the
  dtype of the argument (float32 arrays are computed in float64 and their gradients cast back,
  in these plain-Python wrappers, exactly as ``Gradient`` does); arguments are converted as
  ``Gradient`` converts them, so the numbers are bit-identical to ``g``'s;
* checks each argument's kind (float, int, bool) and rank against the exported signature and
  raises ``TypeError`` otherwise (float32 and float64 arrays are both accepted for a float
  array parameter, like ``g``);
* imports only ``math``, ``numpy`` and ``numba`` (none at all besides ``math``/``numpy`` for
  ``target="python"``): it imports and runs with coarsen absent.

Module-level arrays that the function reads (``g.module_arrays``) are embedded in the file as
literals (exact: ``repr`` of a float round-trips), a snapshot of their values at export time,
and passed to the entry as its trailing arguments; arrays of more than ``MAX_EMBEDDED``
elements are refused with a ``CoarsenError`` (pass them as parameters instead).
"""
from __future__ import annotations

import inspect
import io
import math
import re
import tokenize

import numpy as np

from .. import lowering
from .version import __version__
from ..errors import CoarsenError
from ..frontend.source import display_path
from .arguments import convert_argument

__all__ = ["CONVERT", "MAX_EMBEDDED", "array_literal", "example_args", "export_gradient",
           "kind_of_dtype", "parse_signature", "rename_identifier", "sig_text",
           "strip_leading_comments", "with_imports"]

#: the largest module-level array (in elements) that an export embeds as a literal
MAX_EMBEDDED = 100_000

_DTYPES = {
    "float64": "float64", "f8": "float64", "double": "float64", "float": "float64",
    "float32": "float32", "f4": "float32", "single": "float32",
    "int64": "int64", "i8": "int64", "int": "int64", "intp": "int64",
    "int32": "int32", "i4": "int32", "int16": "int16", "int8": "int8",
    "uint64": "uint64", "uint32": "uint32", "uint16": "uint16", "uint8": "uint8",
    "bool": "bool", "boolean": "bool", "bool_": "bool", "b1": "bool",
}
_TYPE_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[([^\]]*)\])?\s*")
_DIM_RE = re.compile(r"\s*:\s*(?::\s*1\s*)?")


def _split_top(text):
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def with_imports(body, needed):
    """``body`` with each plain ``import`` line of ``needed`` present, the leading import block
    in isort's order (the standard library, then third-party modules by name)."""
    lines = body.split("\n")
    k = 0
    while k < len(lines) and (lines[k].startswith("import ") or not lines[k].strip()) \
            and not (k > 0 and not lines[k].strip() and not lines[k - 1].strip()):
        k += 1
    head = [ln for ln in lines[:k] if ln.startswith("import ")]
    for imp in needed:
        if imp not in head:
            head.append(imp)
    stdlib = sorted(ln for ln in head if ln.split()[1] in ("math",))
    third = sorted((ln for ln in head if ln not in stdlib), key=lambda ln: ln.split()[1])
    rest = lines[k:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return "\n".join(stdlib + ([""] if stdlib and third else []) + third + ["", ""] + rest)


def parse_signature(text, n_params=None):
    """``"float64[:], int64"`` -> ``[("float64", 1), ("int64", 0)]`` (NumPy dtype name, rank).

    Accepts Numba's array notation with optional contiguity (``float64[:, ::1]``), optional
    surrounding parentheses, and scalar names float64/float32/int64/int32/.../bool/boolean.
    """
    if isinstance(text, (tuple, list)):
        items = [str(t) for t in text]
    elif isinstance(text, str):
        s = text.strip()
        if s.startswith("(") and s.endswith(")"):
            s = s[1:-1]
        items = [p for p in _split_top(s)]
        if items and not items[-1].strip() and len(items) > 1:  # trailing comma
            items = items[:-1]
    else:
        raise CoarsenError(f"signature must be a string in Numba notation, got {text!r}",
                           hint='e.g. signature="float64[:], float64[:, :], int64"')
    out = []
    for item in items:
        m = _TYPE_RE.fullmatch(item)
        if not m or m.group(1) not in _DTYPES:
            raise CoarsenError(f"cannot read the type {item.strip()!r} in the signature {text!r}",
                               hint="use Numba notation: float64, float32, int64, bool, "
                                    "float64[:], float64[:, :], int64[:] ...")
        rank = 0
        if m.group(2) is not None:
            dims = m.group(2).split(",")
            if not all(_DIM_RE.fullmatch(d) for d in dims):
                raise CoarsenError(f"cannot read the array dimensions of {item.strip()!r}",
                                   hint="write one ':' per dimension, e.g. float64[:, :]")
            rank = len(dims)
        out.append((_DTYPES[m.group(1)], rank))
    if n_params is not None and len(out) != n_params:
        raise CoarsenError(f"the signature {text!r} has {len(out)} types but the function has "
                           f"{n_params} parameters")
    return out


def example_args(parsed):
    """Example values whose coarsen types are the parsed signature (used to specialize)."""
    args = []
    for dtype, rank in parsed:
        if rank:
            args.append(np.zeros((1,) * rank, dtype=np.dtype(dtype)))
        elif dtype == "float64":
            args.append(1.0)
        elif dtype == "float32":
            args.append(np.float32(1.0))
        elif dtype == "bool":
            args.append(True)
        else:
            args.append(1)
    return tuple(args)


def sig_text(parsed):
    return ", ".join(d + ("[" + ", ".join(":" * r) + "]" if r else "") for d, r in parsed)


def kind_of_dtype(dtype):
    return "f" if dtype.startswith("float") else ("b" if dtype == "bool" else "i")


def entry_array(a):
    """A module-level array as the entry takes it, as ``Gradient`` converts it at each call
    (``coarsen.transforms.arguments.convert_argument``): the export computes what ``g``
    computes."""
    return convert_argument(a)


def array_literal(a):
    a = np.asarray(a)
    if a.size > MAX_EMBEDDED:
        raise CoarsenError(f"the function reads a module-level array of {a.size} elements; an export "
                           f"embeds at most {MAX_EMBEDDED}",
                           hint="pass the array as a parameter of the function instead")
    kind = a.dtype.kind
    if kind == "f":
        def lit(v):
            if math.isnan(v):
                return "math.nan"
            if math.isinf(v):
                return "math.inf" if v > 0 else "-math.inf"
            return repr(float(v))
    elif kind in "iu":
        def lit(v):
            return repr(int(v))
    elif kind == "b":
        def lit(v):
            return repr(bool(v))
    else:  # pragma: no cover - the core refuses other dtypes
        raise CoarsenError(f"cannot embed a module-level array of dtype {a.dtype}")
    flat = [lit(v) for v in a.ravel().tolist()]
    rows = []
    for i in range(0, len(flat), 8):
        rows.append("    " + ", ".join(flat[i:i + 8]) + ",")
    body = "\n".join(rows)
    return f"np.array([\n{body}\n], dtype=np.{a.dtype.name}).reshape({tuple(a.shape)!r})"


CONVERT = '''
def _coarsen_convert(name, kind, rank, a):
    """Check an argument against the exported signature and convert it as coarsen does."""
    if isinstance(a, np.ndarray):
        if rank == 0 or a.ndim != rank or a.dtype.kind not in ("f" if kind == "f" else ("iu" if kind == "i" else "b")):
            raise TypeError("{fname}: argument %r is a %d-d array of %s; this module was exported "
                            "for %s" % (name, a.ndim, a.dtype, _SIGNATURE[_PARAMS.index(name)]))
        if a.dtype.kind == "f" and a.dtype != np.float64:
            a = a.astype(np.float64)
        elif a.dtype.kind in "iu" and a.dtype != np.int64:
            a = a.astype(np.int64)
        return a
    if rank != 0:
        raise TypeError("{fname}: argument %r must be an array (%s), got %s"
                        % (name, _SIGNATURE[_PARAMS.index(name)], type(a).__name__))
    if kind == "f":
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (float, int, np.floating, np.integer)):
            raise TypeError("{fname}: argument %r must be a float, got %s" % (name, type(a).__name__))
        return float(a)
    if kind == "i":
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TypeError("{fname}: argument %r must be an int, got %s" % (name, type(a).__name__))
        return int(a)
    if not isinstance(a, (bool, np.bool_)):
        raise TypeError("{fname}: argument %r must be a bool, got %s" % (name, type(a).__name__))
    return a

'''

_WRAPPERS = '''

# ---------------------------------------------------------------------------------------------
# The calling convention of coarsen's Gradient, in plain Python (no coarsen needed).
# ---------------------------------------------------------------------------------------------

_PARAMS = {params!r}
# per parameter: kind of the exported type ('f' float, 'i' int, 'b' bool) and its rank
_KINDS = {kinds!r}
# positions of the differentiated parameters, in the order of the gradients
_WRT = {wrt_pos!r}
_SINGLE = {single!r}
{globals_block}
{convert}

def value_and_grad_{fname}({arglist}):
    """Value of {qualname} and its gradient with respect to {wrt_text}.

    Returns (value, gradient{ret_note}); array gradients have the dtype of their argument."""
    _coarsen_args = ({argtuple})
    _coarsen_conv = tuple(_coarsen_convert(_PARAMS[_i], _KINDS[_i][0], _KINDS[_i][1], _coarsen_args[_i])
                          for _i in range(len(_PARAMS))) + _MODULE_ARRAYS
    _coarsen_value, _coarsen_grads, _coarsen_tape = {entry}(*_coarsen_conv)
    _coarsen_out = []
    for _j, _i in enumerate(_WRT):
        _gr = _coarsen_grads[_j]
        _a = _coarsen_args[_i]
        if isinstance(_a, np.ndarray):
            _gr = np.asarray(_gr).astype(_a.dtype, copy=False)
        else:
            _gr = float(_gr)
        _coarsen_out.append(_gr)
    if _SINGLE:
        return float(_coarsen_value), _coarsen_out[0]
    return float(_coarsen_value), tuple(_coarsen_out)


def grad_{fname}({arglist}):
    """Gradient of {qualname} with respect to {wrt_text} (see value_and_grad_{fname})."""
    return value_and_grad_{fname}({callargs})[1]


__all__ = ["value_and_grad_{fname}", "grad_{fname}"]
'''


#: what the wrappers read besides their parameters: a parameter of one of these names would
#: shadow it (the wrappers then take the IR's escaped names instead)
_WRAPPER_READS = frozenset({"np", "math", "numba", "float", "int", "bool", "tuple", "range", "len",
                            "enumerate", "isinstance", "type", "TypeError", "_PARAMS", "_KINDS",
                            "_WRT", "_SINGLE", "_MODULE_ARRAYS", "_SIGNATURE", "_j", "_i", "_gr",
                            "_a"})


def _wrapper_names(g):
    """The wrappers' parameter names: the user's, as ``g`` binds them (``grad_f(x,
    _scale=3.0)``), or the IR's escaped name of each one that would shadow what the
    wrappers read (coarsen.frontend.names.Namer: they never start with "_" nor shadow
    math, np or numba)."""
    # each name on its own: one parameter named math took the IR's names for all of them
    # (x_bar_v for x_bar); the IR's escapes are names no identifier of the function uses
    return [ir if n in _WRAPPER_READS or n.startswith(("_coarsen", "_value_and_grad_")) else n
            for n, ir in zip(g.params, g.ir_params)]


def wrapper_params(g):
    """``_wrapper_names`` with the function's defaults where they are numbers or bools (the
    trailing run of parameters that all have such defaults), so that the exported functions
    take the arguments ``g`` takes."""
    names = _wrapper_names(g)
    params = list(inspect.signature(g.fn).parameters.values())
    out = list(names)
    for k in range(len(params) - 1, -1, -1):
        d = params[k].default
        if d is inspect.Parameter.empty or not isinstance(d, (bool, int, float)) or \
                isinstance(d, float) and not math.isfinite(d):
            break
        out[k] = f"{names[k]}={d!r}"
    return out


def rename_identifier(source, old, new):
    """``source`` with every identifier token ``old`` renamed ``new`` (tokens, not text:
    comments and strings stay as they are).  ``new`` must not occur as an identifier."""
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    if any(t.type == tokenize.NAME and t.string == new for t in toks):  # pragma: no cover
        raise CoarsenError(f"export: the generated module already defines {new}")
    lines = source.splitlines(keepends=True)
    for t in reversed(toks):          # right to left: earlier columns stay valid
        if t.type == tokenize.NAME and t.string == old:
            (row, col), (_, end) = t.start, t.end
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)


def strip_leading_comments(source):
    lines = source.splitlines(keepends=True)
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        i += 1
    return "".join(lines[i:])


def export_gradient(g, path, signature=None):
    """Write ``g`` specialized on ``signature`` as a standalone module at ``path``; see the
    module docstring.  Returns the path."""
    fname = g.fn.__name__
    if signature is None:
        last = g.last_specialization
        if last is None:
            raise CoarsenError(f"export: no signature given and the gradient of {fname} has not been "
                               "called yet",
                               hint='pass signature="float64[:], int64" (Numba notation), '
                                    "or call the gradient once first")
        signature = last.signature
    parsed = parse_signature(signature, len(g.params))
    art = g.specialize(example_args(parsed))      # the Artifact (coarsen.transforms.artifact)
    entry = art.entry_name
    new_entry = f"_value_and_grad_{fname}_entry"
    body = rename_identifier(strip_leading_comments(art.source), entry, new_entry)

    globals_lines = [f"_SIGNATURE = {tuple(sig_text([t]) for t in parsed)!r}"]
    if art.module_arrays:
        globals_lines.append("# module-level arrays read by the function: a snapshot taken at export time")
        lits = [array_literal(entry_array(a)) for a in art.module_arrays]
        globals_lines.append("_MODULE_ARRAYS = (\n" + "".join(
            "    " + lit.replace("\n", "\n    ") + ",\n" for lit in lits) + ")")
    else:
        globals_lines.append("_MODULE_ARRAYS = ()")
    wrt_pos = tuple(g.params.index(w) for w in art.wrt)
    single = g.returns_single
    wrappers = _WRAPPERS.format(
        params=tuple(g.params),
        kinds=tuple((kind_of_dtype(d), r) for d, r in parsed),
        wrt_pos=wrt_pos,
        single=single,
        globals_block="\n".join(globals_lines),
        fname=fname,
        qualname=g.fn.__qualname__,
        arglist=", ".join(wrapper_params(g)),
        callargs=", ".join(_wrapper_names(g)),
        argtuple=", ".join(_wrapper_names(g)) + ("," if len(g.params) == 1 else ""),
        wrt_text=", ".join(art.wrt),
        ret_note=" (a single value)" if single else " (a tuple in wrt order)",
        entry=new_entry,
        convert="\n" + CONVERT.format(fname=fname).strip("\n") + "\n",
    )
    # the wrappers convert with NumPy, and module-level arrays need math: imports kept in
    # isort order
    needed = ["import numpy as np"] + (["import math"] if art.module_arrays else [])
    body = with_imports(body, needed)
    source = body.rstrip("\n") + "\n" + wrappers
    wrt_arg = ",".join(art.wrt) + ("," if not single and len(art.wrt) == 1 else "")
    coarse, target = art.options.coarsen, art.options.target
    header = "\n".join([
        f"Gradient of {g.fn.__qualname__}, exported by coarsen {__version__}.",
        f"source: {display_path(g.fn)}:{g.src.node.lineno} ({g.fn.__module__}.{g.fn.__qualname__})",
        f"signature: ({sig_text(parsed)})",
        (f"wrt: {', '.join(art.wrt)} ({'a single value' if single else 'a tuple'} out); "
        f"{'coarse' if coarse else 'fine-grained'} AD; target {target}"),
        f"Defines value_and_grad_{fname}(...) and grad_{fname}(...); needs only math, numpy"
        + (" and numba." if target == "cpu" else "."),
        ("Regenerate instead of editing: python -m coarsen export "
        f"{g.fn.__module__}:{g.fn.__qualname__} --signature \"{sig_text(parsed)}\" "
        f"--wrt {wrt_arg}{' --fine' if not coarse else ''} --target {target} -o <file>"),
    ])
    try:
        return lowering.export_module(source, path, header=header)
    except lowering.LoweringError as exc:
        raise CoarsenError(f"export: {exc}") from None
