"""Cache faults: damaged or unwritable cache files are warned about once and treated as absent.

Requires: nothing from coarsen (standard library; Numba only when a module that uses it is
guarded). ``cache.py`` and ``build.py`` call in here; this module imports neither.

Guarantees:
    * ``CacheWarning`` (a ``UserWarning``) is the one warning class of the cache: a file that
      cannot be read (truncated, garbage, foreign), a location that cannot be created or
      written, a file that cannot be written. ``warn_once(key, message)`` issues it at most once
      per process per ``key`` (thread-safe), so each damaged file is named once.
    * ``discard(path, seen)`` removes a damaged file only while it still holds the bytes that
      were found damaged (``seen``; ``None``: unconditionally), never following a symbolic
      link, and never raises: a concurrent writer that has just replaced the file keeps its
      good copy (up to the short window between the re-read and the unlink, after which the
      worst case is a cache miss, never a wrong or a failed load).
    * ``guard_numba_caches(module, on_save=None)`` wraps the on-disk cache of every Numba CPU
      dispatcher that ``module`` defines (``numba.njit(cache=True)``) in a ``GuardedNumbaCache``:
        - a load that raises (Numba's ``.nbi`` index or ``.nbc`` data truncated or garbage:
          ``UnpicklingError``, ``EOFError``, ``ValueError``...) is a miss: the damaged files are
          found (the index, else the data files it lists that do not unpickle, else all of the
          function's files), discarded, named in a ``CacheWarning``, and Numba compiles; its
          save then writes fresh files. A file that cannot be discarded disables the disk cache
          of that function for the rest of the process (no retry loop, no second warning);
        - a save that raises (read-only or vanished directory, full disk) warns once and
          disables that function's disk cache for the process; the compiled code is kept;
        - after each successful save, ``on_save()`` runs (the size bound: ``cache_admin``);
          its own failures are ignored.
      It relies on the layout of ``numba.core.caching.Cache`` (Numba 0.59 to 0.69: an
      ``_cache_file`` with ``_index_path`` and ``_index_name``); where that is missing, a failed
      load disables the function's disk cache instead of repairing it.
"""
from __future__ import annotations

import os
import pickle
import sys
import threading
import warnings
from pathlib import Path
from typing import Callable

__all__ = ["CacheWarning", "warn_once", "discard", "report_damaged", "GuardedNumbaCache",
           "guard_numba_caches"]


class CacheWarning(UserWarning):
    """A cache file or location could not be used; coarsen went on without it."""


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(key: str, message: str, *, stacklevel: int = 3) -> bool:
    """Issue ``CacheWarning(message)`` unless one with this ``key`` was issued in this process."""
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=stacklevel)
    return True


def discard(path: os.PathLike | str, seen: bytes | None = None) -> bool:
    """Remove the damaged file ``path`` (see the module docstring); True when it is gone."""
    path = os.fspath(path)
    try:
        if seen is not None:
            with open(path, "rb") as f:
                if f.read(len(seen) + 1) != seen:
                    return False        # replaced meanwhile (by a writer): keep it
        os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def report_damaged(path: os.PathLike | str, why: str, seen: bytes | None = None) -> None:
    """Discard the damaged cache file ``path`` and warn once naming it."""
    discard(path, seen)
    warn_once(f"damaged:{os.fspath(path)}",
              f"coarsen: discarded the damaged cache file {os.fspath(path)} ({why}); "
              "it is rebuilt as if it were absent")


# -- Numba's files ------------------------------------------------------------------------------


def _index_state(path: str):
    """``(readable, overloads)`` for a Numba index file, read as Numba reads it."""
    try:
        with open(path, "rb") as f:
            version = pickle.load(f)
            data = f.read()
    except FileNotFoundError:
        return True, {}
    except Exception:
        return False, None
    numba = sys.modules.get("numba")
    if numba is not None and version != getattr(numba, "__version__", version):
        return True, {}                 # another Numba's index: Numba ignores it
    try:
        stamp, overloads = pickle.loads(data)
        if not isinstance(overloads, dict) or not all(isinstance(v, str) for v in overloads.values()):
            return False, None
    except Exception:
        return False, None
    return True, overloads


