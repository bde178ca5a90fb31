"""The on-disk cache: where generated modules live, and a source cache keyed by the client's key.

Requires: a POSIX-like file system (``os.replace`` is atomic within one directory). The client
computes the key from whatever identifies a gradient (function source hash, signature, options,
coarsen version) with ``cache_key``; this module never interprets the parts.

Guarantees:
    * Location: ``$COARSEN_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/coarsen/<version-tag>`` with
      ``~/.cache`` when ``XDG_CACHE_HOME`` is unset; ``<version-tag>`` is
      ``<coarsen distribution version>-py<major><minor>`` (read from package metadata, without
      importing coarsen). Directories coarsen creates get mode 0o700 (per user) and a standard
      ``CACHEDIR.TAG`` (so backup tools skip them, and so ``clear_cache`` knows the directory is
      coarsen's). The directory is re-checked on every use (``configured_dir()`` names it
      without touching the disk).
    * Unusable location: a location that cannot be created or written (an ``OSError``: a
      missing or read-only mount, a path under a regular file; writing is probed once per
      process with a temporary file) makes ``cache_dir()`` fall back, for the rest of the
      process, to a private temporary directory (``tempfile.mkdtemp``, removed at exit), with
      one ``CacheWarning`` naming the location and the reason; ``cache_dir(fallback=False)``
      raises the ``OSError`` instead (the ``cache`` command line). Only where no temporary
      directory can be made either does it raise ``LoweringError``.
    * Safety: a cache directory that is not owned by the current user, or is writable by group or
      others, or is non-empty without coarsen's ``CACHEDIR.TAG``, raises ``CacheSecurityError``;
      nothing is read from, written to or executed from it.
    * Every file is written atomically (temporary file in the same directory, ``fsync``,
      ``os.replace``): a concurrent reader sees the old file, the new file or no file, never a
      partial one. Two processes storing the same key concurrently leave one complete entry.
    * Source cache layout: ``sources/<sha256 of source>.py`` holds the source, content-addressed
      and immutable; ``entries/<key>.json`` holds ``{"key", "source_sha256", "meta"}``. An entry
      is written after its source, so a reader that finds an entry finds its source. On load the
      source's content hash is checked against the entry (and the file name); a mismatch (tampered,
      truncated or foreign file) is a cache miss (``None``), never an exception and never code.
      A damaged file (an entry that is not UTF-8 JSON of the expected shape or names another
      key, a source whose hash is wrong) is also discarded and named in a ``CacheWarning``
      (``cache_faults``), once per process; a missing file (another process pruned it) or an
      entry of other parts is a miss without a warning.
    * Writes never fail the caller: a ``store_source`` whose files cannot be written (full disk,
      read-only or vanished directory) warns once and stores nothing.
    * Use is recorded for ``cache_admin``'s least-recently-used eviction: ``load`` and
      ``store_source`` touch ``access/e-<key>``, ``build`` touches ``access/m-<module stem>``
      (``touch_marker``; the marker's mtime is the last use, never the file's own times), and
      after each write ``cache_admin.bound_size`` keeps the directory under
      ``$COARSEN_CACHE_MAX_BYTES`` when it is set.
    * ``cache_key(**parts)`` is the sha256 (64 hex digits) of the canonical JSON of ``parts``
      (sorted keys, no whitespace, UTF-8, NaN/inf refused); values must be JSON types (str, int,
      float, bool, None, list/tuple, dict with str keys); tuples hash like lists. Anything else
      raises ``TypeError`` rather than hashing an unstable ``repr``.
    * Entries bound to their parts: ``store_source(key, ..., parts=parts)`` requires
      ``key == cache_key(**parts)`` and keeps the canonical parts in the entry;
      ``load(key, parts=parts)`` serves an entry only if it holds exactly those parts (an entry
      written by other software under the same file name, e.g. another coarsen version with
      another key scheme, is a miss).
    * ``toolchain_versions()``: the versions of Python, NumPy, Numba and SymPy (package metadata,
      nothing imported), for clients to put in their keys.
    * ``clear_cache()`` removes everything inside the cache directory except its ``CACHEDIR.TAG``,
      without following symbolic links, and only after the safety checks above; files that
      vanish concurrently are ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import atexit
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from .cache_faults import report_damaged, warn_once
from .eviction import MARKERS, bound_size
from .errors import CacheSecurityError, LoweringError

__all__ = [
    "cache_dir",
    "configured_dir",
    "touch_marker",
    "cache_key",
    "toolchain_versions",
    "load",
    "load_source",
    "load_meta",
    "store_source",
    "clear_cache",
    "sha256_hex",
    "atomic_write_text",
]

CACHE_ENV = "COARSEN_CACHE_DIR"
_TAG_NAME = "CACHEDIR.TAG"
_TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by coarsen.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_KEY_RE = re.compile(r"[0-9a-f]{64}")
_KEY_SCHEMA = "coarsen-cache-key/1"


# -- helpers --------------------------------------------------------------------------------------


def sha256_hex(text: str) -> str:
    """sha256 of ``text`` encoded as UTF-8, as 64 lowercase hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def atomic_write_text(path: os.PathLike | str, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: temp file beside it, fsync, ``os.replace``.

    ``mode`` (e.g. 0o644) is applied to the file before it appears; the default keeps the
    temporary file's 0o600.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; ``None`` when it is missing or cannot be read (warned once)."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        warn_once(f"unreadable:{path}", f"coarsen: cannot read the cache file {path} ({exc}); "
                  "it is treated as absent")
        return None


