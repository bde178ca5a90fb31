"""Batched evaluation: a driver that runs a per-set gradient function over many argument sets.

In the spirit of ``jax.vmap``'s ``in_axes``: each parameter either carries a leading batch axis
(``batched=True``, like ``in_axes=0``) or is shared by every set (``batched=False``, like
``in_axes=None``).

Requires:
    * a function ``fn_name`` in the same module (the driver is appended to it) with the given
      parameters, returning ``(value, (g_1, ..., g_k))``: the scalar primal value and one
      gradient per name in ``wrt``, in that order; each gradient is a float scalar or a float
      array with that parameter's per-set shape;
    * ``params``: ``(name, type)`` pairs in call order, types in Numba notation for ONE set:
      ``"float64"``, ``"float32"``, ``"int64"``, ``"boolean"``, ``"float64[:]"``,
      ``"float64[:, ::1]"``...; a batched parameter of per-set type ``T[:]`` is passed to the
      driver as ``T[:, :]`` (a batched scalar ``T`` as ``T[:]``), with the batch axis first;
    * at least one batched parameter, all batched arguments with the same batch size (checked at
      run time, ``ValueError``), only float parameters in ``wrt``;
    * the per-set function must not write into its (shared) array arguments.

Guarantees: ``batch_source`` returns the source text of one driver function
``<driver_name>(same parameters)`` that returns ``(values, (G_1, ..., G_k))``:

    * ``values``: array ``(n_sets,)`` of ``value_type``;
    * ``G_j`` for a batched parameter: the per-set gradients, the argument's shape (batch axis
      first), in the parameter's float dtype;
    * ``G_j`` for a shared parameter: the gradient SUMMED over the batch, the parameter's shape
      (a scalar for a scalar parameter), in its dtype.

Target "cpu": ``@numba.njit(parallel=True, cache=True)`` with a ``numba.prange`` loop. Target
"python": the same code, plain Python, ``range`` instead of ``prange`` (for debugging).

Exceptions: an exception a set raises (an index out of range, say) reaches the caller.  Numba
drops one raised on a worker thread of a ``prange`` loop, skipping that thread's remaining
sets, so each set marks itself done and the sets left undone run again serially, in order,
after the parallel loop (adding to the same block partials: the sums are unchanged).

Reduction of shared gradients (race-free and deterministic): the sets are split into
``min(n_sets, 128)`` contiguous blocks ``[b*n//B, (b+1)*n//B)``; the parallel loop runs over blocks;
each block adds its sets' gradients in set order into its own zero-initialised partial (a scratch
array ``(B, *shape)``: memory ``B * |param|``, independent of ``n_sets``); the partials are then
added in block order, serially, starting from zero. The result does not depend on the number of
threads or on scheduling (bit-reproducible), and for ``n_sets <= 128`` it is bit-identical to a
sequential ``total = 0; for each set: total += g``. Per-thread partials were rejected because
their summation order depends on scheduling; per-set scratch because its memory grows with
``n_sets``. Without shared gradients the parallel loop runs over sets directly.

Shared with ``cuda.py``: ``parse_type(name, text)`` reads a parameter's Numba type text into
``(numpy dtype spelling, rank)``; ``FreshNames(taken).fresh(base)`` picks generated names that
avoid ``taken``.

Extension point (CUDA, not implemented): add an emitter to ``_EMITTERS`` that writes a kernel with
one thread per set (``numba.cuda.grid(1)``) calling a device-function version of ``fn_name``,
gradients of batched parameters written in place, shared gradients reduced by the same
blocked scheme (per-block partials in a preallocated workspace, then a second pass), plus a
host wrapper with the same signature and return value as the CPU driver.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import LoweringError
from .targets import check_target

__all__ = ["batch_source", "MAX_BLOCKS", "parse_type", "FreshNames"]

#: upper bound on the number of blocks (and partials) of the shared-gradient reduction
MAX_BLOCKS = 128

_FLOATS = {"float64": "np.float64", "float32": "np.float32", "f8": "np.float64", "f4": "np.float32"}
_SCALARS = {
    **_FLOATS,
    "int64": "np.int64",
    "int32": "np.int32",
    "int16": "np.int16",
    "int8": "np.int8",
    "uint64": "np.uint64",
    "uint32": "np.uint32",
    "uint16": "np.uint16",
    "uint8": "np.uint8",
    "intp": "np.intp",
    "boolean": "np.bool_",
    "bool_": "np.bool_",
    "bool": "np.bool_",
}
_TYPE_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(.*)\])?\s*")
_DIM_RE = re.compile(r"\s*:\s*(?::\s*1\s*)?")


@dataclass(frozen=True)
class _Param:
    name: str
    dtype: str  # numpy spelling, e.g. "np.float64"
    rank: int
    batched: bool
    text: str

    @property
    def is_float(self) -> bool:
        return self.dtype in ("np.float64", "np.float32")


def parse_type(name: str, text: str) -> tuple[str, int]:
    """``(numpy dtype spelling, rank)`` of a Numba type text (``"float64[:, :]"`` ->
    ``("np.float64", 2)``) for parameter ``name``; ``LoweringError`` when it cannot be read."""
    if not isinstance(text, str):
        raise LoweringError(f"batch: type of parameter {name!r} must be a str, got {text!r}")
    m = _TYPE_RE.fullmatch(text)
    if not m or m.group(1) not in _SCALARS:
        raise LoweringError(
            f"batch: cannot read the type {text!r} of parameter {name!r}; expected Numba "
            f"notation such as 'float64', 'int64' or 'float64[:, :]'"
        )
    rank = 0
    if m.group(2) is not None:
        dims = m.group(2).split(",")
        if not all(_DIM_RE.fullmatch(d) for d in dims):
            raise LoweringError(f"batch: cannot read the array dimensions of {text!r}")
        rank = len(dims)
    return _SCALARS[m.group(1)], rank


class FreshNames:
    """Names for generated code that avoid ``taken``: ``fresh(base)`` returns ``base``, or
    ``base`` with ``_`` appended until it is free, and reserves it."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


