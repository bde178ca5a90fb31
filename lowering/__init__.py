"""coarsen.lowering: from a gast module to running code.

Speaks Python ASTs (gast) and Numba only; never imports ``coarsen``. Modules:

* ``printer``: ``render(module, *, target, header=None) -> str`` (readable, deterministic source)
* ``build``: ``build(source, *, name, target) -> module`` (real file in the cache dir, imported)
* ``cache``: ``cache_key``, ``store_source``, ``load_source``, ``load_meta``, ``load``,
  ``clear_cache``, ``cache_dir`` (the on-disk cache, atomic and hash-checked; an unusable
  location falls back to a per-process temporary directory)
* ``cache_faults``: ``CacheWarning``; damaged files (coarsen's and Numba's) are discarded,
  warned about once and rebuilt, never raised
* ``cache_admin``: ``info``, ``prune`` (least recently used), ``bound_size``
  (``$COARSEN_CACHE_MAX_BYTES``), ``main`` (``python -m coarsen cache info|clear|prune``)
* ``eviction``: what the cache directory holds and least-recently-used eviction, below ``cache``
  (which bounds the directory after each write) and taking the directory as an argument
* ``export``: ``export_module(source, path, *, header)`` (standalone file: math/numpy/numba only)
* ``batch``: ``batch_source(fn_name, params, batched, *, wrt, value_type, target, driver_name)``
  (vmap-style batched driver: numba.prange on the CPU)
* ``cuda``: ``cuda_batch_source(fn_name, params, batched, *, wrt, device_source, threads_per_block,
  tape_layout, local_tape)`` (one thread per set calling a ``numba.cuda.jit(device=True)``
  function, tapes in one global workspace, with ``local_tape`` two ``cuda.local.array`` stretch
  tapes per thread, shared gradients reduced per block; imports numba.cuda only when the source
  runs); ``cpu_twin_source`` (the device source under ``@numba.njit``, for the host's sample)
* ``cuda_host``: ``run_batch(cuda, kernel, args, ...)`` and ``DeviceBuffers`` (the host side of
  a CUDA batch: device buffers kept across calls, pinned staging, device arrays in and out)
* ``targets``: the supported targets ("cpu", "python"); ``errors``: ``LoweringError``,
  ``CacheSecurityError``
"""

from .batch import batch_source
from .build import build, module_path
from .cuda import cuda_batch_source
from .cache import cache_dir, cache_key, clear_cache, load, load_meta, load_source, store_source
from .cache_faults import CacheWarning
from .errors import CacheSecurityError, LoweringError
from .export import export_module
from .printer import render
from .targets import TARGETS

__all__ = [
    "render",
    "build",
    "module_path",
    "cache_dir",
    "cache_key",
    "clear_cache",
    "CacheWarning",
    "load",
    "load_meta",
    "load_source",
    "store_source",
    "export_module",
    "batch_source",
    "cuda_batch_source",
    "TARGETS",
    "LoweringError",
    "CacheSecurityError",
]
