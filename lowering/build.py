"""Build: generated source -> an imported module backed by a real file in the cache directory.

Requires: ``source`` is complete Python source (e.g. from ``printer.render``) whose imports are
available in this process (math, NumPy, Numba for target "cpu"); ``name`` is a Python identifier
(typically the gradient function's name).

Guarantees:
    * The source is written to ``<cache_dir>/<name>_<sha256[:20]>.py`` atomically (temp file +
      ``os.replace``); concurrent processes never see a partial file.
    * Code is only ever executed from the in-memory ``source`` whose hash names the file, and the
      file on disk is made to hold exactly that text: an existing file whose content hash differs
      from the hash in its name (tampered, truncated, foreign) is rewritten, never executed.
    * The module is imported under the deterministic, unique name ``_coarsen_gen_<name>_<sha[:20]>``
      and registered in ``sys.modules`` (Numba's cache and ``inspect`` look modules up there); a
      second ``build`` of the same source in the same process returns the same module object
      (no re-execution, no recompilation) after re-verifying the file on disk.
    * Functions' ``co_filename`` is the real file, so tracebacks and ``inspect.getsource`` work and
      ``numba.njit(cache=True)`` stores machine code in ``__pycache__`` beside it (reused by later
      processes that build the same source). The source is also registered in ``linecache``
      (with no mtime, so ``linecache.checkcache`` keeps it even if the file is deleted).
    * The module has ``__coarsen_sha256__`` (full content hash) and ``__coarsen_target__``.
    * Target "cpu": the helper functions that other modules carry too are built as modules of
      their own and imported (``shared_helpers.split``: same line numbers, hash-named), so
      Numba compiles each once per process; the file and the hash are those of the text with
      the imports, which ``module_path(source, name=, target="cpu")`` names.
    * Faults never fail a build (``cache_faults``): a module file whose content does not match
      its hash is rewritten with a ``CacheWarning`` naming it; Numba's cache files of every
      function the module defines are guarded (``guard_numba_caches``: a damaged ``.nbi`` or
      ``.nbc`` is discarded, warned about and compiled again); a file that vanishes between its
      write and the import (a concurrent prune or clear) is written again (three tries); a
      module file that cannot be written, or a Numba that finds no writable cache folder
      beside it, switches this process to its temporary directory for the rest of its life
      (``cache.fallback_dir``: one warning; later builds and entries go there too).
    * Each build records a use of the module (``touch_marker("m-<file stem>")``) and, after
      writing a file or Numba's cache, keeps the directory under ``$COARSEN_CACHE_MAX_BYTES``
      (``cache_admin.bound_size``, never evicting the module being built).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import linecache
import sys
import threading
import types
from pathlib import Path

from . import cache_admin
from .cache import atomic_write_text, cache_dir, fallback_dir, sha256_hex, touch_marker
from .cache_faults import guard_numba_caches, warn_once
from .errors import LoweringError
from .shared_helpers import module_name, split as split_helpers
from .targets import check_target

__all__ = ["build", "module_path"]

_PREFIX_LEN = 20
_lock = threading.Lock()


def module_path(source: str, *, name: str, target: str = "python") -> Path:
    """The cache file that ``build(source, name=name, target=target)`` uses."""
    _check_name(name)
    if target == "cpu":
        source, _ = split_helpers(source)
    return cache_dir() / f"{name}_{sha256_hex(source)[:_PREFIX_LEN]}.py"


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise LoweringError(f"build: name must be a Python identifier, got {name!r}")


def _ensure_file(path: Path, source: str, digest: str) -> bool:
    """Make ``path`` hold exactly ``source``; verify by content hash, rewrite on mismatch (with a
    warning: the file was damaged). True when the file was written."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = None
    except OSError:
        data = b""                      # unreadable (a folder in its place...): rewrite it
    if data is not None and hashlib.sha256(data).hexdigest() == digest:
        return False
    atomic_write_text(path, source)
    if data is not None:
        warn_once(f"damaged:{path}", f"coarsen: replaced the damaged cache file {path} "
                  "(its content did not match its hash)")
    return True


