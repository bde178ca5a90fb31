"""Batched gradients over many argument sets, in the spirit of ``jax.vmap``'s ``in_axes``.

    bg = g.batch((0, None, 0))          # per parameter: 0 = leading batch axis, None = shared
    values, grads = bg(X, w, n)         # values: (B,); grads like g's (tuple, or single value)

Requires: a ``Gradient``; ``in_axes`` a tuple (or list) with one entry per parameter of the
user's function, each ``0`` or ``None`` (a bare ``0`` means every parameter is batched); at least
one batched parameter; batched arguments are arrays (or sequences) whose first axis is the batch
axis, all of the same length ``B >= 1``.

Guarantees: ``bg(*args)`` returns ``(values, grads)``:

* ``values``: float64 array ``(B,)``, ``values[b]`` the function's value on set ``b``;
* for a batched parameter, its gradient per set, shape ``(B, *per-set shape)``;
* for a shared parameter, the gradient SUMMED over the sets, the parameter's shape (a Python float
  for a scalar);
* in ``g``'s convention: a tuple in ``wrt`` order, or a single value when ``g`` was built with a
  single ``wrt``; float32 arguments are computed in float64 and their gradients returned in
  float32, like ``g``.

Per set, the numbers are those of ``g`` on that set (the same generated entry, specialized on the
per-set signature: ``B`` calls of ``g`` and one batched call agree bit for bit on the CPU).

Targets:

* ``"cpu"`` (default when ``g.target == "cpu"``): the specialization's module with a
  ``numba.prange`` driver appended (``coarsen.lowering.batch_source``), built once per per-set
  signature with ``coarsen.lowering.build`` (so Numba's on-disk cache serves later processes).
  Shared gradients are reduced in at most 128 contiguous blocks, then in block order:
  deterministic, independent of the thread count; see ``coarsen.lowering.batch``.
* ``"python"``: the same driver in plain Python (debugging).
* ``"cuda"``: scalar-only functions (every per-set parameter a scalar, no module-level arrays).
  The workspace variant of the gradient (``g.specialization(..., workspace=True)``: tapes passed in,
  no allocation) becomes a ``numba.cuda.jit(device=True)`` function; a kernel
  (``coarsen.lowering.cuda``, launched by ``coarsen.lowering.cuda_host``) runs one thread per
  set, each thread using its own slice of one preallocated global workspace; shared gradients are
  reduced per block in shared memory and added with one atomic add per block and parameter
  (``coarsen.lowering.cuda`` documents the kernel; their sum is reproducible to rounding only).

  Workspace size: before the launch, the CPU entry runs on a sample of the sets (the first
  ``TAPE_SAMPLE_FIRST`` and up to ``TAPE_SAMPLE_SPREAD`` more, evenly spaced over the batch) and
  reads their tape high-water marks (the entry's third return value); each thread gets
  ``ceil(SAFETY_FACTOR * max)`` floats and ints (at least 1). When the batch would need more
  than ``bg.max_workspace_bytes`` of workspace, it runs in several launches that reuse it.
  ``bg.tape_size = (floats, ints)`` fixes the per-thread sizes instead (a known bound; tests).

  Overflow policy (``bg.on_overflow``): a set whose tape does not fit sets its status flag and
  returns zeros (it is left out of the block sums). With ``"cpu"`` (the default) those sets are
  recomputed on the CPU path (the same gradient's CPU entry) and their results written in place
  and added to the shared sums, so the result is always complete and correct; ``bg.last_overflow``
  holds their indices (inspect it: many reruns mean the sample under-estimated the tape, raise
  ``bg.safety_factor``). With ``"raise"`` a ``CoarsenError`` names the count and the fix. The CPU
  rerun was chosen over raising because tape lengths that depend on the data (``while`` loops,
  per-set trip counts) are normal, and a rare long set should cost one CPU call, not the batch.

  Local stretch tapes (``bg.local_tape``, default ``"auto"``): the workspace variant is built
  with ``LOCAL_TAPE`` = (16 floats, 4 ints) of thread-local tape (``cuda.local.array`` in the
  kernel), and each loop outside every loop whose trips' tape is counted at compile time runs in
  stretches of the most trips that fit it, a checkpoint of its state on the global tape before
  each (``coarsen.ad.reverse.local_stretch``), when that lowers the global tape traffic (a
  checkpoint smaller than a stretch's tape); where no loop qualifies the plain variant is used.
  ``bg.local_tape = (floats, ints)`` sets the sizes, ``None`` turns it off. The workspace is then
  sized by the same sample run through a CPU build of the device code (``@numba.njit``,
  ``lowering.cuda.cpu_twin_source``). The gradient is the same (the trips' own code, rerun);
  ``bg.report(*args)`` says, per loop, what was chosen. 16 floats and 4 ints are 160 bytes a
  thread: the local tapes of every resident thread of an H200 (132 SMs, 2048 threads each)
  take about 43 MB, under its L2 cache; not measured on a GPU yet.

  ``bg.tape_layout``: "interleaved" (default: word k of every thread's tape side by side, so
  a warp's tape accesses coalesce) or "contiguous" (one block of words per thread).
  ``bg.threads_per_block`` (default 128; 32 under the simulator) is exposed for tuning.

  Device arrays: a batched argument may be a Numba device array or any object with
  ``__cuda_array_interface__`` (CuPy arrays, PyTorch CUDA tensors; viewed with
  ``cuda.as_cuda_array``, no copy), 1-D, C-contiguous and float64, int64 or bool (device arrays
  are never converted: float32 or int32 ones, non-contiguous or 2-D ones raise a
  ``CoarsenError`` that says what to pass); a shared argument may be a 0-d device array (its
  value is read back to the host). When ANY argument is a device array, the values and the
  gradients of batched parameters come back as new float64 Numba device arrays (they have
  ``__cuda_array_interface__``: ``cupy.asarray(v)``, ``torch.as_tensor(v, device="cuda")``);
  host (NumPy) batched inputs are then copied to the device. Otherwise NumPy in gives NumPy out,
  as for the CPU batch. Gradients of shared parameters are host values either way (Python
  floats: the sums are read back to the host once per call).

  Kept buffers: the workspace, the status array, the device copies of host inputs, the device
  outputs for host results and pinned (page-locked) host staging arrays are kept on the batch,
  one set per device (``bg.cuda_buffers()``), and reallocated only when a call needs more than
  they hold; ``bg.release()`` frees them. Results are always new arrays, never views of kept
  buffers, so a later call leaves earlier results alone; concurrent calls on one batch take
  turns. ``bg.pinned_staging = False`` copies from and to pageable NumPy arrays instead.

  ``bg.last_timings``: a dict with the seconds of the last call spent in ``"h2d"`` (staging
  and copying batched host inputs), ``"kernel"`` (all launches, the in-block reduction
  included), ``"reduction"`` (zeroing and reading back the shared sums and the overflow flag),
  ``"d2h"`` (copying results into NumPy arrays; 0 for device results without reruns),
  ``"host"`` (``"total"`` minus those four: checks, the tape sample, allocations, launch
  overhead, CPU reruns, result conversion), ``"tape_sample"`` (the CPU runs that size the
  tape) and ``"total"`` (the whole call), with the counts ``"launches"`` and ``"allocations"``
  (kept buffers allocated by the call); see ``coarsen.lowering.cuda_host``.
  Under ``NUMBA_ENABLE_CUDASIM=1`` the same code runs in Numba's CUDA simulator.
* ``"dask"`` (``g.batch(in_axes, target="dask", client=None, chunks=None, nchunks=None)``):
  contiguous chunks of the sets, each run by the ``"cpu"`` driver on a Dask worker; see
  ``coarsen.dask_batch``.  Other batch targets build on ``split``, ``cpu_program``, ``result``
  and ``convert_argument``.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import math
import time
from dataclasses import dataclass

import numpy as np

from ... import lowering
from ...errors import CoarsenError
from ...ir.nodes import Array, Scalar
from ...lowering import cuda_host

__all__ = ["SAFETY_FACTOR", "BatchedGradient", "batched_gradient"]

#: tape size per thread = ceil(SAFETY_FACTOR * largest high-water mark of the sampled sets)
SAFETY_FACTOR = 2.0
TAPE_SAMPLE_FIRST = 4
TAPE_SAMPLE_SPREAD = 12
#: default cap on the CUDA workspace of one launch (larger batches run in chunks)
MAX_WORKSPACE_BYTES = 1 << 30
#: CUDA: the thread-local stretch tapes, (floats, ints), of ``bg.local_tape = "auto"``
LOCAL_TAPE = (16, 4)

_BATCH_TARGETS = ("cpu", "python", "cuda")


def batched_gradient(g, in_axes, *, target=None, **options):
    """``g.batch(in_axes, target=...)``: see the module docstring; ``target="dask"`` (with
    ``client=``, ``chunks=``, ``nchunks=``) is ``coarsen.dask_batch``."""
    if target == "dask":
        from .dask import DaskBatchedGradient
        return DaskBatchedGradient(g, in_axes, **options)
    if options:
        raise CoarsenError(f"g.batch: {', '.join(sorted(options))} "
                           f"{'applies' if len(options) == 1 else 'apply'} to target='dask' only",
                           hint="pass target='dask', or drop the keyword")
    return BatchedGradient(g, in_axes, target=target)


def _numba_text(t):
    if isinstance(t, Scalar):
        return {"f64": "float64", "i64": "int64", "bool": "boolean"}[t.kind]
    dt = {"f64": "float64", "i64": "int64", "bool": "boolean"}[t.dtype]
    return f"{dt}[{', '.join(':' * t.ndim)}]"


def _convert(value):
    """Convert an argument the way ``Gradient`` converts one (floats to float64, ints to int64)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f" and value.dtype != np.float64:
            return value.astype(np.float64)
        if value.dtype.kind in "iu" and value.dtype != np.int64:
            return value.astype(np.int64)
        return value
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


