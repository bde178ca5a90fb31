"""Batched gradients on a Dask cluster: ``g.batch(in_axes, target="dask")``.

    from distributed import Client
    client = Client(...)                                  # any distributed cluster
    bg = g.batch((0, None), target="dask", client=client)
    values, grads = bg(X, w)                              # NumPy results, as the CPU batch's

Requires:

* ``dask`` and ``distributed`` where the batch is called (``pip install "coarsen[dask]"``);
  otherwise ``g.batch(..., target="dask")`` raises a ``CoarsenError`` saying what to install;
* a gradient built with ``target="cpu"`` and ``in_axes`` as for every batch
  (``coarsen.transforms.batching``);
* on every worker: coarsen (this module, ``coarsen.transforms.arguments.convert_argument`` and
  ``coarsen.lowering.build``), NumPy and Numba, the same versions as the client (a Dask cluster
  runs one environment).  The user's function is never shipped, nor needed on the workers;
* batched arguments: NumPy arrays (or sequences), or ``dask.array`` arrays chunked along the
  batch axis (axis 0) only.  A dask array with more than one chunk along another axis, or with
  unknown chunk sizes, is refused with a ``CoarsenError`` whose hint is the ``rechunk`` (or
  ``compute_chunk_sizes``) call to make: it is not rechunked behind your back, since merging
  chunks of a large array moves data between workers.  Shared arguments: NumPy arrays or
  scalars (a dask collection there is refused: ``.compute()`` it).

Chunks (contiguous ranges of sets, in set order), chosen at each call:

* ``nchunks=k``: ``min(k, B)`` near-equal chunks ``[c*B//k, (c+1)*B//k)``;
* ``chunks=n`` (an int, as in dask: sets per chunk) or ``chunks=(n_1, n_2, ...)`` (sizes that sum
  to ``B``);
* neither (the default): the axis-0 chunks of the first batched dask array, if any; otherwise one
  chunk per worker thread of the cluster at call time (at least 1, at most ``B``).

Other batched dask arrays, and every dask array when ``chunks``/``nchunks`` is given, are
rechunked along axis 0 to those chunks; NumPy arguments are sliced.  ``bg.last_chunks`` holds
the ``(start, stop)`` of each chunk of the last call.

Client: ``client=`` when given; otherwise the current client at each call
(``distributed.get_client()``: the default client, or the worker's inside a task); when there
is none, the first call starts an embedded ``LocalCluster`` (``LOCAL_CLUSTER``: 2 worker
processes of 1 thread, the dashboard on a free port) and a client on it, kept by this batch object until
``bg.close()``, the end of a ``with bg:`` block, or its garbage collection.  The embedded
cluster's worker processes are spawned: a script that relies on it needs the usual
``if __name__ == "__main__":`` guard.

How a chunk runs: the client builds the generated source of the CPU batch (the gradient's
module with its ``numba.prange`` driver appended, ``BatchedGradient.cpu_program``) once per
per-set signature, and each chunk task carries that source text, its build name and the
driver's name.  A worker builds it with ``coarsen.lowering.build`` once per process (kept by
the source's SHA-256; Numba's on-disk cache beside the file serves later worker processes that
share the cache directory) and calls the driver on the chunk.  Workers always use the CPU batch
(CUDA is not chosen on a worker).  The chunks a worker process runs are serialized by one
process-wide lock, and each uses ``min(worker threads, NUMBA_NUM_THREADS)`` Numba threads: safe
with every Numba threading layer (the workqueue layer aborts on concurrent parallel calls), and
one worker of ``t`` threads keeps ``t`` cores busy.

Guarantees: ``bg(*args)`` returns exactly what ``g.batch(in_axes)(*args)`` (the CPU batch)
returns: NumPy ``values`` (B,), batched gradients ``(B, *per-set shape)``, shared gradients
summed, in ``g``'s convention (tuple or single value, float32 rounding).  Values and batched
gradients are each chunk's, concatenated in chunk order: per set, the same generated code as
the CPU batch (equal bit for bit where the workers run the client's versions on the same kind
of CPU).  Shared gradients: each chunk's driver sums its sets in at most 128 ordered blocks (as
the CPU batch does), then the chunks' sums are added pairwise by chunk index on the client
(``((s0+s1)+(s2+s3))+...``; the results come to the client anyway, so this costs no task and no
transfer).  The result therefore depends on the chunk boundaries only, never on which worker
runs what or finishes first: the same call with the same chunks is bit-identical, and other
chunks differ from the CPU batch's one-process sum by rounding only.  (The default chunks
follow the cluster's thread count: pass ``nchunks=`` for bits independent of the cluster.)

Failures: chunk tasks have no side effects and carry their inputs (NumPy slices are sent with
the task, never scattered), so a worker lost mid-run (killed, restarted) is handled by Dask:
the scheduler reruns its chunks, and those whose results it held, elsewhere, and the answer is
unchanged (``distributed.scheduler.allowed-failures`` bounds how often).  An exception a set
raises (``IndexError`` of a bounds check, say) reaches the caller, as with the CPU batch.
``bg.timeout`` (seconds, default ``None``: no limit) bounds the wait for the chunks; on a
timeout or an error the call's tasks are cancelled.
"""
from __future__ import annotations

