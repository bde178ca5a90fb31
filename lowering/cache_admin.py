"""Cache administration: what the cache holds, and least-recently-used eviction.

Requires: ``cache`` (the directory) and ``eviction`` (scanning and pruning, which know the
layout ``cache.py`` and ``build.py`` write (``entries/<key>.json``,
``sources/<sha256>.py``, ``<name>_<sha256[:20]>.py`` modules, Numba's ``__pycache__/<stem>.*``,
use markers ``access/e-<key>`` and ``access/m-<stem>``)).

Guarantees:
    * ``scan(root)`` sorts every file into units: an *entry* (its JSON and, shared, the source
      it names), a *module* (its ``.py`` and all of Numba's files whose name starts with its
      stem, even where the ``.py`` is gone), an orphan *source* (named by no entry), a *temp*
      file (a writer's ``.tmp``, Numba's ``.tmp.<uid>``); everything else (``CACHEDIR.TAG``,
      ``cost_weights.json``, markers) is *other* and is never evicted. A unit's last use is its
      marker's mtime, else its newest file's.
    * ``info()``, ``prune(max_bytes)``, ``bound_size(protect)``: ``coarsen.lowering.eviction``'s
      functions (what they do and why they are safe beside other processes is stated there) on
      the cache directory of this process.
    * ``main(argv)``: ``python -m coarsen cache info|clear|prune --max-bytes N``; exit status
      0, or 1 with a message when the cache directory cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import cache, eviction
from .errors import LoweringError
from .eviction import (MAX_BYTES_ENV, TEMP_GRACE_SECONDS, CacheInfo, PruneResult,  # noqa: F401
                       Scan, Unit, parse_size, scan)

__all__ = ["Unit", "CacheInfo", "PruneResult", "scan", "info", "prune", "bound_size",
           "parse_size", "main"]


def _directory() -> Path:
    return cache.cache_dir(fallback=False)


def info(root: Path | None = None) -> CacheInfo:
    """What the cache holds (module docstring; default: the cache directory)."""
    return eviction.info(_directory if root is None else root)


def prune(max_bytes: int, *, root: Path | None = None, protect=(),
          now: float | None = None) -> PruneResult:
    """Evict least-recently-used units until the cache takes at most ``max_bytes``."""
    return eviction.prune(max_bytes, root=_directory if root is None else root, protect=protect,
                          now=now)


def bound_size(protect=()) -> None:
    """Prune to ``$COARSEN_CACHE_MAX_BYTES`` where it is set (module docstring); never raises."""
    eviction.bound_size(cache.cache_dir, protect)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def main(argv=None) -> int:
    """``python -m coarsen cache info|clear|prune --max-bytes N`` (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m coarsen cache",
                                     description="show, empty or prune coarsen's on-disk cache "
                                                 f"(${cache.CACHE_ENV}, else ~/.cache/coarsen/...)")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("info", help="the cache directory, its entries, modules and bytes")
    sub.add_parser("clear", help="remove everything in the cache directory but its tag")
    pr = sub.add_parser("prune", help="evict least-recently-used entries and modules")
    pr.add_argument("--max-bytes", required=True, type=parse_size,
                    help="the size to stay under: bytes, or with a K, M or G suffix")
    args = parser.parse_args(argv)
    try:
        if args.action == "info":
            i = info()
            print(f"cache directory: {i.directory}")
            print(f"entries: {i.entries} ({_size(i.entry_bytes)}): generated sources")
            print(f"modules: {i.modules} ({_size(i.module_bytes)}): built modules and Numba's "
                  "machine code")
            print(f"other: {i.other_files} files ({_size(i.other_bytes)})")
            print(f"total: {_size(i.total_bytes)} ({i.total_bytes} bytes)")
        elif args.action == "clear":
            before = info()
            cache.clear_cache()
            print(f"cleared {before.directory}: {before.entries} entries, {before.modules} "
                  f"modules, {_size(before.total_bytes)}")
        else:
            r = prune(args.max_bytes)
            print(f"pruned {r.directory}: removed {r.removed_units} entries and modules "
                  f"({_size(r.removed_bytes)}); {_size(r.total_bytes)} left")
    except (OSError, LoweringError) as exc:
        print(f"coarsen cache: {exc}", file=sys.stderr)
        return 1
    return 0