def _read_text(path: Path) -> str | None:
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _version_tag() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version("coarsen")
        except PackageNotFoundError:
            ver = "unknown"
    except ImportError:  # pragma: no cover
        ver = "unknown"
    ver = re.sub(r"[^0-9A-Za-z.+_-]", "_", ver)
    return f"{ver}-py{sys.version_info.major}{sys.version_info.minor}"


def _check_safe(path: Path) -> None:
    """Refuse a directory owned by someone else or writable by group/others."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CacheSecurityError(f"cache directory {path} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheSecurityError(f"cache path {path} is not a directory")
    if hasattr(os, "getuid"):
        if st.st_uid != os.getuid():
            raise CacheSecurityError(
                f"refusing to use cache directory {path}: it is owned by uid {st.st_uid}, "
                f"not by the current user (uid {os.getuid()}); set {CACHE_ENV} to a directory "
                "you own"
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise CacheSecurityError(
                f"refusing to use cache directory {path}: it is writable by group or others "
                f"(mode {stat.S_IMODE(st.st_mode):o}); run `chmod go-w {path}` or set "
                f"{CACHE_ENV} to a private directory"
            )


def _ensure_dir(path: Path) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        # an OSError: the location cannot be used (cache_dir falls back), nothing is unsafe
        raise NotADirectoryError(f"cache path {path} exists and is not a directory") from None


def configured_dir() -> Path:
    """The cache location the environment names (nothing is created or checked)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "coarsen" / _version_tag()


_state_lock = threading.Lock()
_writable: set[str] = set()            # locations probed writable in this process
_fallbacks: dict[str, Path] = {}       # unusable location -> this process's temporary directory
_process_dirs: dict[int, Path] = {}    # pid -> its temporary directory


def _prepare(root: Path, *, default: bool) -> None:
    """Create and check ``root`` (and the per-user parent of the default location)."""
    if default:
        _ensure_dir(root.parent)
        _check_safe(root.parent)
    _ensure_dir(root)
    _check_safe(root)
    tag = root / _TAG_NAME
    if not tag.is_file():
        # Another process may be writing the tag right now (its temporary file is allowed).
        if any(not e.name.startswith(f".{_TAG_NAME}.") for e in os.scandir(root)):
            raise CacheSecurityError(
                f"refusing to use {root} as coarsen's cache directory: it is not empty and has "
                f"no {_TAG_NAME} from coarsen; point {CACHE_ENV} at a new or empty directory"
            )
        atomic_write_text(tag, _TAG_TEXT)
    if str(root) not in _writable:
        fd, probe = tempfile.mkstemp(dir=root, prefix=".probe.", suffix=".tmp")
        os.close(fd)
        try:
            os.unlink(probe)
        except FileNotFoundError:
            pass                        # a concurrent clear_cache took it
        _writable.add(str(root))