def _data_readable(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            pickle.loads(f.read())
    except FileNotFoundError:
        return True
    except Exception:
        return False
    return True


def _function_files(cache_file) -> tuple[str, list[str]]:
    """(index path, this function's data files on disk) of a Numba ``IndexDataCacheFile``."""
    index = cache_file._index_path
    folder = os.path.dirname(index)
    base = cache_file._index_name[: -len(".nbi")]
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    data = [os.path.join(folder, n) for n in names
            if n.startswith(base + ".") and n.endswith(".nbc")]
    return index, sorted(data)


def _damaged_files(cache_file) -> list[str]:
    index, data = _function_files(cache_file)
    ok, overloads = _index_state(index)
    if not ok:
        return [index]
    folder = os.path.dirname(index)
    bad = [os.path.join(folder, n) for n in sorted(set(overloads.values()))
           if not _data_readable(os.path.join(folder, n))]
    if bad:
        return bad
    # every file unpickles, yet Numba could not load: drop the function's whole disk cache
    return [p for p in [index, *data] if os.path.exists(p)]


class GuardedNumbaCache:
    """A Numba function cache whose load and save never raise (see the module docstring)."""

    def __init__(self, inner, name: str, on_save: Callable[[], None] | None = None):
        self._inner = inner
        self._name = name
        self._on_save = on_save

    def __getattr__(self, attr):
        if attr.startswith("__") or attr in ("_inner", "_name", "_on_save"):
            raise AttributeError(attr)
        return getattr(self._inner, attr)

    def load_overload(self, sig, target_context):
        try:
            return self._inner.load_overload(sig, target_context)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a miss
            self._repair(exc)
            return None

    def save_overload(self, sig, data):
        try:
            self._inner.save_overload(sig, data)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written is no cache
            path = getattr(self._inner, "cache_path", "?")
            warn_once(f"numba-save:{path}",
                      f"coarsen: could not write Numba's cache for {self._name} in {path} "
                      f"({type(exc).__name__}: {exc}); it is compiled again in other processes",
                      stacklevel=2)
            self._disable()
            return
        if self._on_save is not None:
            try:
                self._on_save()
            except Exception:  # noqa: BLE001
                pass

    def flush(self):
        try:
            self._inner.flush()
        except Exception:  # noqa: BLE001
            self._disable()

    def _disable(self):
        try:
            self._inner.disable()
        except Exception:  # noqa: BLE001
            pass

    def _repair(self, exc: BaseException) -> None:
        why = f"{type(exc).__name__}: {exc}"
        cache_file = getattr(self._inner, "_cache_file", None)
        try:
            damaged = _damaged_files(cache_file)
        except Exception:  # noqa: BLE001 - another Numba's layout: stop using the disk
            damaged = []
        if not damaged:
            warn_once(f"numba-load:{self._name}",
                      f"coarsen: could not read Numba's cache for {self._name} ({why}); "
                      "compiling without it in this process", stacklevel=2)
            self._disable()
            return
        for path in damaged:
            report_damaged(path, why, _read_or_none(path))
        if any(os.path.exists(p) for p in damaged):
            self._disable()


def _read_or_none(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def guard_numba_caches(module, on_save: Callable[[], None] | None = None) -> int:
    """Guard the disk caches of the Numba CPU dispatchers ``module`` defines; how many."""
    dispatcher_mod = sys.modules.get("numba.core.dispatcher")
    if dispatcher_mod is None:
        return 0                        # Numba not imported: nothing in the module uses it
    count = 0
    for value in list(vars(module).values()):
        if not isinstance(value, dispatcher_mod.Dispatcher):
            continue
        py_func = getattr(value, "py_func", None)
        if py_func is None or getattr(py_func, "__module__", None) != module.__name__:
            continue                    # imported (a shared helper): guarded in its own module
        inner = value.__dict__.get("_cache")
        if inner is None or isinstance(inner, GuardedNumbaCache):
            continue
        if not hasattr(inner, "load_overload") or type(inner).__name__ == "NullCache":
            continue
        value._cache = GuardedNumbaCache(inner, f"{module.__name__}.{py_func.__qualname__}", on_save)
        count += 1
    return count
