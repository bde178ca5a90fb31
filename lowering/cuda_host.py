"""Host side of a CUDA batch: kept device buffers, pinned staging, device arrays in and out.

``run_batch`` launches a kernel built by ``cuda.cuda_batch_source`` (its argument order, the
kernel ABI, is documented there) over a batch of argument sets.

Requires:
    * ``cuda``: the imported ``numba.cuda`` module (a GPU, or Numba's simulator under
      ``NUMBA_ENABLE_CUDASIM=1``);
    * ``args``: one entry per kernel parameter, in order; a batched entry (``batched[k]``) is a
      1-D NumPy array or a 1-D C-contiguous Numba device array (``is_device_array``) whose
      dtype is already the kernel's (float64, int64 or bool: a device array is never
      converted; the caller checks it), all of the same length ``n_sets >= 1``; a shared entry
      is a host scalar;
    * ``wrt_batched``: per gradient, in ``wrt`` order, whether its parameter is batched;
    * ``n_f, n_i >= 1`` tape words per set, ``max_sets_per_launch >= 1``;
    * ``buffers``: a ``DeviceBuffers`` of the current device (one per device: its arrays live
      there).

Guarantees: ``run_batch(...)`` returns ``(values, grads, overflow)``:

    * ``values`` and the gradients of batched parameters: float64 arrays ``(n_sets,)``, NEW
      arrays every call (never a kept buffer, so a later call does not overwrite them): NumPy
      arrays, or Numba device arrays with ``device_out=True`` (views of one new allocation); gradients of shared parameters:
      Python floats, summed over the sets; ``grads`` a list in ``wrt`` order;
    * ``overflow``: int64 indices (ascending) of the sets whose tape did not fit; their value
      and gradients are zeros and left out of the sums (the caller recomputes them). The
      status array is copied back only when the kernel raised its overflow flag.

    Kept across calls, in ``buffers``: the workspace (``ftape``, ``itape``: the words of one
    launch, ``min(n_sets, max_sets_per_launch) * n_f`` and ``* n_i``), the status array, the
    accumulator ``acc``, the device copies of batched host inputs and, for host outputs, the
    device outputs; with ``pinned=True``, page-locked host staging arrays for the host inputs
    and outputs (``cuda.pinned_array``: a plain NumPy array under the simulator). A kept array
    is reallocated only when a call needs more elements than it holds (then to exactly that
    size); ``buffers.allocations`` counts the allocations, ``buffers.release()`` drops them
    all. ``buffers.lock`` is held for the whole call, so concurrent calls on the same buffers
    run one after the other instead of sharing them.

    Host inputs are copied into the staging array (converted to the kernel's dtype there) and
    from it to the device; device outputs are copied into the staging array and from it into
    the new NumPy result (a host memcpy). All device work runs on ``buffers.stream``, which is
    synchronized at the end of each phase, so the phases do not overlap and the timings are
    wall-clock seconds of each phase.

    ``timings`` (a dict, if given) receives the seconds spent in ``"h2d"`` (staging and
    copying batched host inputs to the device), ``"kernel"`` (all launches), ``"reduction"``
    (zeroing and reading back ``acc``: the shared sums and the overflow flag; the in-block
    reduction itself runs inside the kernel and counts there) and ``"d2h"`` (copying values,
    batched gradients and, after an overflow, the status back into NumPy arrays; 0 with
    ``device_out``), plus the number of ``"launches"`` and of kept-buffer ``"allocations"``
    made by this call. Everything else (checks, allocations, launch overhead) is host time,
    which the caller measures as its total minus these phases.
"""

from __future__ import annotations

import threading
import time

import numpy as np

__all__ = ["DeviceBuffers", "run_batch", "is_device_array", "kernel_dtype", "current_device_id",
           "PHASES", "gather_to_host"]

#: the device phases ``run_batch`` times (seconds); with "launches" and "allocations" (counts)
PHASES = ("h2d", "kernel", "reduction", "d2h")