def batch_source(
    fn_name: str,
    params: Sequence[tuple[str, str]],
    batched: Sequence[bool],
    *,
    wrt: Sequence[str],
    value_type: str = "float64",
    target: str = "cpu",
    driver_name: str | None = None,
) -> str:
    """Source text of the batched driver of ``fn_name``; see the module docstring."""
    check_target(target)
    if target not in _EMITTERS:  # pragma: no cover - every target has an emitter today
        raise LoweringError(f"batch: no batched driver for target {target!r}")
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise LoweringError(f"batch: fn_name must be an identifier, got {fn_name!r}")
    driver_name = driver_name or f"{fn_name}_batch"
    if not driver_name.isidentifier() or driver_name == fn_name:
        raise LoweringError(f"batch: invalid driver name {driver_name!r}")
    params = list(params)
    batched = [bool(b) for b in batched]
    if len(batched) != len(params):
        raise LoweringError(
            f"batch: {len(params)} parameters but {len(batched)} entries in batched"
        )
    parsed: list[_Param] = []
    for (name, text), is_batched in zip(params, batched):
        if not isinstance(name, str) or not name.isidentifier():
            raise LoweringError(f"batch: invalid parameter name {name!r}")
        dtype, rank = parse_type(name, text)
        parsed.append(_Param(name, dtype, rank, is_batched, text.strip()))
    names = [p.name for p in parsed]
    if len(set(names)) != len(names):
        raise LoweringError(f"batch: duplicate parameter names in {names}")
    if fn_name in names or driver_name in names:
        raise LoweringError("batch: a parameter has the name of the function or of the driver")
    if not any(batched):
        raise LoweringError("batch: no parameter is batched; call the function directly")
    by_name = {p.name: p for p in parsed}
    wrt = list(wrt)
    if len(set(wrt)) != len(wrt):
        raise LoweringError(f"batch: duplicate names in wrt {wrt}")
    for w in wrt:
        if w not in by_name:
            raise LoweringError(f"batch: wrt names {w!r}, which is not a parameter")
        if not by_name[w].is_float:
            raise LoweringError(f"batch: parameter {w!r} of type {by_name[w].text} has no gradient")
    if value_type not in _FLOATS:
        raise LoweringError(f"batch: value_type must be float64 or float32, got {value_type!r}")
    return _EMITTERS[target](
        fn_name, driver_name, parsed, [by_name[w] for w in wrt], _FLOATS[value_type], target
    )