#: ``_convert`` under a public name, for other batch targets (``coarsen.dask_batch``'s workers)
convert_argument = _convert


def import_numba_cuda():
    """``numba.cuda``, or a ``CoarsenError`` that names the failure and what to install.

    With numba-cuda (the NVIDIA-maintained CUDA target, which replaces Numba's built-in
    ``numba.cuda``), its NumPy support module is imported here too: numba-cuda imports it only
    at the first kernel compile, and numba-cuda 0.30.4, for one, fails there under NumPy 2.5
    (it registers ``np.row_stack``, which NumPy 2.5 removed).  The simulator compiles no kernel
    and does not need that module, so under ``NUMBA_ENABLE_CUDASIM=1`` it is not imported."""
    try:
        from numba import config
        cuda = importlib.import_module("numba.cuda")
        if not config.ENABLE_CUDASIM:
            try:
                importlib.import_module("numba.cuda.np.arrayobj")
            except ModuleNotFoundError as exc:  # Numba's built-in numba.cuda has no numba.cuda.np
                if not (exc.name or "").startswith("numba.cuda.np"):
                    raise
        return cuda
    except Exception as exc:  # any failure inside numba-cuda's import
        try:
            which = f"numba-cuda {importlib.metadata.version('numba-cuda')}"
        except importlib.metadata.PackageNotFoundError:
            import numba
            which = f"numba.cuda (built into numba {numba.__version__})"
        npv = np.__version__
        if isinstance(exc, AttributeError) and "numpy" in str(exc):
            hint = (f"{which} does not support NumPy {npv}: install numpy<2.5 "
                    f"(pip install 'numpy<2.5'; coarsen's [cuda] extra pins it), or a "
                    f"numba-cuda release that supports NumPy {npv}; or use target='cpu'")
        else:
            hint = ("install coarsen's [cuda] extra (pip install -e '.[cuda]' in coarsen's "
                    "folder): numba-cuda with a NumPy it supports; numba-cuda[cu12] or "
                    "numba-cuda[cu13] adds the CUDA libraries where the machine has no CUDA "
                    "toolkit; or use target='cpu'")
        raise CoarsenError(f"target='cuda': {which} failed to import with NumPy {npv}: "
                           f"{type(exc).__name__}: {exc}", hint=hint) from exc


