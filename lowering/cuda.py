"""CUDA batches: one GPU thread per argument set, tapes in one preallocated global workspace.

Requires:
    * ``device_source``: complete generated source whose function ``fn_name`` takes the
      parameters ``params`` followed by three workspace parameters ``_ftape`` (float64[:]),
      ``_itape`` (int64[:]) and ``_status`` (int64[1]), allocates nothing, and returns
      ``(value, (g_1, ..., g_k), (tape_floats, tape_ints))``; when a tape would overflow it sets
      ``_status[0] = 1`` and returns zeros. Its top-level functions carry no decorators (the
      client renders it for target "python"); every top-level function becomes a
      ``numba.cuda.jit(device=True)`` function, so it may use only what CUDA device code
      supports (scalar arithmetic, ``math``, tuples, array element access);
    * ``params``: ``(name, type)`` pairs of SCALAR Numba types for one set ("float64",
      "int64", "boolean"...); ``batched`` marks parameters that carry a batch axis (passed to the
      kernel as 1-D device arrays); ``wrt``: names of float parameters, in gradient order;
    * ``threads_per_block``: a power of two between 1 and 1024;
    * ``local_tape``: None, or ``(floats, ints)`` when the device function takes two more
      arrays after ``_status``, its local stretch tapes (``coarsen.ad.reverse.local_stretch``).

Guarantees: ``cuda_batch_source(...)`` returns module source text (import it with ``build``)
that adds to ``device_source``:

    * ``<kernel_name>``: a ``numba.cuda.jit`` kernel, one thread per set (``cuda.grid(1)``),
      with the arguments (the kernel ABI, which ``cuda_host.run_batch`` launches)::

          kernel(n_sets, *params, ftape, itape, n_f, n_i, status, values, *G_b, acc)

      ``params`` in order: a batched one a device array ``(n_sets,)``, a shared one the scalar;
      ``ftape``/``itape`` the workspace (float64 / int64, at least ``n_f * n_sets`` and
      ``n_i * n_sets`` words); ``status`` int64 ``(n_sets,)``; ``values`` and ``G_b`` (one per
      batched name of ``wrt``, in ``wrt`` order) float64 ``(n_sets,)`` outputs; ``acc`` float64
      ``(n_shared + 1,)``, zeroed by the caller: ``acc[j]`` receives the sum of the ``j``-th
      shared gradient (``wrt`` order) and ``acc[n_shared]`` is set to 1.0 when any set's tape
      overflowed (a plain store of the same value by every such thread).
      Thread ``i`` sets ``status[i] = 0``, calls the device function on set ``i`` with its own
      views of the workspace and ``status[i:i+1]`` (and, with ``local_tape``, two thread-local
      arrays of those sizes, ``cuda.local.array``: thread-private, not in the workspace), and
      writes the value and the gradients of
      batched parameters; a set whose tape overflowed (``status[i] != 0``) gets zeros and is
      left out of the sums. ``tape_layout="interleaved"`` (default) gives thread ``i`` the
      strided view ``ftape[i : n_f*n_sets : n_sets]``: at the same tape position the threads of
      a warp touch consecutive words, so tape traffic is coalesced; ``"contiguous"`` gives it
      ``ftape[i*n_f : (i+1)*n_f]`` (one cache line per thread and access: slower on GPUs, kept
      for comparison).
    * Shared-parameter gradients (parameters without a batch axis) are reduced in two levels:
      each thread writes its set's gradient (0 for idle threads and for sets whose status
      reports an overflow) into a ``(n_shared, threads_per_block)`` float64 array in shared
      memory; a tree reduction (halving strides, ``cuda.syncthreads`` between steps) sums the
      block's entries in a fixed order; thread 0 then does ONE ``cuda.atomic.add`` per shared
      parameter into ``acc``. Traffic to global memory and atomics are
      ``n_blocks * n_shared`` instead of ``n_sets * n_shared``. The order of the per-block
      atomic additions is decided by the hardware: shared gradients are reproducible to
      rounding, not bit for bit, from run to run (per-set outputs are deterministic).
    * Launched several times on consecutive chunks of the sets (views of the same arrays, the
      same workspace and ``acc``), the sums accumulate over the chunks.

The host side (device buffers kept across calls, pinned staging, device arrays in and out, the
chunked launches, timings) is ``cuda_host.run_batch``.

Under ``NUMBA_ENABLE_CUDASIM=1`` (read by Numba at import) the same source runs in Numba's CUDA
simulator: slowly, for tests.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from .batch import FreshNames, parse_type
from .errors import LoweringError

__all__ = ["cuda_batch_source", "add_device_decorators", "cpu_twin_source", "DEFAULT_THREADS_PER_BLOCK",
           "TAPE_LAYOUTS"]

DEFAULT_THREADS_PER_BLOCK = 128
TAPE_LAYOUTS = ("interleaved", "contiguous")

_DEVICE_DECORATOR = "@cuda.jit(device=True)"
_CPU_DECORATOR = "@numba.njit(cache=True, error_model='numpy')"


def cpu_twin_source(source: str) -> str:
    """The device source compiled for the CPU instead: ``@numba.njit`` above every top-level
    function (the host runs it on a few sets to size the workspace)."""
    return add_device_decorators(source, decorator=_CPU_DECORATOR)


def add_device_decorators(source: str, *, decorator: str = _DEVICE_DECORATOR) -> str:
    """``source`` with ``@cuda.jit(device=True)`` (or ``decorator``) above every top-level
    function and ``import numba`` / ``from numba import cuda`` after its last top-level import."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LoweringError(f"cuda: the device source does not parse: {exc}") from None
    lines = source.splitlines()
    before: dict[int, list[str]] = {}
    last_import = None
    first_def = None
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last_import = node.end_lineno or node.lineno
        elif isinstance(node, ast.FunctionDef):
            if node.decorator_list:
                raise LoweringError(
                    f"cuda: function {node.name!r} already has decorators; render the device "
                    "source for target 'python'"
                )
            if first_def is None:
                first_def = node.lineno - 1
            before.setdefault(node.lineno - 1, []).append(decorator)
        elif isinstance(node, (ast.AsyncFunctionDef, ast.ClassDef)):
            raise LoweringError(f"cuda: unsupported top-level statement {type(node).__name__}")
    # the imports go after the last top-level import (0-based: before the line that follows it)
    at = last_import if last_import is not None else (first_def or 0)
    imports = "import numba\nfrom numba import cuda"
    if not any(isinstance(n, ast.Import) and any(a.name == "numpy" for a in n.names) for n in tree.body):
        imports = "import numpy as np\n" + imports
    before.setdefault(at, []).insert(0, imports)
    out: list[str] = []
    for k, line in enumerate(lines):
        out.extend(before.get(k, ()))
        out.append(line)
    out.extend(before.get(len(lines), ()))
    return "\n".join(out) + "\n"


