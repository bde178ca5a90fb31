"""Export a JVP, a Jacobian or a Hessian as a standalone, reviewable Python module, as
``coarsen.transforms.export`` does for gradients.

Requires: a ``Jvp`` (``coarsen.jvp``), ``Jacobian`` (``coarsen.jacobian``) or ``Hessian``
(``coarsen.hessian``) and a signature in Numba notation (one type per parameter of the user's
function; default: the last call's), ``coarsen.transforms.export``'s pieces (signature parsing, the
argument conversion, literals of module-level arrays, renaming) and ``coarsen.transforms.sweeps`` (the
drivers).
Guarantees: ``export_jvp``, ``export_jacobian`` and ``export_hessian`` write ``path``
atomically (``coarsen.lowering.export_module``) and return it as a ``pathlib.Path``.  The file

* starts with a comment header (the source function, relative file and line, the signature,
  ``wrt``, the target, coarsen's version);
* contains the specialization's generated module unchanged except for the name of its entry
  (``_jvp_<f>_entry``, ``_hvp_<f>_entry``), with the sweep driver of ``coarsen.transforms.sweeps``
  appended where there is one (``_jacobian_fwd``, ``_hessian``), so Numba compiles the code
  that the in-process transform runs and the numbers are bit-identical to it;
* defines, in plain Python, ``jvp_<f>(params..., tangents)`` (``(value, tangent_out)``; a bare
  tangent for a single ``wrt``, else a tuple), ``jacobian_<f>(params...)`` (JAX's layout, as
  ``coarsen.jacobian``: computed in forward mode, one JVP sweep per input element, which is
  what ``coarsen.jacobian(fn, mode="forward")`` gives, bit for bit), and
  ``hessian_<f>(params...)`` and ``hvp_<f>(params..., v)`` (``coarsen.hessian``'s and
  ``coarsen.hvp``'s layouts);
* converts and checks each argument as an exported gradient does (kind and rank against the
  signature, ``TypeError`` otherwise), and each tangent or vector (its shape, ``ValueError``);
* imports only ``math``, ``numpy`` and ``numba`` (``math`` and ``numpy`` for
  ``target="python"``): it runs with coarsen absent.

Module-level arrays are embedded as literals, as for gradients.  A Jacobian or Hessian whose
``wrt`` parameters have no element raises ``ValueError`` at its call in the exported module
(there is no sweep to run).
"""
from __future__ import annotations

from .. import lowering
from .version import __version__
from ..errors import CoarsenError
from .export import (CONVERT, array_literal, entry_array, example_args, kind_of_dtype, parse_signature,
                     rename_identifier, sig_text, strip_leading_comments, with_imports)
from ..frontend.source import display_path
from .sweeps import forward_driver, hessian_driver, module_text

__all__ = ["export_hessian", "export_jacobian", "export_jvp"]

_COMMON = '''

# ---------------------------------------------------------------------------------------------
# The calling convention of coarsen's {what}, in plain Python (no coarsen needed).
# ---------------------------------------------------------------------------------------------

_PARAMS = {params!r}
# per parameter: kind of the exported type ('f' float, 'i' int, 'b' bool) and its rank
_KINDS = {kinds!r}
# positions of the differentiated parameters, in the order of wrt
_WRT = {wrt_pos!r}
_SINGLE = {single!r}
{globals_block}
{convert}

def _coarsen_args(_args):
    return tuple(_coarsen_convert(_PARAMS[_i], _KINDS[_i][0], _KINDS[_i][1], _args[_i])
                 for _i in range(len(_PARAMS)))


def _coarsen_directions(_args, _given, _what):
    """The tangents or vectors, one per wrt parameter, as the entry takes them."""
    _items = (_given,) if _SINGLE else tuple(_given)
    if len(_items) != len(_WRT):
        raise ValueError("{fname}: %d %s given for %d wrt parameter(s)"
                         % (len(_items), _what, len(_WRT)))
    _out = []
    for _j, _i in enumerate(_WRT):
        _x = np.asarray(_items[_j])
        if _x.shape != np.shape(_args[_i]):
            raise ValueError("{fname}: the %s for %r has shape %s, but %r has shape %s"
                             % (_what, _PARAMS[_i], _x.shape, _PARAMS[_i], np.shape(_args[_i])))
        _out.append(np.array(_x, dtype=np.float64) if _KINDS[_i][1] else float(_x))
    return _out


def _coarsen_blocks(_dense, _out_shapes, _in_shapes):
    """The blocks of a dense matrix, rows split by _out_shapes, columns by _in_shapes."""
    _rs, _cs = [0], [0]
    for _s in _out_shapes:
        _rs.append(_rs[-1] + int(np.prod(_s)))
    for _s in _in_shapes:
        _cs.append(_cs[-1] + int(np.prod(_s)))
    _rows = []
    for _p, _ps in enumerate(_out_shapes):
        _row = []
        for _q, _qs in enumerate(_in_shapes):
            _b = _dense[_rs[_p]:_rs[_p + 1], _cs[_q]:_cs[_q + 1]].reshape(tuple(_ps) + tuple(_qs))
            _row.append(float(_b[()]) if _b.ndim == 0 else _b)
        _rows.append(_row[0] if _SINGLE else tuple(_row))
    return _rows
'''