def _process_dir() -> Path:
    """This process's private temporary cache directory (made on first use, removed at exit)."""
    pid = os.getpid()
    path = _process_dirs.get(pid)
    if path is None or not (path / _TAG_NAME).is_file():
        try:
            path = Path(tempfile.mkdtemp(prefix="coarsen-cache-"))
            atomic_write_text(path / _TAG_NAME, _TAG_TEXT)
        except OSError as exc:
            raise LoweringError(
                f"no writable cache directory: the temporary directory cannot be used either "
                f"({exc}); set {CACHE_ENV} to a writable directory") from None
        _process_dirs[pid] = path
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def fallback_dir(location: Path, reason: BaseException) -> Path:
    """The temporary directory that replaces ``location`` for the rest of this process."""
    with _state_lock:
        path = _process_dir()
        first = _fallbacks.setdefault(str(location), path) is path
    if first:
        warn_once(f"unusable:{location}",
                  f"coarsen: cannot use the cache directory {location} "
                  f"({type(reason).__name__}: {reason}); this process caches in {path} "
                  "(removed at exit) and compiles what it uses again", stacklevel=4)
    return path


def cache_dir(*, fallback: bool = True) -> Path:
    """The checked cache directory (created on first use). See the module docstring."""
    root = configured_dir()
    if fallback and str(root) in _fallbacks:
        with _state_lock:
            return _process_dir()
    try:
        _prepare(root, default=not os.environ.get(CACHE_ENV))
    except CacheSecurityError:
        raise
    except OSError as exc:
        if not fallback:
            raise
        return fallback_dir(root, exc)
    return root


def _subdir(name: str, root: Path | None = None) -> Path:
    path = (cache_dir() if root is None else root) / name
    _ensure_dir(path)
    _check_safe(path)
    return path


def touch_marker(name: str) -> None:
    """Record a use of the cache unit ``name`` (``access/<name>``'s mtime); never raises."""
    try:
        marker = _subdir(MARKERS) / name
        try:
            os.utime(marker)
        except FileNotFoundError:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except (OSError, LoweringError):
        pass


def _bound_size(protect: str) -> None:
    """Keep the cache under ``$COARSEN_CACHE_MAX_BYTES`` (``eviction``); never raises."""
    bound_size(cache_dir, (protect,))


def _check_key(key: str) -> str:
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        raise LoweringError(f"invalid cache key {key!r}: expected 64 hex digits from cache_key()")
    return key


# -- keys -----------------------------------------------------------------------------------------