import hashlib
import threading
import uuid
import weakref

import numpy as np

from ..arguments import convert_argument
from .cpu import BatchedGradient
from ...errors import CoarsenError

__all__ = ["DaskBatchedGradient", "LOCAL_CLUSTER", "chunk_bounds", "tree_sum", "run_chunk"]

#: the embedded cluster started when no client is given and none is current
LOCAL_CLUSTER = {"n_workers": 2, "threads_per_worker": 1, "processes": True,
                 "dashboard_address": ":0"}


def _import_dask():
    try:
        import dask
        import dask.array
        import distributed
    except ImportError as exc:
        raise CoarsenError(f"target='dask' needs dask and distributed: {exc}",
                           hint="pip install 'dask[distributed]' (coarsen's [dask] extra), "
                                "or use target='cpu'") from None
    return dask, dask.array, distributed


def chunk_bounds(size, *, chunks=None, nchunks=None):
    """The ``(start, stop)`` of each chunk of ``size`` sets: ``nchunks`` near-equal chunks
    (at most ``size``), or ``chunks`` sets per chunk (an int) or chunk sizes (a sequence that
    sums to ``size``); see the module docstring."""
    if nchunks is not None:
        k = min(int(nchunks), size)
        return [(c * size // k, (c + 1) * size // k) for c in range(k)]
    if isinstance(chunks, (int, np.integer)):
        n = int(chunks)
        return [(lo, min(lo + n, size)) for lo in range(0, size, n)]
    sizes = [int(n) for n in chunks]
    if sum(sizes) != size:
        raise CoarsenError(f"chunks={tuple(sizes)} sums to {sum(sizes)}, but the batch has "
                           f"{size} sets", hint="give sizes that sum to the batch size, or "
                                                "nchunks=k")
    out, lo = [], 0
    for n in sizes:
        out.append((lo, lo + n))
        lo += n
    return out


def _check_knobs(chunks, nchunks):
    def positive_int(v):
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1

    if chunks is not None and nchunks is not None:
        raise CoarsenError("give chunks= or nchunks=, not both",
                           hint="nchunks=k for k chunks; chunks=n for n sets per chunk")
    if nchunks is not None and not positive_int(nchunks):
        raise CoarsenError(f"nchunks must be an int >= 1, got {nchunks!r}")
    if chunks is not None and not positive_int(chunks):
        if not (isinstance(chunks, (tuple, list)) and chunks
                and all(positive_int(n) for n in chunks)):
            raise CoarsenError(f"chunks must be an int >= 1 (sets per chunk) or a tuple of "
                               f"chunk sizes >= 1, got {chunks!r}")


class DaskBatchedGradient:
    """A gradient evaluated over a batch of argument sets on a Dask cluster; see
    ``coarsen.transforms.batching.dask``."""

    def __init__(self, g, in_axes, *, client=None, chunks=None, nchunks=None):
        _import_dask()
        if g.target != "cpu":
            raise CoarsenError("target='dask' runs the CPU batch on the workers: it needs a "
                               "gradient built with target='cpu'",
                               hint="differentiate(..., target='cpu')")
        _check_knobs(chunks, nchunks)
        self.cpu = BatchedGradient(g, in_axes, target="cpu")   # checks in_axes
        self.g = g
        self.in_axes = self.cpu.in_axes
        self.batched = self.cpu.batched
        self.target = "dask"
        self.chunks = chunks
        self.nchunks = nchunks
        self.timeout = None
        self.last_chunks = None
        self._client = client
        self._own = None          # (client, cluster) of the embedded cluster
        self._finalizer = None
        self._programs = {}
        self.__name__ = f"batched_{g.__name__}"

    def __repr__(self):
        return f"<coarsen batched gradient of {self.g.fn.__qualname__}, in_axes={self.in_axes}, " \
               f"target='dask'>"

    # ------------------------------------------------------------------ the client
    @property
    def client(self):
        """The client of the next call (starting the embedded cluster when there is none)."""
        if self._client is not None:
            return self._client
        if self._own is not None:
            return self._own[0]
        _, _, distributed = _import_dask()
        try:
            return distributed.get_client()
        except ValueError:
            pass
        cluster = distributed.LocalCluster(**LOCAL_CLUSTER)
        client = distributed.Client(cluster, set_as_default=False)
        self._own = (client, cluster)
        self._finalizer = weakref.finalize(self, _close, client, cluster)
        return client

    def close(self):
        """Close the embedded cluster, if this batch started one (a later call starts anew)."""
        if self._finalizer is not None:
            self._finalizer()
        self._own = self._finalizer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ arguments
    def _split(self, args):
        """``(stand-ins, dask arrays by position, size, types, sig)``: each batched dask array
        replaced by a zero-strided NumPy stand-in of its shape and dtype for the checks."""
        _, da, _ = _import_dask()
        import dask
        g = self.g
        args = list(args)
        lazy = {}
        for k, a in enumerate(args):
            if k >= len(self.batched):
                break                                  # the count is checked by split()
            p = g.params[k]
            if not dask.is_dask_collection(a):
                continue
            if not self.batched[k]:
                raise CoarsenError(f"argument {p!r} is shared (in_axes None) but is a dask "
                                   f"{type(a).__name__}", hint=f"pass {p}.compute(): shared "
                                   "arguments are sent whole to every chunk")
            if not isinstance(a, da.Array):
                raise CoarsenError(f"argument {p!r} is batched but is a dask "
                                   f"{type(a).__name__}, not a dask array",
                                   hint="pass a dask.array or a NumPy array")
            if a.ndim == 0:
                raise CoarsenError(f"argument {p!r} is batched (in_axes 0) but is a 0-d array")
            if any(n != n for axis in a.chunks for n in axis):
                raise CoarsenError(f"the dask array {p!r} has unknown chunk sizes",
                                   hint=f"call {p}.compute_chunk_sizes() first")
            split = [ax for ax in range(1, a.ndim) if len(a.chunks[ax]) > 1]
            if split:
                spec = "{" + ", ".join(f"{ax}: -1" for ax in split) + "}"
                raise CoarsenError(f"the dask array {p!r} is chunked along axis "
                                   f"{', '.join(map(str, split))}; a batch is split along its "
                                   "batch axis (0) only", hint=f"{p} = {p}.rechunk({spec}), "
                                   "which keeps the chunks of axis 0")
            lazy[k] = a
            args[k] = np.broadcast_to(np.zeros((), dtype=a.dtype), a.shape)
        args, size, types, sig = self.cpu.split(args)
        return args, lazy, size, types, sig

    def _bounds(self, size, lazy, client):
        if self.chunks is not None or self.nchunks is not None:
            return chunk_bounds(size, chunks=self.chunks, nchunks=self.nchunks)
        if lazy:
            return chunk_bounds(size, chunks=lazy[min(lazy)].chunks[0])
        threads = sum(client.nthreads().values())
        return chunk_bounds(size, nchunks=max(1, threads))

    def _program(self, types, sig):
        key = (types, sig)
        hit = self._programs.get(key)
        if hit is None:
            spec, source, name, driver = self.cpu.cpu_program(types, sig)
            hit = (spec, (source, name, driver))
            self._programs[key] = hit
        return hit

    def source_for(self, *args):
        """The generated source that the workers build and run for ``args``."""
        _, _, _, types, sig = self._split(args)
        return self._program(types, sig)[1][0]

    # ------------------------------------------------------------------ the call
    def __call__(self, *args):
        args, lazy, size, types, sig = self._split(args)
        spec, program = self._program(types, sig)
        client = self.client
        bounds = self._bounds(size, lazy, client)
        self.last_chunks = bounds
        sizes = tuple(hi - lo for lo, hi in bounds)
        token = uuid.uuid4().hex
        _, _, distributed = _import_dask()
        blocks = {}
        for k, a in lazy.items():
            if a.chunks[0] != sizes:
                a = a.rechunk({0: sizes})
            # futures of the blocks (the array's own keys when it is persisted: never
            # cancelled here, only released when these references go)
            blocks[k] = client.compute(list(a.to_delayed().reshape(-1)))
        shared = list(spec.module_arrays)
        futures = []
        try:
            for c, (lo, hi) in enumerate(bounds):
                part = [blocks[k][c] if k in blocks else (a[lo:hi] if b else a)
                        for k, (a, b) in enumerate(zip(args, self.batched))]
                futures.append(client.submit(run_chunk, program, *part, *shared,
                                             key=f"coarsen-chunk-{token}-{c}"))
            with client.as_current():           # wait() asks for the current client
                distributed.wait(futures, timeout=self.timeout)
            results = client.gather(futures)
        except BaseException:
            client.cancel(futures)      # this call's own tasks only
            raise
        del futures, blocks
        values = np.concatenate([r[0] for r in results])
        grads = []
        for j, name in enumerate(spec.wrt):
            parts = [r[1][j] for r in results]
            if self.batched[self.g.params.index(name)]:
                grads.append(np.concatenate(parts, axis=0))
            else:
                grads.append(tree_sum(parts))
        return self.cpu.result(args, spec.wrt, values, grads)


def tree_sum(parts):
    """``parts`` added pairwise in index order (``((p0+p1)+(p2+p3))+...``): a fixed order."""
    parts = list(parts)
    while len(parts) > 1:
        paired = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
        parts = paired + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _close(client, cluster):
    try:
        client.close()
    finally:
        cluster.close()


# ---------------------------------------------------------------------- on the workers
_LOCK = threading.Lock()
_BUILT = {}


def _numba_threads():
    import numba
    try:
        from distributed import get_worker
        worker = get_worker()
        threads = getattr(getattr(worker, "state", worker), "nthreads", 1)
    except (ImportError, ValueError):
        threads = 1
    return max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS))


def run_chunk(program, *args):
    """Run one chunk on a worker: build ``program`` (``(source, name, driver)``) once per
    process and call its driver on ``args`` (converted as ``Gradient`` converts them).
    Returns the driver's ``(values, grads)``."""
    import numba
    from ... import lowering
    source, name, driver = program
    key = hashlib.sha256(source.encode("utf-8")).hexdigest()
    conv = [convert_argument(a) for a in args]
    with _LOCK:
        fn = _BUILT.get(key)
        if fn is None:
            try:
                fn = getattr(lowering.build(source, name=name, target="cpu"), driver)
            except lowering.LoweringError as exc:
                raise CoarsenError(f"batch (dask worker): {exc}") from None
            _BUILT[key] = fn
        before = numba.get_num_threads()
        numba.set_num_threads(_numba_threads())
        try:
            values, grads = fn(*conv)
        finally:
            numba.set_num_threads(before)
    return values, tuple(grads)