def _register_linecache(path: Path, source: str) -> None:
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    # mtime None: linecache.checkcache leaves the entry alone (as for loader-provided source).
    linecache.cache[str(path)] = (len(source), None, lines, str(path))


def build(source: str, *, name: str, target: str) -> types.ModuleType:
    """Write ``source`` into the cache directory and import it; see the module docstring."""
    check_target(target)
    _check_name(name)
    if not isinstance(source, str):
        raise TypeError("build: source must be a str")
    if target == "cpu":
        # the helpers other modules carry too: built once, imported (lowering.shared_helpers)
        source, helpers = split_helpers(source)
        for h in helpers:
            _build(h.source, h.build_name, target)
    return _build(source, name, target)


class _Unusable(Exception):
    """The module's folder cannot hold it: build it in this process's temporary directory."""

    def __init__(self, reason: BaseException):
        super().__init__(str(reason))
        self.reason = reason


def _build(source: str, name: str, target: str) -> types.ModuleType:
    digest = sha256_hex(source)
    stem = f"{name}_{digest[:_PREFIX_LEN]}"
    modname = module_name(source, name)
    with _lock:
        root = cache_dir()
        path = root / f"{stem}.py"
        module = sys.modules.get(modname)
        if (
            module is not None
            and getattr(module, "__coarsen_sha256__", None) == digest
            and getattr(module, "__file__", None) == str(path)
        ):
            try:
                _ensure_file(path, source, digest)
            except OSError:
                pass                    # the module runs from memory; its file is a courtesy
            _register_linecache(path, source)
            touch_marker(f"m-{stem}")
            return module
        try:
            return _import(source, digest, modname, target, path, stem)
        except _Unusable as exc:
            path = fallback_dir(root, exc.reason) / f"{stem}.py"
            try:
                return _import(source, digest, modname, target, path, stem)
            except _Unusable as again:
                raise again.reason from None


def _cache_trouble(exc: BaseException, path: Path) -> bool:
    """Did ``exec`` fail because of the cache folder (not because of the code)?"""
    if not path.is_file():
        return True                     # removed under us: Numba found no file to cache beside
    return isinstance(exc, RuntimeError) and str(exc).startswith("cannot cache function")


def _import(source: str, digest: str, modname: str, target: str, path: Path,
            stem: str) -> types.ModuleType:
    """Write ``path`` and execute ``source`` as module ``modname`` from it (see ``_build``)."""
    for attempt in (1, 2, 3):
        try:
            wrote = _ensure_file(path, source, digest)
        except OSError as exc:
            raise _Unusable(exc) from None
        _register_linecache(path, source)
        code = compile(source, str(path), "exec", dont_inherit=True)
        module = types.ModuleType(modname)
        module.__file__ = str(path)
        module.__spec__ = importlib.machinery.ModuleSpec(modname, None, origin=str(path))
        module.__spec__.has_location = True
        module.__coarsen_sha256__ = digest
        module.__coarsen_target__ = target
        sys.modules[modname] = module
        try:
            exec(code, module.__dict__)
        except Exception as exc:
            sys.modules.pop(modname, None)
            if not _cache_trouble(exc, path):
                raise
            if attempt == 3 or path.is_file():
                raise _Unusable(exc) from None
            continue                    # the file was pruned meanwhile: write it again
        except BaseException:
            sys.modules.pop(modname, None)
            raise
        protect = (f"m-{stem}",)
        guard_numba_caches(module, on_save=lambda: cache_admin.bound_size(protect=protect))
        touch_marker(f"m-{stem}")
        if wrote:
            cache_admin.bound_size(protect=protect)
        return module
    raise AssertionError("unreachable")  # pragma: no cover