_JVP = '''

def jvp_{fname}({arglist}, {tan}):
    """Value of {qualname} and its directional derivative along tangents (one per wrt
    parameter: {wrt_text}; {tan_note}), as (value, tangent_out)."""
    _args = ({argtuple})
    _tans = _coarsen_directions(_args, {tan}, "tangent")
    return {entry}(*_coarsen_args(_args), *_MODULE_ARRAYS, *_tans)


__all__ = ["jvp_{fname}"]
'''

_JACOBIAN = '''
# a tuple result of this many floats (JAX's layout: one Jacobian per output), or None
_TUPLE = {k!r}


def jacobian_{fname}({arglist}):
    """The Jacobian of {qualname} with respect to {wrt_text} (out.shape + in.shape per wrt
    parameter; {ret_note}): forward mode, one JVP sweep per input element."""
    _args = ({argtuple})
    _in_shapes = [np.shape(_args[_i]) for _i in _WRT]
    if sum(int(np.prod(_s)) for _s in _in_shapes) == 0:
        raise ValueError("{fname}: the wrt parameters have no element")
    _dense, _oshape = _jacobian_fwd(*_coarsen_args(_args), *_MODULE_ARRAYS)
    if _TUPLE is not None:
        return tuple(_coarsen_blocks(_dense[_i:_i + 1], [()], _in_shapes)[0]
                     for _i in range(_TUPLE))
    return _coarsen_blocks(_dense, [tuple(int(_x) for _x in _oshape)], _in_shapes)[0]


__all__ = ["jacobian_{fname}"]
'''

_HESSIAN = '''

def hessian_{fname}({arglist}):
    """The Hessian of {qualname} with respect to {wrt_text} ({ret_note}): one reverse sweep
    of the Hessian-vector product per input element."""
    _args = ({argtuple})
    _shapes = [np.shape(_args[_i]) for _i in _WRT]
    if sum(int(np.prod(_s)) for _s in _shapes) == 0:
        raise ValueError("{fname}: the wrt parameters have no element")
    _dense = _hessian(*_coarsen_args(_args), *_MODULE_ARRAYS)
    _rows = _coarsen_blocks(_dense, _shapes, _shapes)
    return _rows[0] if _SINGLE else tuple(_rows)


def hvp_{fname}({arglist}, {vec}):
    """The Hessian of {qualname} times v (one vector per wrt parameter: {wrt_text}), shaped
    like the gradient; array results in the dtype of their argument."""
    _args = ({argtuple})
    _vs = _coarsen_directions(_args, {vec}, "vector")
    _r = {entry}(*_coarsen_args(_args), *_vs, *_MODULE_ARRAYS)
    _out = []
    for _j, _i in enumerate(_WRT):
        _a = _args[_i]
        _out.append(np.asarray(_r[1][_j]).astype(_a.dtype, copy=False)
                    if isinstance(_a, np.ndarray) else float(_r[1][_j]))
    return _out[0] if _SINGLE else tuple(_out)


__all__ = ["hessian_{fname}", "hvp_{fname}"]
'''


def _free(name, taken):
    """``name``, or ``name_``, ``name__``...: the first not in ``taken``."""
    while name in taken:
        name += "_"
    return name


def _signature(obj, signature, what):
    if signature is None:
        signature = obj.last_signature
        if signature is None:
            raise CoarsenError(f"export: no signature given and the {what} of "
                               f"{obj.fn.__name__} has not been called yet",
                               hint='pass signature="float64[:], int64" (Numba notation), '
                                    "or call it once first")
    return parse_signature(signature, len(obj.params))


def _globals(parsed, arrays):
    lines = [f"_SIGNATURE = {tuple(sig_text([t]) for t in parsed)!r}"]
    if arrays:
        lines.append("# module-level arrays read by the function: a snapshot taken at export "
                     "time")
        lits = [array_literal(entry_array(a)) for a in arrays]
        lines.append("_MODULE_ARRAYS = (\n" + "".join(
            "    " + lit.replace("\n", "\n    ") + ",\n" for lit in lits) + ")")
    else:
        lines.append("_MODULE_ARRAYS = ()")
    return "\n".join(lines)