def cuda_batch_source(
    fn_name: str,
    params: Sequence[tuple[str, str]],
    batched: Sequence[bool],
    *,
    wrt: Sequence[str],
    device_source: str,
    threads_per_block: int = DEFAULT_THREADS_PER_BLOCK,
    kernel_name: str | None = None,
    tape_layout: str = "interleaved",
    local_tape: tuple[int, int] | None = None,
) -> str:
    """Source of the device functions and the kernel; see the module docstring."""
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise LoweringError(f"cuda: fn_name must be an identifier, got {fn_name!r}")
    tpb = threads_per_block
    if not isinstance(tpb, int) or tpb < 1 or tpb > 1024 or tpb & (tpb - 1):
        raise LoweringError(f"cuda: threads_per_block must be a power of two <= 1024, got {tpb!r}")
    if tape_layout not in TAPE_LAYOUTS:
        raise LoweringError(f"cuda: tape_layout must be one of {TAPE_LAYOUTS}, got {tape_layout!r}")
    if local_tape is not None:
        if len(local_tape) != 2 or any(not isinstance(v, int) or v < 1 for v in local_tape):
            raise LoweringError(f"cuda: local_tape must be two positive ints, got {local_tape!r}")
    kernel_name = kernel_name or f"{fn_name}_kernel"
    params = list(params)
    batched = [bool(b) for b in batched]
    if len(batched) != len(params):
        raise LoweringError(f"cuda: {len(params)} parameters but {len(batched)} entries in batched")
    if not any(batched):
        raise LoweringError("cuda: no parameter is batched")
    kinds = {}
    for name, text in params:
        if not isinstance(name, str) or not name.isidentifier():
            raise LoweringError(f"cuda: invalid parameter name {name!r}")
        dtype, rank = parse_type(name, text)
        if rank:
            raise LoweringError(
                f"cuda: parameter {name!r} has the array type {text!r}; CUDA batches take scalar "
                "parameters only (one set = one thread's scalars)"
            )
        kinds[name] = dtype
    names_list = [p for p, _ in params]
    if len(set(names_list)) != len(names_list):
        raise LoweringError(f"cuda: duplicate parameter names in {names_list}")
    wrt = list(wrt)
    for w in wrt:
        if w not in kinds:
            raise LoweringError(f"cuda: wrt names {w!r}, which is not a parameter")
        if kinds[w] not in ("np.float64", "np.float32"):
            raise LoweringError(f"cuda: parameter {w!r} is not a float; it has no gradient")
    reserved = set(names_list) | {fn_name, kernel_name, "np", "numba", "math", "cuda"}
    try:
        tree = ast.parse(device_source)
    except SyntaxError as exc:
        raise LoweringError(f"cuda: the device source does not parse: {exc}") from None
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    if fn_name not in top:
        raise LoweringError(f"cuda: the device source defines no function {fn_name!r}")
    if kernel_name in top:
        raise LoweringError("cuda: the kernel name is taken in the device source")
    nm = FreshNames(reserved | top)

    is_b = dict(zip(names_list, batched))
    shared_w = [w for w in wrt if not is_b[w]]
    batched_w = [w for w in wrt if is_b[w]]
    # kernel parameter names
    k_nsets = nm.fresh("n_sets")
    k_ft, k_it, k_nf, k_ni = nm.fresh("ftape"), nm.fresh("itape"), nm.fresh("n_f"), nm.fresh("n_i")
    k_status, k_values = nm.fresh("status"), nm.fresh("values")
    k_out = {w: nm.fresh(f"{w}_bar") for w in batched_w}
    k_acc = nm.fresh("acc")
    i, tid, part, res, grads, stride = (nm.fresh(s) for s in ("i", "tid", "part", "res", "grads",
                                                               "stride"))
    lft, lit = nm.fresh("lftape"), nm.fresh("litape")
    kparams = ([k_nsets] + names_list + [k_ft, k_it, k_nf, k_ni, k_status, k_values]
               + [k_out[w] for w in batched_w] + [k_acc])
    call = ", ".join(f"{p}[{i}]" if is_b[p] else p for p in names_list)
    if tape_layout == "interleaved":
        ft_slice = f"{k_ft}[{i}:{k_nf} * {k_nsets}:{k_nsets}]"
        it_slice = f"{k_it}[{i}:{k_ni} * {k_nsets}:{k_nsets}]"
        layout_note = (f"    # Tapes interleaved: word k of set {i}'s tape is {k_ft}[k * {k_nsets} + {i}], so the "
                       "threads of a warp touch consecutive words (coalesced).")
    else:
        ft_slice = f"{k_ft}[{i} * {k_nf}:({i} + 1) * {k_nf}]"
        it_slice = f"{k_it}[{i} * {k_ni}:({i} + 1) * {k_ni}]"
        layout_note = f"    # Tapes contiguous per set: set {i} owns {k_ft}[{i} * {k_nf}:({i} + 1) * {k_nf}]."
    K: list[str] = [
        "",
        "",
        "@cuda.jit",
        f"def {kernel_name}({', '.join(kparams)}):",
        f"    # One thread per argument set; set {i} uses its own slice of the global workspace.",
        layout_note,
        f"    {i} = cuda.grid(1)",
    ]
    if shared_w:
        K += [
            f"    {tid} = cuda.threadIdx.x",
            "    # shared-parameter gradients: one row per parameter, one column per thread",
            f"    {part} = cuda.shared.array(({len(shared_w)}, {tpb}), numba.float64)",
        ]
        K += [f"    {part}[{j}, {tid}] = 0.0" for j in range(len(shared_w))]
    local_args = ""
    K += [f"    if {i} < {k_nsets}:", f"        {k_status}[{i}] = 0"]
    if local_tape is not None:
        K += [
            "        # the loops' stretch tapes: thread-private local memory, not the workspace",
            f"        {lft} = cuda.local.array({local_tape[0]}, numba.float64)",
            f"        {lit} = cuda.local.array({local_tape[1]}, numba.int64)",
        ]
        local_args = f", {lft}, {lit}"
    K += [
        f"        {res} = {fn_name}({call}, {ft_slice}, {it_slice}, {k_status}[{i}:{i} + 1]{local_args})",
        f"        if {k_status}[{i}] == 0:",
        f"            {k_values}[{i}] = {res}[0]",
        f"            {grads} = {res}[1]",
    ]
    for j, w in enumerate(wrt):
        if is_b[w]:
            K.append(f"            {k_out[w]}[{i}] = {grads}[{j}]")
        else:
            K.append(f"            {part}[{shared_w.index(w)}, {tid}] = {grads}[{j}]")
    K += [
        "        else:",
        "            # the tape did not fit: zeros, left out of the sums; raise the overflow flag",
        f"            {k_values}[{i}] = 0.0",
    ]
    K += [f"            {k_out[w]}[{i}] = 0.0" for w in batched_w]
    K.append(f"            {k_acc}[{len(shared_w)}] = 1.0")
    if shared_w:
        K += [
            "    # block reduction in shared memory (fixed order), then one atomic add per parameter",
            "    cuda.syncthreads()",
            f"    {stride} = {tpb // 2}",
            f"    while {stride} > 0:",
            f"        if {tid} < {stride}:",
        ]
        K += [f"            {part}[{j}, {tid}] += {part}[{j}, {tid} + {stride}]"
              for j in range(len(shared_w))]
        K += [
            "        cuda.syncthreads()",
            f"        {stride} //= 2",
            f"    if {tid} == 0:",
        ]
        K += [f"        cuda.atomic.add({k_acc}, {j}, {part}[{j}, 0])" for j in range(len(shared_w))]

    src = add_device_decorators(device_source)
    return src.rstrip("\n") + "\n" + "\n".join(K) + "\n"
