"""Compiled sweep drivers: one generated function that runs every sweep of a Jacobian or a
Hessian (one per unit direction) inside the same compiled code, so that the per-call overhead
of Python (argument checks, conversions, the dispatch into Numba, the results' boxing) is paid
once per Jacobian or Hessian, not once per column or row.

Requires: the source of a generated module (a ``JvpArtifact``'s or an ``Artifact``'s: an
entry in coarsen's calling convention, ``jvp_<f>(args..., module arrays..., tangents...) ->
(value, tangent)`` or ``value_and_grad_<f>(args..., module arrays...) -> (value, grads,
tape)``), the entry's name, the number of parameters and module-level arrays, and per
direction parameter its rank (0: a float).
Guarantees:

* ``forward_driver(...)``, ``rows_driver(...)`` and ``hessian_driver(...)`` return the text
  of one function (``@numba.njit(cache=True, error_model="numpy")`` on the cpu target, plain
  Python on the python target) that calls the entry once per unit direction, in the order of
  the parameters and, within an array, of its C-order elements, and fills a dense float64
  matrix: the forward driver ``_jacobian_fwd(args...) -> (J, out shape)`` with one column per
  input element (``J[:, col]`` the raveled tangent of the result), the rows driver
  ``_jacobian_rev(args..., seed) -> J`` with one row per element of ``seed`` (a zero array
  shaped like the result: the unit seed of each row is written into a copy of it), the
  Hessian driver ``_hessian(args...) -> H`` with one column per input element (``H[:, col]``
  the raveled gradient of the Hessian-vector product along the unit direction).  The forward
  driver over a vector JVP (``lanes=K``) sets K unit directions per call, in blocks of K
  columns; each lane's column is the single-direction JVP's, bit for bit.  With
  ``parallel=True`` the columns (rows) run in a ``numba.prange`` loop, each with its own
  direction buffers (the forward driver's first column first, to learn the result's size):
  the same numbers, bit for bit, whatever the thread count.
* Each column or row is what one call of the entry with that unit direction gives, bit for
  bit: the drivers only call the entry and copy its results.
* ``driver_module(source, driver, name, target)`` builds the generated module with the driver
  appended (``coarsen.lowering.build``; ``import numpy as np`` added where missing) and
  returns ``DriverModule`` (its source, the module, the entry and the driver).  Deterministic:
  the same inputs give the same text, hence the same cache file.
Nothing here checks arguments: the callers (``coarsen.transforms.jacobian``,
``coarsen.transforms.hessian``, the exported modules) convert and check them first.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import lowering

__all__ = ["DriverModule", "driver_module", "forward_driver", "hessian_driver",
           "rows_driver"]

DECORATOR = '@numba.njit(cache=True, error_model="numpy")'
PARALLEL_DECORATOR = '@numba.njit(cache=True, error_model="numpy", parallel=True)'


@dataclass(frozen=True)
class DriverModule:
    """A generated module with a sweep driver appended."""
    source: str
    module: object
    entry: object           # the generated entry (JVP or gradient)
    driver: object          # the driver function


def _head(name, params, target, doc, parallel=False):
    lines = [PARALLEL_DECORATOR if parallel else DECORATOR] if target == "cpu" else []
    lines += [f"def {name}({', '.join(params)}):", f'    """{doc}"""']
    return lines


def _directions(ranks, args, lanes=0):
    """Lines that set up the unit-direction buffers: ``_flat<q>`` (the raveled direction of
    array parameter ``q``, a view of ``_dir<q>``) or the float ``_dir<q>``; and the sizes.
    With ``lanes``, the packed directions of a vector JVP: ``_dir<q>`` of shape
    ``(lanes,) + shape`` (``(lanes,)`` for a float), ``_flat<q>`` its raveled view."""
    lines = []
    for q, (rank, a) in enumerate(zip(ranks, args)):
        if lanes:
            shape = f"({lanes},) + {a}.shape" if rank else f"({lanes},)"
            lines += [f"    _n{q} = {a}.size" if rank else f"    _n{q} = 1",
                      f"    _flat{q} = np.zeros({lanes} * _n{q})",
                      f"    _dir{q} = _flat{q}.reshape({shape})"]
        elif rank:
            lines += [f"    _n{q} = {a}.size",
                      f"    _flat{q} = np.zeros(_n{q})",
                      f"    _dir{q} = _flat{q}.reshape({a}.shape)"]
        else:
            lines += [f"    _n{q} = 1", f"    _dir{q} = 0.0"]
    total = " + ".join(f"_n{q}" for q in range(len(ranks)))
    lines.append(f"    _total = {total}")
    return lines


def _sweep_loop(q, rank, call, use):
    """The loop over the unit directions of parameter ``q``: ``call`` runs the entry into
    ``_r``, ``use`` (lines, indented for the loop body) stores what it gave."""
    if rank:
        lines = [f"    for _e in range(_n{q}):",
                 f"        _flat{q}[_e] = 1.0",
                 f"        _r = {call}",
                 f"        _flat{q}[_e] = 0.0"]
    else:
        lines = ["    for _e in range(1):",
                 f"        _dir{q} = 1.0",
                 f"        _r = {call}",
                 f"        _dir{q} = 0.0"]
    return lines + [f"        {u}" for u in use] + ["        _col += 1"]


def _sizes(ranks, args):
    lines = [f"    _n{q} = {a}.size" if rank else f"    _n{q} = 1"
             for q, (rank, a) in enumerate(zip(ranks, args))]
    return lines + ["    _total = " + " + ".join(f"_n{q}" for q in range(len(ranks)))]


def _column_body(ranks, args, call, use):
    """The lines of column ``_c``: its own unit-direction buffers, the call, ``use``."""
    body = []
    for q, (rank, a) in enumerate(zip(ranks, args)):
        if rank:
            body += [f"_flat{q} = np.zeros(_n{q})", f"_dir{q} = _flat{q}.reshape({a}.shape)"]
        else:
            body.append(f"_dir{q} = 0.0")
    body += _select(ranks, lambda q, rank, at: f"_flat{q}[{at}] = 1.0" if rank
                    else f"_dir{q} = 1.0")
    return body + ["_col = _c", f"_r = {call}"] + list(use)


def _select(ranks, assign):
    """The ``if``/``elif`` chain that picks column ``_c``'s parameter ``q`` and the element
    ``at`` within it, each branch the line ``assign(q, rank, at)``."""
    lines, start = [], "0"
    for q, rank in enumerate(ranks):
        stop = f"{start} + _n{q}" if start != "0" else f"_n{q}"
        at = "_c" if start == "0" else f"_c - ({start})"
        lines += [f"{'if' if q == 0 else 'elif'} _c < {stop}:", f"    {assign(q, rank, at)}"]
        start = stop
    return lines


def _parallel_loop(ranks, args, call, use, target, first=0):
    """The loop over every column ``_c`` (from ``first``) with its own unit-direction buffers
    (``numba.prange`` on the cpu target): the columns are independent, each computed as in
    the serial loop."""
    loop = "numba.prange" if target == "cpu" else "range"
    head = f"    for _c in {loop}({first}, _total):" if first else \
        f"    for _c in {loop}(_total):"
    return [head] + [f"        {b}" for b in _column_body(ranks, args, call, use)]


def _result_store(result_rank, first, result, col):
    """The lines that set up ``_J`` and ``_oshape`` (an array result's size comes from the
    first column, where ``first`` holds), and those that store ``result`` as column ``col``."""
    if result_rank:
        empty = "(" + ", ".join(["0"] * result_rank) + ("," if result_rank == 1 else "") + ")"
        return (["    _J = np.empty((0, 0))", f"    _oshape = {empty}"],
                [f"if {first}:", f"    _oshape = {result}.shape",
                 f"    _J = np.empty(({result}.size, _total))",
                 f"_J[:, {col}] = np.ravel({result})"])
    return ["    _J = np.empty((1, _total))", "    _oshape = ()"], [f"_J[0, {col}] = {result}"]


def _lane_driver(entry, args, wrt_args, ranks, result_rank, lanes, target):
    """The forward driver over a vector JVP of ``lanes`` directions: blocks of ``lanes``
    columns per call, the unit directions of a block in the packed buffers ``_dir<q>`` (lanes
    past the last column stay zero and their results are dropped)."""
    dirs = [f"_dir{q}" for q in range(len(ranks))]
    call = f"{entry}({', '.join(args + dirs)})"
    lines = _head("_jacobian_fwd", args, target,
                  f"The dense Jacobian, one vector JVP sweep per {lanes} input elements, and "
                  "the result's shape.")
    lines += _directions(ranks, wrt_args, lanes)

    def unit(value):
        chain = _select(ranks, lambda q, rank, at: f"_flat{q}[_l * _n{q} + {at}] = {value}")
        return [f"        for _l in range({lanes}):",
                "            _c = _b + _l",
                "            if _c >= _total:",
                "                break"] + [f"            {ln}" for ln in chain]
    head, store = _result_store(result_rank, "_b == 0 and _l == 0", "_r[1][_l]", "_c")
    lines += head
    lines += [f"    for _b in range(0, _total, {lanes}):"] + unit("1.0") + \
        [f"        _r = {call}"] + unit("0.0") + \
        [f"        for _l in range(min({lanes}, _total - _b)):", "            _c = _b + _l"] + \
        [f"            {u}" for u in store]
    lines.append("    return _J, _oshape")
    return "\n".join(lines) + "\n"


def forward_driver(entry, n_params, n_arrays, wrt_pos, ranks, result_rank, target,
                   parallel=False, lanes=0):
    """``_jacobian_fwd(args..., module arrays...) -> (J, out shape)``: one JVP per input
    element (see the module docstring).  ``wrt_pos``: the differentiated parameters'
    positions; ``ranks``: their ranks; ``result_rank``: the result's (0: a float).
    ``parallel``: the first column, then the others in a ``numba.prange`` loop.  ``lanes``:
    the entry is a vector JVP of that many directions (``coarsen.jvp(..., directions=K)``),
    called once per block of ``lanes`` columns (serial only)."""
    args = [f"_p{i}" for i in range(n_params)] + [f"_m{i}" for i in range(n_arrays)]
    if lanes:
        if parallel:
            raise ValueError("internal: a parallel forward driver takes a single-direction JVP")
        return _lane_driver(entry, args, [args[p] for p in wrt_pos], ranks, result_rank,
                            lanes, target)
    dirs = [f"_dir{q}" for q in range(len(ranks))]
    call = f"{entry}({', '.join(args + dirs)})"
    lines = _head("_jacobian_fwd", args, target,
                  "The dense Jacobian, one JVP sweep per input element, and the result's shape.",
                  parallel)
    if parallel:
        lines += _sizes(ranks, [args[p] for p in wrt_pos])
        store = "_J[:, _col] = np.ravel(_r[1])" if result_rank else "_J[0, _col] = _r[1]"
        lines += ["    _c = 0"] + [f"    {b}" for b in
                                  _column_body(ranks, [args[p] for p in wrt_pos], call, [])]
        lines += ["    _oshape = _r[1].shape" if result_rank else "    _oshape = ()",
                          "    _J = np.empty((" + ("_r[1].size" if result_rank else "1")
                          + ", _total))", "    _col = 0", f"    {store}"]
        lines += _parallel_loop(ranks, [args[p] for p in wrt_pos], call, [store], target, 1)
        lines.append("    return _J, _oshape")
        return "\n".join(lines) + "\n"
    lines += _directions(ranks, [args[p] for p in wrt_pos])
    head, use = _result_store(result_rank, "_col == 0", "_r[1]", "_col")
    lines += head
    lines.append("    _col = 0")
    for q, rank in enumerate(ranks):
        lines += _sweep_loop(q, rank, call, use)
    lines.append("    return _J, _oshape")
    return "\n".join(lines) + "\n"


def _store_gradients(ranks, target_row):
    """Lines that copy the gradients ``_r[1]`` into row or column ``_col`` of ``_J``."""
    use, start = [], "0"
    for q, rank in enumerate(ranks):
        stop = f"{start} + _n{q}" if start != "0" else f"_n{q}"
        if rank:
            region = f"_J[_col, {start}:{stop}]" if target_row else f"_J[{start}:{stop}, _col]"
            use.append(f"{region} = np.ravel(_r[1][{q}])")
        else:
            region = f"_J[_col, {start}]" if target_row else f"_J[{start}, _col]"
            use.append(f"{region} = _r[1][{q}]")
        start = stop
    return use


def rows_driver(entry, n_params, n_arrays, wrt_pos, ranks, target, parallel=False):
    """``_jacobian_rev(args..., seed, module arrays...) -> J``: one gradient sweep of the
    row wrapper ``sum(f(args) * seed)`` per element of ``seed`` (see the module docstring);
    the wrapper's parameters are the function's, then the seed."""
    args = [f"_p{i}" for i in range(n_params)]
    arrays = [f"_m{i}" for i in range(n_arrays)]
    lines = _head("_jacobian_rev", args + ["_seed"] + arrays, target,
                  "The dense Jacobian, one gradient sweep per output element.", parallel)
    if parallel:
        loop = "numba.prange" if target == "cpu" else "range"
        lines += _sizes(ranks, [args[p] for p in wrt_pos])
        lines += ["    _J = np.empty((_seed.size, _total))",
                  f"    for _c in {loop}(_seed.size):",
                  "        _sflat = np.zeros(_seed.size)",
                  "        _s = _sflat.reshape(_seed.shape)",
                  "        _sflat[_c] = 1.0",
                  "        _col = _c",
                  f"        _r = {entry}({', '.join(args + ['_s'] + arrays)})"]
        lines += [f"        {u}" for u in _store_gradients(ranks, True)]
        return "\n".join(lines + ["    return _J"]) + "\n"
    for q, (rank, p) in enumerate(zip(ranks, wrt_pos)):
        lines.append(f"    _n{q} = {args[p]}.size" if rank else f"    _n{q} = 1")
    lines += ["    _total = " + " + ".join(f"_n{q}" for q in range(len(ranks))),
              "    _sflat = np.zeros(_seed.size)",
              "    _s = _sflat.reshape(_seed.shape)",
              "    _J = np.empty((_seed.size, _total))",
              "    _col = 0",
              "    for _e in range(_seed.size):",
              "        _sflat[_e] = 1.0",
              f"        _r = {entry}({', '.join(args + ['_s'] + arrays)})",
              "        _sflat[_e] = 0.0"]
    lines += [f"        {u}" for u in _store_gradients(ranks, True)]
    lines += ["        _col += 1", "    return _J"]
    return "\n".join(lines) + "\n"


def hessian_driver(entry, n_params, n_arrays, wrt_pos, ranks, target, parallel=False):
    """``_hessian(args..., module arrays...) -> H``: one reverse sweep of the Hessian-vector
    product wrapper ``_hvp_<f>(args..., v...)`` per input element (see the module
    docstring); the gradient's entry takes the function's parameters, the vectors, then the
    module-level arrays."""
    args = [f"_p{i}" for i in range(n_params)]
    arrays = [f"_m{i}" for i in range(n_arrays)]
    dirs = [f"_dir{q}" for q in range(len(ranks))]
    call = f"{entry}({', '.join(args + dirs + arrays)})"
    lines = _head("_hessian", args + arrays, target,
                  "The dense Hessian, one Hessian-vector product per input element.", parallel)
    if parallel:
        lines += _sizes(ranks, [args[p] for p in wrt_pos])
        lines.append("    _J = np.empty((_total, _total))")
        lines += _parallel_loop(ranks, [args[p] for p in wrt_pos], call,
                                _store_gradients(ranks, False), target)
        return "\n".join(lines + ["    return _J"]) + "\n"
    lines += _directions(ranks, [args[p] for p in wrt_pos])
    lines += ["    _J = np.empty((_total, _total))", "    _col = 0"]
    use = _store_gradients(ranks, False)
    for q, rank in enumerate(ranks):
        lines += _sweep_loop(q, rank, call, use)
    lines.append("    return _J")
    return "\n".join(lines) + "\n"


def module_text(source, driver):
    """The generated module's text with the driver appended (``import numpy as np`` after
    the last leading import where the module has none)."""
    lines = source.rstrip("\n").split("\n")
    if "import numpy as np" not in lines:
        last = max((i for i, ln in enumerate(lines[:50]) if ln.startswith("import ")),
                   default=-1)
        lines.insert(last + 1, "import numpy as np")
    return "\n".join(lines) + "\n\n\n" + driver


def driver_module(source, entry_name, driver, driver_name, name, target):
    """The built module of ``source`` with ``driver`` appended; see the module docstring."""
    text = module_text(source, driver)
    mod = lowering.build(text, name=name, target=target)
    return DriverModule(text, mod, getattr(mod, entry_name), getattr(mod, driver_name))

