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

Targets (this module is the host batch, ``BatchedGradient``; ``coarsen.transforms.batching``
chooses the backend):

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
  ``coarsen.transforms.batching.dask``.  Other batch targets build on ``split``, ``cpu_program``, ``result``
  and ``convert_argument``.
"""
from __future__ import annotations


import numpy as np

from ... import lowering
from ...errors import CoarsenError
from ...ir.nodes import Scalar
from ..arguments import convert_argument, converted

__all__ = ["SAFETY_FACTOR", "TARGETS", "BatchedGradient", "numba_text"]

#: tape size per thread = ceil(SAFETY_FACTOR * largest high-water mark of the sampled sets)
SAFETY_FACTOR = 2.0

TARGETS = ("cpu", "python", "cuda")


def numba_text(t):
    """The Numba type text of an IR type (``float64``, ``int64[:, :]``)."""
    if isinstance(t, Scalar):
        return {"f64": "float64", "i64": "int64", "bool": "boolean"}[t.kind]
    dt = {"f64": "float64", "i64": "int64", "bool": "boolean"}[t.dtype]
    return f"{dt}[{', '.join(':' * t.ndim)}]"


class BatchedGradient:
    """A gradient evaluated over a batch of argument sets; see ``coarsen.transforms.batching``."""

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
        if target not in TARGETS:
            raise CoarsenError(f"unknown batch target {target!r}",
                               hint=f"use one of {TARGETS + ('dask',)}")
        if target == "cpu" and g.target != "cpu":
            raise CoarsenError("a 'cpu' batch needs a gradient built with target='cpu'",
                               hint="use target='python' or differentiate(..., target='cpu')")
        self.target = target
        self._drivers = {}
        self.__name__ = f"batched_{g.__name__}"

    def __repr__(self):
        return f"<coarsen batched gradient of {self.g.fn.__qualname__}, in_axes={self.in_axes}, " \
               f"target={self.target!r}>"

    # ------------------------------------------------------------------ arguments
    def _split(self, args):
        return self._split_args(args)[:4]

    def _device_arguments(self, args):
        """``(args, positions of device arrays)``: none on the host targets (see ``cuda``)."""
        return args, ()

    def _split_args(self, args):
        """``_split``'s four values and whether any argument was a device array (CUDA only)."""
        g = self.g
        if len(args) != len(g.params):
            raise CoarsenError(f"{g.fn.__name__} takes {len(g.params)} arguments "
                               f"({', '.join(g.params)}), got {len(args)}")
        args = list(args)
        args, on_device = self._device_arguments(args)
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
        batch size and the per-set signature; for other batch targets (``coarsen.transforms.batching.dask``)."""
        return self._split(args)

    def result(self, args, wrt, values, grads):
        """``(values, grads)`` in ``g``'s convention from a driver's raw results; for other
        batch targets (``coarsen.transforms.batching.dask``)."""
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
        (``coarsen.transforms.batching.dask`` ships it to its workers)."""
        g = self.g
        spec = g.specialization(types, sig)           # the Artifact (coarsen.transforms.artifact)
        entry = spec.entry_name
        n_user = len(g.params)
        ir_name = dict(zip(g.params, g.ir_params))
        params = [(p, numba_text(t)) for p, t in zip(g.ir_params, types[:n_user])]
        params += [(f"_coarsen_module_array_{j}", numba_text(t)) for j, t in enumerate(types[n_user:])]
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

    _driver = _cpu_driver

    def report(self, *args, file=None):
        """A CUDA batch's report (``cuda.CudaBatchedGradient.report``): refused here."""
        raise CoarsenError("bg.report() describes CUDA batches; use g.report() for the others")

    def release(self):
        """Free the buffers a batch keeps on a device: none on the host targets."""

    def source_for(self, *args):
        """The generated source of the batched driver (and device code, for CUDA) for ``args``."""
        args, _size, types, sig = self._split(args)
        hit = self._driver(types, sig)
        with open(hit[2], encoding="utf-8") as fh:
            return fh.read()

    def __call__(self, *args):
        args, size, types, sig = self._split(args)
        spec, driver, _ = self._cpu_driver(types, sig)
        if spec.written:
            # as g refuses them: a set's arrays that overlap, one written, would be treated as
            # separate arrays (a shared array that is a row of a batched one, for instance)
            self.g._check_aliasing(tuple(args), spec.written)
        conv = [convert_argument(a) for a in args] + converted(spec.module_arrays)
        values, grads = driver(*conv)
        return self._result(args, spec.wrt, values, grads)