def _write(obj, path, parsed, body, arrays, wrt, what, templates, fields, target, defines):
    """The module: ``body`` (generated code), the common wrappers and ``templates``."""
    fname = obj.fn.__name__
    single = obj.returns_single
    common = dict(params=tuple(obj.params),
                  kinds=tuple((kind_of_dtype(d), r) for d, r in parsed),
                  wrt_pos=tuple(obj.params.index(w) for w in wrt), single=single,
                  globals_block=_globals(parsed, arrays), fname=fname,
                  qualname=obj.fn.__qualname__,
                  # the IR's names never start with "_" nor shadow math, np or numba
                  arglist=", ".join(obj.ir_params),
                  argtuple=", ".join(obj.ir_params) + ("," if len(obj.ir_params) == 1 else ""),
                  wrt_text=", ".join(wrt), what=what)
    common["convert"] = "\n\n" + CONVERT.format(fname=fname).strip("\n") + "\n"
    text = _COMMON.format(**common) + "".join(t.format(**common, **fields) for t in templates)
    needed = ["import numpy as np"] + (["import math"] if arrays else [])
    source = with_imports(body, needed).rstrip("\n") + "\n" + text
    header = "\n".join([
        f"{what} of {obj.fn.__qualname__}, exported by coarsen {__version__}.",
        f"source: {display_path(obj.fn)}:{obj.src.node.lineno} "
        f"({obj.fn.__module__}.{obj.fn.__qualname__})",
        f"signature: ({sig_text(parsed)})",
        f"wrt: {', '.join(wrt)} ({'a single value' if single else 'a tuple'}); target {target}",
        f"Defines {defines}; needs only math, numpy" + (" and numba." if target == "cpu"
                                                         else "."),
        "Regenerate instead of editing: export it again from coarsen.",
    ])
    try:
        return lowering.export_module(source, path, header=header)
    except lowering.LoweringError as exc:
        raise CoarsenError(f"export: {exc}") from None


def export_jvp(j, path, signature=None):
    """Write the JVP ``j`` specialized on ``signature`` at ``path``; see the module
    docstring."""
    parsed = _signature(j, signature, "JVP")
    art = j.specialize(example_args(parsed))
    fname = j.fn.__name__
    entry = f"_jvp_{fname}_entry"
    body = rename_identifier(strip_leading_comments(art.source), art.entry_name, entry)
    note = "a bare value" if j.returns_single else "a tuple in wrt order"
    return _write(j, path, parsed, body, art.module_arrays, art.wrt, "JVP", [_JVP],
                  dict(entry=entry, tan_note=note, tan=_free("tangents", j.ir_params)),
                  art.options.target, f"jvp_{fname}(...)")


def export_jacobian(J, path, signature=None):
    """Write the Jacobian ``J`` specialized on ``signature`` at ``path`` (forward mode); see
    the module docstring."""
    if getattr(J, "simd", False):
        # its module imports coarsen's Lanes type: not standalone
        raise CoarsenError("export of a Jacobian in the SIMD form (simd=True) is not supported",
                           hint="export the Jacobian made without simd")
    parsed = _signature(J, signature, "Jacobian")
    prog, wrt = J.forward_program(example_args(parsed))
    fname = J.fn.__name__
    entry = f"_jvp_{fname}_entry"
    body = rename_identifier(strip_leading_comments(prog.source), prog.entry_name, entry)
    driver = forward_driver(entry, len(J.params), len(prog.module_arrays), prog.wrt_pos,
                            prog.ranks, prog.result_rank, J.target, prog.parallel, prog.lanes)
    body = module_text(body, driver)
    note = ("a tuple of one result per output" if J.k is not None else
            "a bare array for one wrt parameter, else a tuple")
    return _write(J, path, parsed, body, prog.module_arrays, wrt, "Jacobian", [_JACOBIAN],
                  dict(k=J.k, ret_note=note), J.target, f"jacobian_{fname}(...)")


def export_hessian(h, path, signature=None):
    """Write the Hessian ``h`` specialized on ``signature`` at ``path``; see the module
    docstring."""
    parsed = _signature(h, signature, "Hessian")
    prog = h.program(example_args(parsed))
    fname = h.fn.__name__
    art = prog.artifact
    entry = f"_hvp_{fname}_entry"
    body = rename_identifier(strip_leading_comments(art.source), art.entry_name, entry)
    driver = hessian_driver(entry, len(h.params), len(prog.module_arrays), prog.wrt_pos,
                            [parsed[k][1] for k in prog.wrt_pos], h.target, prog.parallel)
    body = module_text(body, driver)
    note = ("in.shape + in.shape" if h.returns_single else
            "JAX's nested tuple H[p][q], shaped p.shape + q.shape")
    return _write(h, path, parsed, body, prog.module_arrays, prog.wrt, "Hessian", [_HESSIAN],
                  dict(entry=entry, ret_note=note, vec=_free("v", h.ir_params)), h.target,
                  f"hessian_{fname}(...) and hvp_{fname}(...)")
