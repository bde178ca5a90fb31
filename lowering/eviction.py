"""What the cache directory holds, and least-recently-used eviction (the core of ``cache_admin``).

Requires: the layout ``cache.py`` and ``build.py`` write (``entries/<key>.json``,
``sources/<sha256>.py``, ``<name>_<sha256[:20]>.py`` modules, Numba's ``__pycache__/<stem>.*``,
use markers ``access/e-<key>`` and ``access/m-<stem>``), and nothing of ``cache.py`` itself:
this module is below ``cache``, which bounds the directory after each write, so every function
takes the directory, or a function giving it (``cache_admin`` supplies ``cache.cache_dir``).

Guarantees:
    * ``scan(root)`` sorts every file into units: an *entry* (its JSON and, shared, the source
      it names), a *module* (its ``.py`` and all of Numba's files whose name starts with its
      stem, even where the ``.py`` is gone), an orphan *source* (named by no entry), a *temp*
      file (a writer's ``.tmp``, Numba's ``.tmp.<uid>``); everything else (``CACHEDIR.TAG``,
      ``cost_weights.json``, markers) is *other* and is never evicted. A unit's last use is its
      marker's mtime, else its newest file's.
    * ``info(root)``: ``CacheInfo`` (entries, modules, bytes of each, total).
    * ``prune(max_bytes, root=)`` removes temp files older than an hour, markers of units
      that are gone, then whole units, least recently used first, until the units and the other files
      together take at most ``max_bytes`` (or no unit is left but those in ``protect``). A
      source shared by entries goes with the last of them.
    * Safe beside other processes: only ``os.unlink`` of single files (an entry before its
      source, a module's ``.py`` before Numba's files), each ``FileNotFoundError`` ignored; a
      reader that loses a file finds a miss and compiles again (``cache.load``,
      ``build``, ``cache_faults.GuardedNumbaCache``), a writer's files reappear whole
      (atomic renames) and are accounted at the next prune.
    * ``bound_size(root, protect)``: where ``$COARSEN_CACHE_MAX_BYTES`` is set (bytes, or with a
      ``K``/``M``/``G`` suffix, powers of 1024), prunes to it; called after each write; never
      raises (a bad value warns once).
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cache_faults import warn_once

__all__ = ["MARKERS", "Unit", "Scan", "CacheInfo", "PruneResult", "scan", "info", "prune",
           "bound_size", "parse_size"]

#: the folder of use markers (``access/e-<key>``, ``access/m-<module stem>``)
MARKERS = "access"
MAX_BYTES_ENV = "COARSEN_CACHE_MAX_BYTES"
TEMP_GRACE_SECONDS = 3600.0
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MODULE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*_[0-9a-f]{20})\.py")
_TEMP = re.compile(r"(^\..*\.tmp$)|(\.tmp\.[0-9a-f]+$)")


@dataclass
class Unit:
    """Files evicted together; ``shared`` sources go once no remaining entry names them."""
    kind: str                           # "entry", "module", "source" or "temp"
    name: str                           # the key, the module stem, the digest or the file name
    files: list[Path] = field(default_factory=list)
    nbytes: int = 0
    newest: float = 0.0                 # the newest mtime of its files
    used: float | None = None           # the marker's mtime, where there is one
    source: str | None = None           # an entry's source digest

    @property
    def marker(self) -> str | None:
        return {"entry": f"e-{self.name}", "module": f"m-{self.name}"}.get(self.kind)

    @property
    def last_used(self) -> float:
        return self.newest if self.used is None else self.used

    def add(self, path: Path, st: os.stat_result) -> None:
        self.files.append(path)
        self.nbytes += st.st_size
        self.newest = max(self.newest, st.st_mtime)


@dataclass
class Scan:
    root: Path
    units: list[Unit]
    sources: dict[str, tuple[Path, int]]        # digest -> (path, bytes) of entries' sources
    markers: dict[str, tuple[Path, int]]        # marker name -> (path, bytes)
    other_files: int
    other_bytes: int

    @property
    def total_bytes(self) -> int:
        return (sum(u.nbytes for u in self.units) + sum(b for _, b in self.sources.values())
                + sum(b for _, b in self.markers.values()) + self.other_bytes)


@dataclass(frozen=True)
class CacheInfo:
    directory: Path
    entries: int
    entry_bytes: int                    # entries and the sources they name (and orphans)
    modules: int
    module_bytes: int                   # built modules and Numba's machine code
    other_files: int                    # temp files, markers, CACHEDIR.TAG, cost weights
    other_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class PruneResult:
    directory: Path
    removed_units: int
    removed_bytes: int
    total_bytes: int


def _files(folder: Path):
    """(path, stat) of the regular files directly in ``folder`` (none if it is missing)."""
    try:
        it = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    with it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if e.is_file(follow_symlinks=False) or e.is_symlink():
                yield Path(e.path), st


def _entry_source(path: Path) -> str | None:
    try:
        digest = json.loads(path.read_bytes().decode("utf-8")).get("source_sha256")
    except (OSError, ValueError, AttributeError):
        return None
    return digest if isinstance(digest, str) and _HEX64.fullmatch(digest) else None


def scan(root: Path) -> Scan:
    """Every file under ``root``, sorted into units (module docstring)."""
    units: dict[tuple[str, str], Unit] = {}
    other_files = other_bytes = 0
    sources: dict[str, tuple[Path, int]] = {}
    markers: dict[str, tuple[Path, int]] = {}

    def unit(kind, name):
        return units.setdefault((kind, name), Unit(kind, name))

    def other(st):
        nonlocal other_files, other_bytes
        other_files += 1
        other_bytes += st.st_size

    for path, st in _files(root):
        m = _MODULE.fullmatch(path.name)
        if _TEMP.search(path.name):
            unit("temp", str(path)).add(path, st)
        elif m:
            unit("module", m.group(1)).add(path, st)
        else:
            other(st)
    for path, st in _files(root / "__pycache__"):
        stem = path.name.split(".", 1)[0]
        if _TEMP.search(path.name):
            unit("temp", str(path)).add(path, st)
        elif _MODULE.fullmatch(stem + ".py"):
            unit("module", stem).add(path, st)
        else:
            other(st)
    for path, st in _files(root / "entries"):
        if _TEMP.search(path.name):
            unit("temp", str(path)).add(path, st)
        elif path.suffix == ".json" and _HEX64.fullmatch(path.stem):
            u = unit("entry", path.stem)
            u.add(path, st)
            u.source = _entry_source(path)
        else:
            other(st)
    named = {u.source for u in units.values() if u.kind == "entry"}
    for path, st in _files(root / "sources"):
        if _TEMP.search(path.name):
            unit("temp", str(path)).add(path, st)
        elif path.suffix == ".py" and _HEX64.fullmatch(path.stem):
            if path.stem in named:
                sources[path.stem] = (path, st.st_size)
            else:
                unit("source", path.stem).add(path, st)
        else:
            other(st)
    for path, st in _files(root / MARKERS):
        markers[path.name] = (path, st.st_size)
    for u in units.values():
        if u.marker in markers:
            try:
                u.used = os.stat(markers[u.marker][0]).st_mtime
            except FileNotFoundError:
                pass
    return Scan(root, list(units.values()), sources, markers, other_files, other_bytes)


def _unlink(path: Path) -> int:
    """Remove one file; its size, or 0 where it was gone already."""
    try:
        size = os.lstat(path).st_size
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return size


def _root(root) -> Path:
    return root() if callable(root) else root


def info(root) -> CacheInfo:
    """What the cache under ``root`` holds (module docstring; ``root``: a path, or a function
    giving it)."""
    s = scan(_root(root))
    by = {k: [u for u in s.units if u.kind == k] for k in ("entry", "module", "source", "temp")}
    temp = sum(u.nbytes for u in by["temp"])
    return CacheInfo(
        directory=s.root,
        entries=len(by["entry"]),
        entry_bytes=sum(u.nbytes for u in by["entry"] + by["source"])
        + sum(b for _, b in s.sources.values()),
        modules=len(by["module"]),
        module_bytes=sum(u.nbytes for u in by["module"]),
        other_files=s.other_files + len(by["temp"]) + len(s.markers),
        other_bytes=s.other_bytes + temp + sum(b for _, b in s.markers.values()),
        total_bytes=s.total_bytes,
    )


def prune(max_bytes: int, *, root, protect=(), now: float | None = None) -> PruneResult:
    """Evict least-recently-used units until the cache under ``root`` (a path, or a function
    giving it) takes at most ``max_bytes``."""
    if max_bytes < 0:
        raise ValueError("prune: max_bytes must be >= 0")
    s = scan(_root(root))
    now = time.time() if now is None else now
    total = s.total_bytes
    removed_units = removed_bytes = 0
    refs: dict[str, int] = {}
    for u in s.units:
        if u.kind == "entry" and u.source in s.sources:
            refs[u.source] = refs.get(u.source, 0) + 1
    live = {u.marker for u in s.units}
    for name, (path, _) in s.markers.items():
        if name not in live:
            total -= _unlink(path)      # the marker of a unit that is gone
    for u in s.units:
        if u.kind == "temp" and now - u.newest > TEMP_GRACE_SECONDS:
            freed = sum(_unlink(p) for p in u.files)
            total, removed_bytes = total - freed, removed_bytes + freed
    keep = set(protect)
    order = sorted((u for u in s.units if u.kind != "temp" and u.marker not in keep),
                   key=lambda u: (u.last_used, u.kind, u.name))
    for u in order:
        if total <= max_bytes:
            break
        freed = sum(_unlink(p) for p in u.files)     # entry json first, module .py first
        if u.kind == "entry" and u.source in refs:
            refs[u.source] -= 1
            if refs[u.source] == 0:
                freed += _unlink(s.sources[u.source][0])
        if u.marker is not None and u.marker in s.markers:
            freed += _unlink(s.markers[u.marker][0])
        total, removed_bytes, removed_units = total - freed, removed_bytes + freed, removed_units + 1
    return PruneResult(s.root, removed_units, removed_bytes, max(total, 0))


def parse_size(text: str) -> int:
    """``"123"``, ``"500K"``, ``"2M"``, ``"1G"`` (powers of 1024) as a number of bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", str(text), re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a size in bytes: {text!r} (e.g. 500000000, 500M, 2G)")
    return int(m.group(1)) * 1024 ** " KMG".index((m.group(2) or " ").upper())


def bound_size(root, protect=()) -> None:
    """Prune the cache under ``root`` (a function giving the directory, called only where the
    bound is set) to ``$COARSEN_CACHE_MAX_BYTES`` (module docstring); never raises."""
    text = os.environ.get(MAX_BYTES_ENV)
    if not text:
        return
    try:
        limit = parse_size(text)
    except ValueError as exc:
        warn_once(f"max-bytes:{text}", f"coarsen: ignoring {MAX_BYTES_ENV}: {exc}")
        return
    try:
        prune(limit, root=root(), protect=protect)
    except Exception:  # noqa: BLE001 - the bound is best effort; the next write tries again
        pass