_HOST_TYPES = (np.ndarray, np.generic, int, float, bool, list, tuple)


def _device_array(cuda, obj, name):
    """``obj`` as a Numba device array when it is one or exposes ``__cuda_array_interface__``
    (CuPy arrays, PyTorch CUDA tensors: a zero-copy view), else ``None``."""
    if cuda_host.is_device_array(cuda, obj):
        return obj
    try:
        obj.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception as exc:       # e.g. PyTorch: a tensor that requires grad
        raise CoarsenError(f"argument {name!r}: its __cuda_array_interface__ failed: {exc}",
                           hint="for a PyTorch tensor that requires grad, pass t.detach()") from None
    if not hasattr(cuda, "as_cuda_array"):
        raise CoarsenError(f"argument {name!r} is a {type(obj).__name__} device array, and Numba's "
                           "CUDA simulator takes only its own device arrays",
                           hint="under NUMBA_ENABLE_CUDASIM=1 pass numba.cuda.to_device(x) or a "
                                "NumPy array")
    try:
        return cuda.as_cuda_array(obj)
    except Exception as exc:
        raise CoarsenError(f"argument {name!r}: Numba cannot view this {type(obj).__name__} as a "
                           f"device array: {exc}",
                           hint="pass a C-contiguous float64 or int64 device array, or a NumPy "
                                "array") from None