def is_device_array(cuda, obj) -> bool:
    """Whether ``obj`` is a Numba device array (``DeviceNDArray``, or the simulator's): the
    test of Numba's ``is_cuda_ndarray``, which numba-cuda and Numba's built-in CUDA target
    place in different modules. ``cuda`` is unused (kept for a uniform signature)."""
    return bool(getattr(obj, "__cuda_ndarray__", False))


def current_device_id(cuda) -> int:
    """The id of the current CUDA device (0 under the simulator)."""
    dev = getattr(cuda.current_context(), "device", None)
    did = getattr(dev, "id", None)
    return int(did) if did is not None else 0


def kernel_dtype(dtype) -> np.dtype:
    """The dtype the kernel takes for a batched argument of ``dtype``: float64 for floats,
    int64 for integers, bool for bool; ``ValueError`` for anything else."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.dtype(np.float64)
    if dtype.kind in "iu":
        return np.dtype(np.int64)
    if dtype.kind == "b":
        return np.dtype(np.bool_)
    raise ValueError(f"cuda_host: no kernel dtype for {dtype}")


#: the gather kernel of ``gather_to_host``, compiled once per ``numba.cuda`` module (the GPU's,
#: or the simulator's)
_GATHER_SOURCE = """
def gather(src, idx, out):
    i = cuda.grid(1)
    if i < idx.shape[0]:
        out[i] = src[idx[i]]
"""
_gather_kernels: dict = {}


def gather_to_host(cuda, array, idx, buffers=None) -> np.ndarray:
    """``array[idx]`` as a new NumPy array, for a 1-D device array and int indices: one small
    kernel and one small copy back. (Reading the elements one by one costs a synchronous copy
    each: the 16 sampled sets of two arguments took 2-3 ms a call on an H200.) With
    ``buffers`` (a ``DeviceBuffers``), the indices, the device result and its pinned staging
    are kept there, and the indices are copied only when they change."""
    kernel = _gather_kernels.get(id(cuda))
    if kernel is None:
        namespace = {"cuda": cuda}
        exec(_GATHER_SOURCE, namespace)                       # noqa: S102 - fixed source above
        kernel = _gather_kernels[id(cuda)] = cuda.jit(namespace["gather"])
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    k = idx.size
    if not k:
        return np.zeros(0, dtype=array.dtype)
    grid = (k + 127) // 128
    if buffers is None:
        out = cuda.device_array(k, dtype=array.dtype)
        kernel[grid, 128](array, cuda.to_device(idx), out)
        return out.copy_to_host()
    with buffers.lock:
        stream = buffers.stream
        d_idx = buffers.device("gather_idx", k, np.int64)
        if buffers.gather_idx is None or not np.array_equal(buffers.gather_idx, idx):
            d_idx.copy_to_device(idx, stream=stream)
            buffers.gather_idx = idx.copy()
        out = buffers.device("gather_out", k, array.dtype)
        host = buffers.pinned("gather_out", k, array.dtype)
        kernel[grid, 128, stream](array, d_idx, out)
        out.copy_to_host(host, stream=stream)
        stream.synchronize()
        return host.copy()


class DeviceBuffers:
    """Device arrays, pinned host arrays and a stream of one batch on one device, kept across
    calls; see the module docstring."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.device_id = current_device_id(cuda)
        self.stream = cuda.stream()
        self.lock = threading.Lock()
        self.allocations = 0
        #: ``(name, dtype) -> array``: the kept device arrays and pinned host arrays
        self.device_arrays: dict = {}
        self.pinned_arrays: dict = {}
        self._zeros: dict = {}
        #: ``(name, dtype) -> (n, view)``: the last view handed out (a device array's slice is
        #: a new Python object each time, which the launch then re-inspects)
        self._views: dict = {}
        #: the indices last copied to the kept ``gather_idx`` array (``gather_to_host``)
        self.gather_idx = None

    def device(self, name, n, dtype):
        """A view of ``n`` elements of the kept device array ``name`` (grown when too small)."""
        key = (name, np.dtype(dtype).str)
        buf = self.device_arrays.get(key)
        if buf is None or buf.shape[0] < n:
            self.device_arrays.pop(key, None)      # the old one is freed before the new one
            self._views.pop(key, None)
            buf = self.cuda.device_array(max(int(n), 1), dtype=dtype, stream=self.stream)
            self.device_arrays[key] = buf
            self.allocations += 1
        view = self._views.get(key)
        if view is None or view[0] != n:
            view = self._views[key] = (n, buf if buf.shape[0] == n else buf[:n])
        return view[1]

    def pinned(self, name, n, dtype):
        """A view of ``n`` elements of the kept page-locked host array ``name``."""
        key = (name, np.dtype(dtype).str)
        buf = self.pinned_arrays.get(key)
        if buf is None or buf.shape[0] < n:
            self.pinned_arrays.pop(key, None)
            buf = self.cuda.pinned_array(max(int(n), 1), dtype=dtype)
            self.pinned_arrays[key] = buf
            self.allocations += 1
        return buf[:n]

    def zeros(self, n):
        """A kept float64 host array of ``n`` zeros (the accumulator's reset value)."""
        z = self._zeros.get(n)
        if z is None:
            z = self._zeros[n] = np.zeros(n, dtype=np.float64)
        return z

    def nbytes(self) -> tuple[int, int]:
        """``(device bytes, pinned host bytes)`` held."""
        return (sum(int(a.nbytes) for a in self.device_arrays.values()),
                sum(int(a.nbytes) for a in self.pinned_arrays.values()))

    def release(self):
        """Drop every kept array (Numba frees the memory when nothing else refers to it)."""
        with self.lock:
            self.device_arrays.clear()
            self._views.clear()
            self.gather_idx = None
            self.pinned_arrays.clear()
            self._zeros.clear()


