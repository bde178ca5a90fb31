"""The CUDA backend of gradient batches: ``g.batch(in_axes, target="cuda")``.

Requires: a gradient of scalar-only functions (no array in one set, no module-level array),
numba-cuda (or Numba's CUDA simulator under ``NUMBA_ENABLE_CUDASIM=1``) and ``in_axes`` as for
every batch (``coarsen.transforms.batching.cpu``).
Guarantees: ``CudaBatchedGradient`` is the host batch (``cpu.BatchedGradient``: arguments,
results, conventions) whose driver is a CUDA kernel (``coarsen.lowering.cuda_batch_source``), one
thread per set, each thread's tapes in a global workspace sized from a sample of the sets run on
the CPU (``SAFETY_FACTOR``, ``TAPE_SAMPLE_FIRST``, ``TAPE_SAMPLE_SPREAD``), launched in chunks
of at most ``bg.max_workspace_bytes``; sets whose tape did not fit are run again on the CPU
(``bg.on_overflow = "cpu"``) or raise (``"raise"``).  Batched arguments may be device arrays
(Numba's, or any ``__cuda_array_interface__`` object, viewed without a copy: 1-D,
C-contiguous, float64, int64 or bool; ``cuda_arguments`` checks them), and their results then
stay on the device.  ``bg.local_tape`` (``"auto"`` = ``LOCAL_TAPE``, ``None``, or ``(floats,
ints)``) lets loops tape in thread-local stretches; ``bg.report()`` says how each loop tapes.
``import_numba_cuda()`` is ``numba.cuda`` or a ``CoarsenError`` naming what to install.
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
from ...ir.nodes import Array
from ...lowering import cuda_host
from ..arguments import convert_argument
from ..report import TransformReport, print_report
from .cpu import SAFETY_FACTOR, BatchedGradient, numba_text

__all__ = ["LOCAL_TAPE", "MAX_WORKSPACE_BYTES", "BatchReport", "CudaBatchedGradient",
           "cuda_arguments", "import_numba_cuda", "loop_notes"]

TAPE_SAMPLE_FIRST = 4
TAPE_SAMPLE_SPREAD = 12
#: default cap on the CUDA workspace of one launch (larger batches run in chunks)
MAX_WORKSPACE_BYTES = 1 << 30
#: CUDA: the thread-local stretch tapes, (floats, ints), of ``bg.local_tape = "auto"``
LOCAL_TAPE = (16, 4)


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
class BatchReport(TransformReport):
    """What ``bg.report()`` says: the local tape sizes used (None: none), the loops' notes
    ``(line, how)``, the last call's workspace per set ``(floats, ints)``, and the text."""
    local_tape: object
    loops: tuple
    workspace: object
    text: str

    def format(self):
        return self.text


class CudaBatchedGradient(BatchedGradient):
    """A gradient evaluated over a batch of argument sets on a CUDA device (module docstring)."""

    def __init__(self, g, in_axes):
        super().__init__(g, in_axes, target="cuda")
        self.safety_factor = SAFETY_FACTOR
        self.max_workspace_bytes = MAX_WORKSPACE_BYTES
        self.on_overflow = "cpu"
        self.threads_per_block = None
        self.tape_size = None
        self.tape_layout = "interleaved"
        self.local_tape = "auto"
        self.last_overflow = np.zeros(0, dtype=np.int64)
        self.last_tape_size = None
        self.last_tape_sample = None     # the sample's largest tape (floats, ints) a set
        self.last_timings = {}
        self.pinned_staging = True
        self._cuda_buffers = {}          # device id -> cuda_host.DeviceBuffers
        self._last_cuda = None           # (types, signature) of the last CUDA call

    def _device_arguments(self, args):
        return cuda_arguments(self.g.params, self.batched, args)

    def __call__(self, *args):
        t0 = time.perf_counter()
        args, size, types, sig, on_device = self._split_args(args)
        return self._call_cuda(args, size, types, sig, on_device, t0)

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
        params = [(p, numba_text(t)) for p, t in zip(g.ir_params, types)]
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

    _driver = _cuda_driver

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
        return print_report(BatchReport(local, notes, self.last_tape_size, "\n".join(lines)), file)

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
        conv = [a if b else convert_argument(a) for a, b in zip(args, self.batched)]
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