def cuda_arguments(params, batched, args):
    """``(args, on_device)``: the arguments of a CUDA batch with device arrays checked, and the
    positions of the arguments that were device arrays.

    A batched device array (Numba's, or any object with ``__cuda_array_interface__``, viewed
    without a copy) must be 1-D, C-contiguous, float64, int64 or bool: device arrays are never
    converted (that would copy the whole batch on the device), so float32 or int32 ones raise a
    ``CoarsenError`` that says how to convert them. A shared device argument must be 0-d: its
    one value is copied to the host and treated like a host scalar."""
    cuda = None
    out = list(args)
    on_device = set()
    for k, (p, b) in enumerate(zip(params, batched)):
        a = args[k]
        if isinstance(a, _HOST_TYPES):
            continue
        if cuda is None:
            cuda = import_numba_cuda()
        d = _device_array(cuda, a, p)
        if d is None:
            continue
        on_device.add(k)
        shape, dtype = tuple(d.shape), np.dtype(d.dtype)
        if not b:
            if shape != ():
                raise CoarsenError(f"argument {p!r} is shared (in_axes None) and a device array of "
                                   f"shape {shape}; a shared argument of a CUDA batch is one scalar",
                                   hint="pass a Python number or a 0-d array, or batch it (in_axes 0)")
            if dtype.kind not in "fiub":
                raise CoarsenError(f"argument {p!r} is a device array of dtype {dtype}",
                                   hint="pass a float or integer scalar")
            out[k] = d.copy_to_host()[()]
            continue
        if len(shape) != 1:
            raise CoarsenError(f"argument {p!r} is batched and a device array of shape {shape}; CUDA "
                               "batches take functions of scalars, so a batched argument is 1-D "
                               "(one element per set)", hint="use target='cpu' for functions of arrays")
        try:
            want = cuda_host.kernel_dtype(dtype)
        except ValueError:
            want = None
        if want != dtype:
            conv = {"f": "float64", "i": "int64", "u": "int64"}.get(dtype.kind)
            raise CoarsenError(f"argument {p!r} is a {dtype} device array; CUDA batches read device "
                               "arrays as they are, in float64, int64 or bool, and do not convert "
                               "them (a copy of the whole batch)",
                               hint=(f"convert it on the device (CuPy: x.astype(cupy.{conv}); PyTorch: "
                                     f"x.to(torch.{conv})), or pass a NumPy array (converted on the "
                                     "host)") if conv else "pass a float or integer array")
        if shape[0] > 1 and not d.is_c_contiguous():
            raise CoarsenError(f"argument {p!r} is a non-contiguous device array (strides "
                               f"{tuple(d.strides)}); CUDA batches read batched device arrays "
                               "element by element in order and take C-contiguous ones only",
                               hint="make a contiguous copy on the device (cupy.ascontiguousarray(x), "
                                    "x.contiguous() in PyTorch), or pass a NumPy array")
        out[k] = d
    return out, on_device


def loop_notes(art):
    """``[(line, how)]``: how each loop outside every loop of an artifact was checkpointed
    (its plan's "loop checkpoint" entries)."""
    return [(e["lines"][0], e["how"]) for e in art.plan if e.get("kind") == "loop checkpoint"]


@dataclass(frozen=True)
class BatchReport:
    """What ``bg.report()`` says: the local tape sizes used (None: none), the loops' notes
    ``(line, how)``, the last call's workspace per set ``(floats, ints)``, and the text."""
    local_tape: object
    loops: tuple
    workspace: object
    text: str