def _canonical(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TypeError(f"cache_key: non-finite float at {where}")
        return value
    if isinstance(value, (list, tuple)):
        return [_canonical(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"cache_key: dict key {k!r} at {where} is not a str")
            out[k] = _canonical(v, f"{where}.{k}")
        return out
    raise TypeError(
        f"cache_key: {type(value).__name__} at {where} is not a JSON type; pass str/int/float/"
        "bool/None/list/tuple/dict (e.g. a hash or a str of the signature)"
    )


_TOOLCHAIN: dict | None = None


def toolchain_versions() -> dict:
    """``{"python", "numpy", "numba", "sympy"}`` versions (None for a package that is not
    installed), read once per process from package metadata without importing anything."""
    global _TOOLCHAIN
    if _TOOLCHAIN is None:
        from importlib.metadata import PackageNotFoundError, version

        out = {"python": f"{sys.implementation.name} {sys.version}"}
        for dist in ("numpy", "numba", "sympy"):
            try:
                out[dist] = version(dist)
            except PackageNotFoundError:
                out[dist] = None
        _TOOLCHAIN = out
    return dict(_TOOLCHAIN)


def cache_key(**parts: Any) -> str:
    """Stable sha256 (64 hex digits) over the canonical JSON of ``parts``."""
    canonical = _canonical(parts, "parts")
    text = json.dumps(
        [_KEY_SCHEMA, canonical],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return sha256_hex(text)


# -- the keyed source cache -----------------------------------------------------------------------


def store_source(key: str, source: str, meta: dict, *, parts: dict | None = None) -> None:
    """Store ``source`` and its JSON-serializable ``meta`` under ``key`` (atomically); with
    ``parts`` (those ``key`` was computed from), the entry records them (see ``load``)."""
    _check_key(key)
    if not isinstance(source, str):
        raise TypeError("store_source: source must be a str")
    if not isinstance(meta, dict):
        raise TypeError("store_source: meta must be a dict")
    entry = {"key": key, "source_sha256": sha256_hex(source), "meta": meta}
    if parts is not None:
        if cache_key(**parts) != key:
            raise LoweringError("store_source: key is not cache_key(**parts)")
        entry["parts"] = _canonical(parts, "parts")
    digest = entry["source_sha256"]
    entry_text = json.dumps(
        entry,
        sort_keys=True,
        indent=1,
        ensure_ascii=False,
        allow_nan=False,
    )
    root = cache_dir()
    for attempt in (1, 2):
        try:
            blob = _subdir("sources", root) / f"{digest}.py"
            current = _read_text(blob)
            if current is None or sha256_hex(current) != digest:
                atomic_write_text(blob, source)
            atomic_write_text(_subdir("entries", root) / f"{key}.json", entry_text + "\n")
            break
        except FileNotFoundError:
            if attempt == 2:            # a folder removed twice under us (clear_cache)
                return
        except OSError as exc:
            warn_once(f"unwritable:{root}", f"coarsen: cannot write to the cache directory "
                      f"{root} ({type(exc).__name__}: {exc}); generated code is not kept")
            return
    touch_marker(f"e-{key}")
    _bound_size(f"e-{key}")


def load(key: str, *, parts: dict | None = None) -> tuple[str, dict] | None:
    """``(source, meta)`` stored under ``key``, consistent with each other, or ``None``; with
    ``parts``, only an entry stored with exactly these parts is served. A damaged entry or
    source is discarded with a ``CacheWarning`` (module docstring)."""
    _check_key(key)
    try:
        entries, sources = _subdir("entries"), _subdir("sources")
    except OSError:
        return None
    path = entries / f"{key}.json"
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        entry = json.loads(data.decode("utf-8"))
    except ValueError as exc:           # UnicodeDecodeError included
        report_damaged(path, f"not a JSON entry: {exc}", data)
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        report_damaged(path, "not an entry for this key", data)
        return None
    if parts is not None and entry.get("parts") != _canonical(parts, "parts"):
        return None                     # another key scheme's entry: a miss, not damage
    digest, meta = entry.get("source_sha256"), entry.get("meta")
    if not isinstance(digest, str) or not _KEY_RE.fullmatch(digest) or not isinstance(meta, dict):
        report_damaged(path, "an entry without a source hash or meta", data)
        return None
    blob = sources / f"{digest}.py"
    raw = _read_bytes(blob)
    if raw is None:
        return None                     # pruned meanwhile: a miss
    if hashlib.sha256(raw).hexdigest() != digest:
        report_damaged(blob, "its content does not match its hash", raw)
        return None
    touch_marker(f"e-{key}")
    return raw.decode("utf-8"), meta


def load_source(key: str) -> str | None:
    """The source stored under ``key`` (content hash verified), or ``None``."""
    hit = load(key)
    return None if hit is None else hit[0]


def load_meta(key: str) -> dict | None:
    """The meta dict stored under ``key`` (only if its source is intact too), or ``None``."""
    hit = load(key)
    return None if hit is None else hit[1]


def clear_cache() -> None:
    """Empty the cache directory (everything but its ``CACHEDIR.TAG``); see the module docstring."""
    root = cache_dir()
    for entry in os.scandir(root):
        if entry.name == _TAG_NAME:
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                _rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except FileNotFoundError:
            pass


def _rmtree(path: str) -> None:
    """``shutil.rmtree`` (which never follows symlinks) tolerating concurrent removals."""
    if sys.version_info >= (3, 12):

        def onexc(func, p, exc):  # noqa: ANN001
            if not isinstance(exc, FileNotFoundError):
                raise exc

        shutil.rmtree(path, onexc=onexc)
    else:

        def onerror(func, p, exc_info):  # noqa: ANN001
            if not issubclass(exc_info[0], FileNotFoundError):
                raise exc_info[1]

        shutil.rmtree(path, onerror=onerror)
