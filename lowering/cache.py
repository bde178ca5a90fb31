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
      coarsen's). The directory is re-checked on every use.
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
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from .errors import CacheSecurityError, LoweringError

__all__ = [
    "cache_dir",
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


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
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
        raise CacheSecurityError(f"cache path {path} exists and is not a directory") from None


def cache_dir() -> Path:
    """The checked cache directory (created on first use). See the module docstring."""
    env = os.environ.get(CACHE_ENV)
    if env:
        root = Path(env).expanduser().absolute()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        parent = Path(base).absolute() / "coarsen"
        _ensure_dir(parent)
        _check_safe(parent)
        root = parent / _version_tag()
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
    return root


def _subdir(name: str) -> Path:
    path = cache_dir() / name
    _ensure_dir(path)
    _check_safe(path)
    return path


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
    sources = _subdir("sources")
    blob = sources / f"{digest}.py"
    current = _read_text(blob)
    if current is None or sha256_hex(current) != digest:
        atomic_write_text(blob, source)
    atomic_write_text(_subdir("entries") / f"{key}.json", entry_text + "\n")


def load(key: str, *, parts: dict | None = None) -> tuple[str, dict] | None:
    """``(source, meta)`` stored under ``key``, consistent with each other, or ``None``; with
    ``parts``, only an entry stored with exactly these parts is served."""
    _check_key(key)
    text = _read_text(_subdir("entries") / f"{key}.json")
    if text is None:
        return None
    try:
        entry = json.loads(text)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    if parts is not None and entry.get("parts") != _canonical(parts, "parts"):
        return None
    digest = entry.get("source_sha256")
    meta = entry.get("meta")
    if not isinstance(digest, str) or not _KEY_RE.fullmatch(digest) or not isinstance(meta, dict):
        return None
    source = _read_text(_subdir("sources") / f"{digest}.py")
    if source is None or sha256_hex(source) != digest:
        return None
    return source, meta


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