class BatchedGradient:
    """A gradient evaluated over a batch of argument sets; see ``coarsen.batching``."""

    def __init__(self, g, in_axes, *, target=None):
        self.g = g
        n = len(g.params)
        if isinstance(in_axes, (int, np.integer)) and not isinstance(in_axes, bool):
            in_axes = (int(in_axes),) * n
        if not isinstance(in_axes, (tuple, list)):
            raise CoarsenError(f"in_axes must be a tuple with 0 or None per parameter, got {in_axes!r}")
        in_axes = tuple(in_axes)
        if len(in_axes) != n:
            raise CoarsenError(f"in_axes has {len(in_axes)} entries but {g.fn.__name__} has {n} "
                               f"parameters ({', '.join(g.params)})")
        for p, ax in zip(g.params, in_axes):
            if ax is not None and (isinstance(ax, bool) or ax != 0):
                raise CoarsenError(f"in_axes for {p!r} is {ax!r}; coarsen batches along a leading "
                                   "axis only (0) or shares the argument (None)",
                                   hint="move the batch axis first (np.moveaxis) and use 0")
        if all(ax is None for ax in in_axes):
            raise CoarsenError("in_axes batches no parameter; call the gradient directly")
        self.in_axes = in_axes
        self.batched = tuple(ax == 0 for ax in in_axes)
        if target is None:
            target = "cpu" if g.target == "cpu" else "python"
        if target not in _BATCH_TARGETS:
            raise CoarsenError(f"unknown batch target {target!r}",
                               hint=f"use one of {_BATCH_TARGETS + ('dask',)}")
        if target == "cpu" and g.target != "cpu":
            raise CoarsenError("a 'cpu' batch needs a gradient built with target='cpu'",
                               hint="use target='python' or differentiate(..., target='cpu')")
        self.target = target
        self.safety_factor = SAFETY_FACTOR
        self.max_workspace_bytes = MAX_WORKSPACE_BYTES
        self.on_overflow = "cpu"
        self.threads_per_block = None
        self.tape_size = None
        self.tape_layout = "interleaved"
        self.local_tape = "auto"
        self.last_overflow = np.zeros(0, dtype=np.int64)
        self.last_tape_size = None
        self.last_tape_sample = None     # CUDA: the sample's largest tape (floats, ints) a set
        self.last_timings = {}
        self.pinned_staging = True
        self._drivers = {}
        self._cuda_buffers = {}          # device id -> cuda_host.DeviceBuffers
        self._last_cuda = None           # (types, signature) of the last CUDA call
        self.__name__ = f"batched_{g.__name__}"

    def __repr__(self):
        return f"<coarsen batched gradient of {self.g.fn.__qualname__}, in_axes={self.in_axes}, " \
               f"target={self.target!r}>"

    # ------------------------------------------------------------------ arguments
    def _split(self, args):
        return self._split_args(args)[:4]

    def _split_args(self, args):
        """``_split``'s four values and whether any argument was a device array (CUDA only)."""
        g = self.g
        if len(args) != len(g.params):
            raise CoarsenError(f"{g.fn.__name__} takes {len(g.params)} arguments "
                               f"({', '.join(g.params)}), got {len(args)}")
        args = list(args)
        on_device = ()
        if self.target == "cuda":
            args, on_device = cuda_arguments(g.params, self.batched, args)
        size = None
        first = None
        for k, (p, b) in enumerate(zip(g.params, self.batched)):
            if not b:
                continue
            a = args[k]
            if k in on_device:
                pass
            elif not isinstance(a, np.ndarray):
                if isinstance(a, (list, tuple)):
                    a = np.asarray(a)
                    args[k] = a
                else:
                    raise CoarsenError(f"argument {p!r} is batched (in_axes 0) but is a "
                                       f"{type(a).__name__}, not an array",
                                       hint="pass an array whose first axis runs over the sets, "
                                            "or use None in in_axes for a shared argument")
            if a.ndim == 0:
                raise CoarsenError(f"argument {p!r} is batched (in_axes 0) but is a 0-d array")
            if size is None:
                size, first = a.shape[0], p
            elif a.shape[0] != size:
                raise CoarsenError(f"batched arguments {first!r} and {p!r} have different batch sizes "
                                   f"({size} and {a.shape[0]})")
        if size == 0:
            raise CoarsenError("the batch is empty (batch size 0)")
        examples = [(np.zeros(1, dtype=a.dtype)[0] if k in on_device else a[0]) if b else a
                    for k, (a, b) in enumerate(zip(args, self.batched))]
        types, sig = g.signature_of(examples)
        return args, size, types, sig, bool(on_device)

    def split(self, args):
        """``(args, size, types, sig)``: the checked arguments (sequences made arrays), the
        batch size and the per-set signature; for other batch targets (``coarsen.dask_batch``)."""
        return self._split(args)

    def result(self, args, wrt, values, grads):
        """``(values, grads)`` in ``g``'s convention from a driver's raw results; for other
        batch targets (``coarsen.dask_batch``)."""
        return self._result(args, wrt, values, grads)

    def _result(self, args, wrt, values, grads):
        g = self.g
        out = []
        for name, gr in zip(wrt, grads):
            k = g.params.index(name)
            a = args[k]
            if self.batched[k]:
                dt = a.dtype if a.dtype.kind == "f" else np.float64
                out.append(np.asarray(gr).astype(dt, copy=False))
            elif isinstance(a, np.ndarray):
                out.append(np.asarray(gr).astype(a.dtype, copy=False))
            else:
                out.append(float(gr))
        grads = out[0] if g.returns_single else tuple(out)
        return np.asarray(values, dtype=np.float64), grads

    # ------------------------------------------------------------------ CPU
    def cpu_program(self, types, sig):
        """``(artifact, source, name, driver)`` of the host driver for a per-set signature
        (``split``'s ``types, sig``): the module source, its ``lowering.build`` name and the
        driver's name in it; what another process needs to rebuild the driver
        (``coarsen.dask_batch`` ships it to its workers)."""
        g = self.g
        spec = g.specialization(types, sig)           # the Artifact (coarsen.artifact)
        entry = spec.entry_name
        n_user = len(g.params)
        ir_name = dict(zip(g.params, g.ir_params))
        params = [(p, _numba_text(t)) for p, t in zip(g.ir_params, types[:n_user])]
        params += [(f"_coarsen_module_array_{j}", _numba_text(t)) for j, t in enumerate(types[n_user:])]
        batched = list(self.batched) + [False] * (len(types) - n_user)
        driver = f"batch_value_and_grad_{g.fn.__name__}"
        try:
            text = lowering.batch_source(entry, params, batched, wrt=[ir_name[w] for w in spec.wrt],
                                         target=self.target,
                                         driver_name=driver)
        except lowering.LoweringError as exc:
            raise CoarsenError(f"batch: {exc}") from None
        # the driver allocates with NumPy, which a scalar gradient module may not import
        extra = "" if "\nimport numpy as np\n" in spec.source else "\nimport numpy as np\n"
        source = spec.source.rstrip("\n") + "\n" + extra + "\n\n" + text
        return spec, source, f"{g.fn.__name__}_batch", driver

    def _cpu_driver(self, types, sig):
        key = ("host", types, self.batched, self.target)
        hit = self._drivers.get(key)
        if hit is not None:
            return hit
        spec, source, name, driver = self.cpu_program(types, sig)
        try:
            mod = lowering.build(source, name=name, target=self.target)
        except lowering.LoweringError as exc:
            raise CoarsenError(f"batch: {exc}") from None
        hit = (spec, getattr(mod, driver), mod.__file__)
        self._drivers[key] = hit
        return hit

    def source_for(self, *args):
        """The generated source of the batched driver (and device code, for CUDA) for ``args``."""
        args, _size, types, sig = self._split(args)
        hit = self._cuda_driver(types, sig) if self.target == "cuda" else self._cpu_driver(types, sig)
        with open(hit[2], encoding="utf-8") as fh:
            return fh.read()

    def __call__(self, *args):
        if self.target == "cuda":
            t0 = time.perf_counter()
            args, size, types, sig, on_device = self._split_args(args)
            return self._call_cuda(args, size, types, sig, on_device, t0)
        args, size, types, sig = self._split(args)
        spec, driver, _ = self._cpu_driver(types, sig)
        if spec.written:
            # as g refuses them: a set's arrays that overlap, one written, would be treated as
            # separate arrays (a shared array that is a row of a batched one, for instance)
            self.g._check_aliasing(tuple(args), spec.written)
        conv = [_convert(a) for a in args] + [_convert(a) for a in spec.module_arrays]
        values, grads = driver(*conv)
        return self._result(args, spec.wrt, values, grads)

    # ------------------------------------------------------------------ CUDA
    def _cuda_driver(self, types, sig):
        g = self.g
        if g.module_arrays:
            raise CoarsenError(f"target='cuda' cannot batch {g.fn.__name__}: it reads module-level "
                               "arrays, and CUDA batches take scalar-only functions",
                               hint="pass the values as scalar parameters, or use target='cpu'")
        arrays = [p for p, t in zip(g.params, types) if isinstance(t, Array)]
        if arrays:
            raise CoarsenError(f"target='cuda' batches scalar-only functions; in one set, "
                               f"{', '.join(arrays)} {'is an array' if len(arrays) == 1 else 'are arrays'}",
                               hint="use target='cpu' (numba.prange) for functions of arrays")
        cuda = import_numba_cuda()
        from numba import config
        if not config.ENABLE_CUDASIM and not cuda.is_available():
            raise CoarsenError("target='cuda': no CUDA GPU is available",
                               hint="use target='cpu', or set NUMBA_ENABLE_CUDASIM=1 before "
                                    "importing numba to run the (slow) simulator")
        tpb = self._tpb()
        local = self._local_sizes()
        key = ("cuda", types, self.batched, tpb, self.tape_layout, local)
        hit = self._drivers.get(key)
        if hit is not None:
            return hit
        ws, notes = None, ()
        if local is not None:
            ws = g.specialization(types, sig, workspace=True, local_tape=local)
            notes = tuple(loop_notes(ws))
            if not any(how.startswith("in local stretches") for _, how in notes):
                ws, local = None, None      # no loop gains: the plain variant
        if ws is None:
            ws = g.specialization(types, sig, workspace=True)
        entry = ws.entry_name
        ir_name = dict(zip(g.params, g.ir_params))
        params = [(p, _numba_text(t)) for p, t in zip(g.ir_params, types)]
        kernel = f"kernel_value_and_grad_{g.fn.__name__}"
        try:
            text = lowering.cuda_batch_source(entry, params, list(self.batched), wrt=[ir_name[w] for w in ws.wrt],
                                              device_source=ws.source, threads_per_block=tpb,
                                              kernel_name=kernel, tape_layout=self.tape_layout,
                                              local_tape=local)
            # the module holds CUDA code: built as plain Python (numba.cuda compiles on launch)
            mod = lowering.build(text, name=f"{g.fn.__name__}_cuda", target="python")
            twin = None
            if local is not None:
                # the device code on the CPU, to size the workspace from a sample of the sets
                twin = lowering.build(lowering.cuda.cpu_twin_source(ws.source),
                                      name=f"{g.fn.__name__}_cuda_twin", target="cpu")
                twin = getattr(twin, entry)
        except lowering.LoweringError as exc:
            raise CoarsenError(f"batch: {exc}") from None
        hit = (ws, getattr(mod, kernel), mod.__file__, local, twin, notes)
        self._drivers[key] = hit
        return hit

    def _local_sizes(self):
        """``bg.local_tape`` as ``(floats, ints)``, or None (off)."""
        lt = self.local_tape
        if lt is None or lt is False:
            return None
        if isinstance(lt, str) and lt == "auto":
            return LOCAL_TAPE
        try:
            sizes = tuple(int(v) for v in lt)
        except (TypeError, ValueError):
            sizes = ()
        if len(sizes) != 2 or min(sizes) < 1 or any(isinstance(v, bool) for v in lt):
            raise CoarsenError(f"bg.local_tape must be 'auto', None or (floats, ints) > 0, got {lt!r}")
        return sizes

    def report(self, *args, file=None):
        """CUDA: prints and returns how the kernel tapes for ``args`` (default: the last call's
        signature): per loop outside every loop, in local stretches (``k``, the local and global
        entries) or why not; the local tape sizes; the last call's workspace per thread."""
        if self.target != "cuda":
            raise CoarsenError("bg.report() describes CUDA batches; use g.report() for the others")
        if args:
            _, _, types, sig, _ = self._split_args(args)
            self._last_cuda = (types, sig)
        if self._last_cuda is None:
            raise CoarsenError("call the batch once (or pass example arguments) first")
        _, _, _, local, _, notes = self._cuda_driver(*self._last_cuda)
        lines = [f"CUDA batch of {self.g.fn.__qualname__}: tapes in the global workspace "
                 f"({self.tape_layout})"]
        lines.append(f"  local stretch tapes: {local[0]} floats, {local[1]} ints a thread (cuda.local.array)"
                     if local is not None else
                     "  local stretch tapes: off (bg.local_tape = None)" if self._local_sizes() is None else
                     "  local stretch tapes: not used (no loop's global tape traffic would drop)")
        for line, how in notes:
            lines.append(f"  loop (line {line}): {how}")
        if self.last_tape_size is not None:
            lines.append(f"  workspace of the last call: {self.last_tape_size[0]} floats, "
                         f"{self.last_tape_size[1]} ints a set")
        text = "\n".join(lines)
        import sys
        print(text, file=file or sys.stdout)
        return BatchReport(local, notes, self.last_tape_size, text)

    def _tpb(self):
        if self.threads_per_block:
            return int(self.threads_per_block)
        from numba import config
        return 32 if config.ENABLE_CUDASIM else lowering.cuda.DEFAULT_THREADS_PER_BLOCK

    def _tape_size(self, cpu_entry, conv, size, buffers=None):
        idx = list(range(min(size, TAPE_SAMPLE_FIRST)))
        if size > TAPE_SAMPLE_FIRST:
            spread = np.linspace(0, size - 1, min(size, TAPE_SAMPLE_SPREAD)).astype(np.int64)
            idx += [int(i) for i in spread]
        nf = ni = 0
        for one in self._sample_args(conv, sorted(set(idx)), buffers):
            _, _, tape = cpu_entry(*one)
            nf, ni = max(nf, int(tape[0])), max(ni, int(tape[1]))
        self.last_tape_sample = (nf, ni)
        sf = float(self.safety_factor)
        return max(1, math.ceil(sf * nf)), max(1, math.ceil(sf * ni))

    @staticmethod
    def _twin_entry(twin, local):
        """The CPU twin of the device code as the sampler calls it: tapes passed in (grown
        until the set fits), its tape high-water marks returned."""
        lf, li = np.empty(local[0]), np.empty(local[1], np.int64)

        def run(*args):
            nf = ni = 256
            while True:
                status = np.zeros(1, np.int64)
                r = twin(*args, np.empty(nf), np.empty(ni, np.int64), status, lf, li)
                if not status[0]:
                    return r
                nf, ni = 4 * nf, 4 * ni
        return run

    def _sample_args(self, conv, idx, buffers=None):
        """The arguments of sets ``idx`` as host scalars, one list per set, converted like the
        kernel's inputs. A batched device array's elements come back in one gather
        (``cuda_host.gather_to_host``, with the batch's kept ``buffers``), not one synchronous
        copy each."""
        idx = np.asarray(idx, dtype=np.int64)
        cols = []
        for a, b in zip(conv, self.batched):
            if not b:
                cols.append(None)
            elif isinstance(a, np.ndarray):
                col = a[idx]
                cols.append(col.astype(cuda_host.kernel_dtype(col.dtype), copy=False).tolist())
            else:
                cols.append(cuda_host.gather_to_host(import_numba_cuda(), a, idx, buffers).tolist())
        return [[col[j] if b else a for a, b, col in zip(conv, self.batched, cols)]
                for j in range(idx.size)]

    def cuda_buffers(self):
        """The ``lowering.cuda_host.DeviceBuffers`` this CUDA batch keeps for the current
        device (workspace, status, outputs, pinned staging), or ``None`` before its first call
        there."""
        cuda = import_numba_cuda()
        return self._cuda_buffers.get(cuda_host.current_device_id(cuda))

    def release(self):
        """Free the device and pinned host buffers kept by a CUDA batch, on every device; the
        next call allocates them again. No-op for other targets and before any call."""
        for buf in list(self._cuda_buffers.values()):
            buf.release()
        self._cuda_buffers.clear()

    def _call_cuda(self, args, size, types, sig, on_device, t_start):
        g = self.g
        if self.on_overflow not in ("cpu", "raise"):
            raise CoarsenError(f"bg.on_overflow must be 'cpu' or 'raise', got {self.on_overflow!r}")
        ws, kernel, _, local, twin, _ = self._cuda_driver(types, sig)
        self._last_cuda = (types, sig)
        cpu = g.specialization(types, sig)
        conv = [a if b else _convert(a) for a, b in zip(args, self.batched)]
        cuda = import_numba_cuda()
        did = cuda_host.current_device_id(cuda)
        buffers = self._cuda_buffers.get(did)
        if buffers is None:
            buffers = self._cuda_buffers.setdefault(did, cuda_host.DeviceBuffers(cuda))
        t_sample = time.perf_counter()
        if self.tape_size is not None:
            self.last_tape_sample = None
            nf, ni = (max(1, int(v)) for v in self.tape_size)
        else:
            nf, ni = self._tape_size(cpu.entry if twin is None else self._twin_entry(twin, local),
                                     conv, size, buffers)
        t_sample = time.perf_counter() - t_sample
        self.last_tape_size = (nf, ni)
        per_set = 8 * (nf + ni)
        tpb = self._tpb()
        chunk = max(1, int(self.max_workspace_bytes) // per_set)
        if chunk >= tpb:
            chunk -= chunk % tpb
        wrt_batched = [self.batched[g.params.index(w)] for w in ws.wrt]
        timings = {}
        values, grads, bad = cuda_host.run_batch(
            cuda, kernel, conv, self.batched, wrt_batched, threads_per_block=tpb, n_f=nf, n_i=ni,
            max_sets_per_launch=chunk, buffers=buffers, device_out=on_device,
            pinned=self.pinned_staging, timings=timings)
        self.last_overflow = bad
        if bad.size:
            if self.on_overflow == "raise":
                self.last_timings = timings
                raise CoarsenError(f"target='cuda': the tape of {bad.size} of {size} sets did not fit the "
                                   f"workspace ({nf} floats, {ni} ints per thread)",
                                   hint="raise bg.safety_factor, or set bg.on_overflow = 'cpu' to "
                                        "recompute those sets on the CPU")
            for i, one in zip(bad, self._sample_args(conv, bad, buffers)):
                v, gr, _ = cpu.entry(*one)
                values[int(i)] = v
                for j, batched in enumerate(wrt_batched):
                    if batched:
                        grads[j][int(i)] = gr[j]
                    else:
                        grads[j] += gr[j]
        if on_device:
            out = values, (grads[0] if g.returns_single else tuple(grads))
        else:
            out = self._result(args, ws.wrt, values, grads)
        total = time.perf_counter() - t_start
        timings.update(tape_sample=t_sample, total=total,
                       host=max(0.0, total - sum(timings[k] for k in cuda_host.PHASES)))
        self.last_timings = timings
        return out