def _emit_host(
    fn_name: str,
    driver: str,
    params: list[_Param],
    wrt: list[_Param],
    value_dtype: str,
    target: str,
) -> str:
    """The CPU (Numba ``prange``) and plain-Python driver: the same text up to the loop."""
    names = FreshNames({p.name for p in params} | {fn_name, driver, "np", "numba", "math"})
    nsets = names.fresh("n_sets")
    values = names.fresh("values")
    i = names.fresh("i")
    res = names.fresh("res")
    grads = names.fresh("grads")
    outs = {p.name: names.fresh(f"{p.name}_bar") for p in wrt}
    shared = [p for p in wrt if not p.batched]
    parts = {p.name: names.fresh(f"{p.name}_bar_part") for p in shared}
    nblocks = names.fresh("n_blocks")
    blk = names.fresh("blk")
    lo = names.fresh("lo")
    hi = names.fresh("hi")
    done = names.fresh("done")
    prange = "numba.prange" if target == "cpu" else "range"

    batched = [p for p in params if p.batched]
    shared_names = [p.name for p in params if not p.batched]
    lines: list[str] = []
    if target == "cpu":
        lines.append("@numba.njit(parallel=True, cache=True)")
    lines.append(f"def {driver}({', '.join(p.name for p in params)}):")
    body: list[str] = [
        f"# Batched driver for {fn_name}: one call per argument set.",
        f"# Batched (leading set axis): {', '.join(p.name for p in batched)}.",
        f"# Shared by all sets: {', '.join(shared_names) if shared_names else '(none)'}.",
        f"# Returns ({values}[{nsets}], ({_tuple_text([outs[p.name] for p in wrt])})): "
        "gradients of batched parameters per set,",
        "# gradients of shared parameters summed over the sets.",
    ]
    if shared:
        body += [
            f"# Shared gradients: sets split into at most {MAX_BLOCKS} contiguous blocks, each "
            "block sums its",
            "# sets in order into its own partial, partials added in block order "
            "(race-free, deterministic).",
        ]
    first = batched[0].name
    body.append(f"{nsets} = {first}.shape[0]")
    for p in batched[1:]:
        body.append(f"if {p.name}.shape[0] != {nsets}:")
        body.append(
            f"    raise ValueError('{driver}: batched arguments {first} and {p.name} have "
            "different batch sizes')"
        )
    body.append(f"{values} = np.empty({nsets}, dtype={value_dtype})")
    body.append(f"{done} = np.zeros({nsets}, dtype=np.bool_)")
    for p in wrt:
        if p.batched:
            body.append(f"{outs[p.name]} = np.empty({p.name}.shape, dtype={p.dtype})")
    call_args = ", ".join(f"{p.name}[{i}]" if p.batched else p.name for p in params)

    def per_set(indent: str, block: str | None) -> list[str]:
        out = [
            f"{indent}{res} = {fn_name}({call_args})",
            f"{indent}{values}[{i}] = {res}[0]",
            f"{indent}{grads} = {res}[1]",
        ]
        for j, p in enumerate(wrt):
            if p.batched:
                out.append(f"{indent}{outs[p.name]}[{i}] = {grads}[{j}]")
            else:
                out.append(f"{indent}{parts[p.name]}[{block}] += {grads}[{j}]")
        out.append(f"{indent}{done}[{i}] = True")
        return out

    # Numba does not carry an exception raised on a worker thread out of a prange loop (the
    # thread's remaining sets are silently skipped): the sets left undone run again serially,
    # in order, so their exception (an IndexError, say) reaches the caller
    rerun = [f"for {i} in range({nsets}):", f"    if not {done}[{i}]:"]
    if shared:
        # the block of set i: the largest b with b * n_sets // n_blocks <= i
        rerun.append(f"        {blk} = (({i} + 1) * {nblocks} - 1) // {nsets}")
    rerun.extend(per_set("        ", blk if shared else None))

    if shared:
        body.append(f"{nblocks} = min({nsets}, {MAX_BLOCKS})")
        for p in shared:
            shape = f"({nblocks},) + {p.name}.shape" if p.rank else nblocks
            body.append(f"{parts[p.name]} = np.zeros({shape}, dtype={p.dtype})")
        body.append(f"for {blk} in {prange}({nblocks}):")
        body.append(f"    {lo} = {blk} * {nsets} // {nblocks}")
        body.append(f"    {hi} = ({blk} + 1) * {nsets} // {nblocks}")
        body.append(f"    for {i} in range({lo}, {hi}):")
        body.extend(per_set("        ", blk))
        body.extend(rerun)
        for p in shared:
            if p.rank:
                body.append(f"{outs[p.name]} = np.zeros({p.name}.shape, dtype={p.dtype})")
            else:
                body.append(f"{outs[p.name]} = {p.dtype}(0.0)")
        body.append(f"for {blk} in range({nblocks}):")
        for p in shared:
            body.append(f"    {outs[p.name]} += {parts[p.name]}[{blk}]")
    else:
        body.append(f"for {i} in {prange}({nsets}):")
        body.extend(per_set("    ", None))
        body.extend(rerun)
    body.append(f"return {values}, ({_tuple_text([outs[p.name] for p in wrt])})")
    lines.extend("    " + line for line in body)
    return "\n".join(lines) + "\n"


def _tuple_text(items: list[str]) -> str:
    """The inside of a tuple display: ``a, b`` or ``a,`` for one element."""
    return ", ".join(items) + ("," if len(items) == 1 else "")


#: target -> emitter; a CUDA emitter is the planned addition (see the module docstring).
_EMITTERS = {"cpu": _emit_host, "python": _emit_host}