def run_batch(cuda, kernel, args, batched, wrt_batched, *, threads_per_block, n_f, n_i,
              max_sets_per_launch, buffers, device_out=False, pinned=True, timings=None):
    """Launch ``kernel`` over the sets; see the module docstring."""
    with buffers.lock:
        return _run(cuda, kernel, list(args), [bool(b) for b in batched],
                    [bool(w) for w in wrt_batched], int(threads_per_block), int(n_f), int(n_i),
                    int(max_sets_per_launch), buffers, bool(device_out), bool(pinned), timings)


def _run(cuda, kernel, args, batched, wrt_batched, tpb, n_f, n_i, max_launch, buf, device_out,
         pinned, timings):
    t = {k: 0.0 for k in PHASES}
    alloc0 = buf.allocations
    stream = buf.stream
    sizes = {int(a.shape[0]) for a, b in zip(args, batched) if b}
    if len(sizes) != 1:
        raise ValueError(f"cuda_host: batched arguments have different lengths {sorted(sizes)}")
    n_sets = sizes.pop()
    if n_sets < 1 or n_f < 1 or n_i < 1 or max_launch < 1:
        raise ValueError("cuda_host: n_sets, n_f, n_i and max_sets_per_launch must be >= 1")
    n_shared = sum(1 for w in wrt_batched if not w)
    n_bw = len(wrt_batched) - n_shared
    chunk = min(n_sets, max_launch)

    # kept buffers (grown when needed) and the new device outputs
    staged = []                       # (device view, host array) of each batched host input
    dev_args = []
    for k, (a, b) in enumerate(zip(args, batched)):
        if not b or is_device_array(cuda, a):
            dev_args.append(a)
            continue
        dt = kernel_dtype(a.dtype)
        d = buf.device(f"in{k}", n_sets, dt)
        h = buf.pinned(f"in{k}", n_sets, dt) if pinned else None
        staged.append((d, h, a, dt))
        dev_args.append(d)
    ftape = buf.device("ftape", chunk * n_f, np.float64)
    itape = buf.device("itape", chunk * n_i, np.int64)
    status = buf.device("status", n_sets, np.int64)
    acc = buf.device("acc", n_shared + 1, np.float64)
    if device_out:
        # bound to the default stream (not buf.stream): the caller's later copies of them
        # (copy_to_host() without a stream) are then synchronous
        # one new allocation holds the values and the batched gradients, each a view of it
        # (an allocation costs more than the copy of a small batch)
        block = cuda.device_array((1 + n_bw) * n_sets, dtype=np.float64)
        values = block[:n_sets]
        outs = [block[(j + 1) * n_sets:(j + 2) * n_sets] for j in range(n_bw)]
    else:
        values = buf.device("values", n_sets, np.float64)
        outs = [buf.device(f"out{j}", n_sets, np.float64) for j in range(n_bw)]
        results = [np.empty(n_sets, dtype=np.float64) for _ in range(1 + n_bw)]
        staging = [buf.pinned(f"res{j}", n_sets, np.float64) if pinned else r
                   for j, r in enumerate(results)]
    h_acc = buf.pinned("acc", n_shared + 1, np.float64) if pinned else np.empty(n_shared + 1)

    t0 = time.perf_counter()
    sources = []                      # alive until the copies are done
    for d, h, a, dt in staged:
        if h is not None:
            np.copyto(h, a, casting="unsafe")
        else:
            h = np.ascontiguousarray(a, dtype=dt)
        d.copy_to_device(h, stream=stream)
        sources.append(h)
    stream.synchronize()
    del sources
    t1 = time.perf_counter()
    acc.copy_to_device(buf.zeros(n_shared + 1), stream=stream)
    stream.synchronize()
    t2 = time.perf_counter()
    launches = 0
    for start in range(0, n_sets, chunk):
        stop = min(start + chunk, n_sets)
        m = stop - start
        if m == n_sets:                      # one launch: the arrays themselves, no new views
            kargs = [m] + dev_args + [ftape, itape, n_f, n_i, status, values] + outs + [acc]
        else:
            kargs = [m] + [a[start:stop] if b else a for a, b in zip(dev_args, batched)]
            kargs += [ftape, itape, n_f, n_i, status[start:stop], values[start:stop]]
            kargs += [o[start:stop] for o in outs] + [acc]
        kernel[(m + tpb - 1) // tpb, tpb, stream](*kargs)
        launches += 1
    stream.synchronize()
    t3 = time.perf_counter()
    acc.copy_to_host(h_acc, stream=stream)
    stream.synchronize()
    t4 = time.perf_counter()
    totals = [float(x) for x in h_acc[:n_shared]]
    flagged = bool(h_acc[n_shared] != 0.0)

    if not device_out:
        for d, h in zip([values] + outs, staging):
            d.copy_to_host(h, stream=stream)
    if flagged:
        st = np.empty(n_sets, dtype=np.int64)
        status.copy_to_host(st, stream=stream)
    if flagged or not device_out:              # else nothing comes back: no d2h phase
        stream.synchronize()
    if not device_out:
        if pinned:
            for r, h in zip(results, staging):
                r[:] = h
        values, outs = results[0], results[1:]
    t5 = time.perf_counter() if flagged or not device_out else t4
    overflow = np.nonzero(st)[0].astype(np.int64) if flagged else np.zeros(0, dtype=np.int64)

    grads, bi, si = [], iter(outs), iter(totals)
    for w in wrt_batched:
        grads.append(next(bi) if w else next(si))
    if isinstance(timings, dict):
        t.update(h2d=t1 - t0, kernel=t3 - t2, reduction=(t2 - t1) + (t4 - t3), d2h=t5 - t4)
        for k in PHASES:
            timings[k] = timings.get(k, 0.0) + t[k]
        timings["launches"] = timings.get("launches", 0) + launches
        timings["allocations"] = timings.get("allocations", 0) + buf.allocations - alloc0
    return values, grads, overflow
