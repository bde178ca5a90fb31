"""The cache's administration (issue 47): info, least-recently-used pruning, the size bound, and
``python -m coarsen cache info|clear|prune --max-bytes N``.

Use is recorded in markers (``access/e-<key>``, ``access/m-<stem>``), so the tests set the
markers' times explicitly where an order matters (no clocks are compared).
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from coarsen.lowering import CacheWarning, build, cache_key, load, store_source
from coarsen.lowering import cache_admin
from coarsen.lowering.cache import MARKERS, sha256_hex

CPU_SOURCE = '''\
import numba


@numba.njit(cache=True, error_model='numpy')
def total(x):
    return x.sum() * 2.0
'''
PY_SOURCE = "def twice(x):\n    return 2.0 * x\n"


def source(i, pad=0):
    return f"def grad(x):\n    return x * {i}.0, ({i}.0,)\n" + "# pad\n" * pad


def disk_bytes(root):
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file())


def set_used(root, marker, t):
    path = root / MARKERS / marker
    path.touch()
    os.utime(path, (t, t))


def test_info_counts_entries_modules_and_every_byte(own_cache):
    shared = source(1)
    store_source(cache_key(i=1), shared, {})
    store_source(cache_key(i=2), shared, {"same source": True})
    assert build(CPU_SOURCE, name="info_cpu", target="cpu").total(np.ones(3)) == 6.0
    build(PY_SOURCE, name="info_py", target="python")
    info = cache_admin.info()
    assert info.directory == own_cache
    assert (info.entries, info.modules) == (2, 2)
    assert info.total_bytes == disk_bytes(own_cache)
    assert info.entry_bytes + info.module_bytes + info.other_bytes == info.total_bytes
    assert any(p.suffix == ".nbc" for p in (own_cache / "__pycache__").iterdir())


def test_load_and_build_record_their_use(own_cache):
    key = cache_key(use=1)
    store_source(key, source(3), {})
    mod = build(PY_SOURCE, name="used", target="python")
    stem = os.path.basename(mod.__file__)[:-3]
    for marker in (f"e-{key}", f"m-{stem}"):
        set_used(own_cache, marker, 1.0)
    assert load(key) is not None
    build(PY_SOURCE, name="used", target="python")        # served from memory: still a use
    for marker in (f"e-{key}", f"m-{stem}"):
        assert os.stat(own_cache / MARKERS / marker).st_mtime > 1.0


def test_prune_evicts_least_recently_used_first(own_cache):
    keys = [cache_key(lru=i) for i in range(3)]
    for i, key in enumerate(keys):
        store_source(key, source(10 + i, pad=20), {})
    store_source(cache_key(lru="twin"), source(10, pad=20), {})   # shares keys[0]'s source
    mod = build(PY_SOURCE, name="lru_py", target="python")
    stem = os.path.basename(mod.__file__)[:-3]
    order = [f"e-{keys[1]}", f"m-{stem}", f"e-{keys[0]}", f"e-{cache_key(lru='twin')}",
             f"e-{keys[2]}"]
    for t, marker in enumerate(order):
        set_used(own_cache, marker, 1000.0 + t)
    entry1 = own_cache / "entries" / f"{keys[1]}.json"
    # just under the size: exactly the least recently used unit goes (entry 1 and its source)
    target = disk_bytes(own_cache) - 1
    result = cache_admin.prune(target)
    assert result.removed_units == 1 and result.total_bytes <= target
    assert not entry1.exists() and load(keys[1]) is None
    assert not (own_cache / "sources" / f"{sha256_hex(source(11, pad=20))}.py").exists()
    assert os.path.exists(mod.__file__) and (own_cache / "entries" / f"{keys[0]}.json").exists()
    # the module next; a source shared by two entries stays until both are gone
    cache_admin.prune(disk_bytes(own_cache) - 1)
    assert not os.path.exists(mod.__file__)
    cache_admin.prune(disk_bytes(own_cache) - 1)
    assert not (own_cache / "entries" / f"{keys[0]}.json").exists()
    assert load(cache_key(lru="twin")) is not None
    assert (own_cache / "sources" / f"{sha256_hex(source(10, pad=20))}.py").exists()
    result = cache_admin.prune(0)
    assert result.total_bytes == disk_bytes(own_cache)
    info = cache_admin.info()
    assert (info.entries, info.modules) == (0, 0)
    assert sorted(p.name for p in own_cache.rglob("*") if p.is_file()) == ["CACHEDIR.TAG"]


def test_max_bytes_keeps_the_cache_bounded_after_each_write(own_cache, monkeypatch):
    store_source(cache_key(bound=-1), source(0), {})
    one = disk_bytes(own_cache)
    limit = 4 * one
    monkeypatch.setenv("COARSEN_CACHE_MAX_BYTES", str(limit))
    keys = [cache_key(bound=i) for i in range(12)]
    for i, key in enumerate(keys):
        store_source(key, source(i), {"i": i})
        set_used(own_cache, f"e-{key}", 1000.0 + i)          # an unambiguous order of use
        assert disk_bytes(own_cache) <= limit
    assert load(keys[-1]) == (source(11), {"i": 11})
    assert load(keys[0]) is None
    monkeypatch.setenv("COARSEN_CACHE_MAX_BYTES", "lots")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store_source(cache_key(bound="x"), source(99, pad=500), {})
    assert any("COARSEN_CACHE_MAX_BYTES" in str(w.message) for w in caught
               if issubclass(w.category, CacheWarning))
    assert disk_bytes(own_cache) > limit                      # ignored, not guessed


def test_parse_size():
    assert cache_admin.parse_size("123") == 123
    assert cache_admin.parse_size("2K") == 2048
    assert cache_admin.parse_size("500M") == 500 * 1024 ** 2
    assert cache_admin.parse_size("1GiB") == 1024 ** 3
    with pytest.raises(ValueError):
        cache_admin.parse_size("-1")


def test_command_line(own_cache, tmp_path, capsys, monkeypatch):
    store_source(cache_key(cli=1), source(1), {})
    build(PY_SOURCE, name="cli_py", target="python")
    assert cache_admin.main(["info"]) == 0
    out = capsys.readouterr().out
    assert str(own_cache) in out and "entries: 1 " in out and "modules: 1 " in out
    assert cache_admin.main(["prune", "--max-bytes", "0"]) == 0
    assert "removed 2 entries and modules" in capsys.readouterr().out
    store_source(cache_key(cli=2), source(2), {})
    assert cache_admin.main(["clear"]) == 0
    assert os.listdir(own_cache) == ["CACHEDIR.TAG"]
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(blocker / "cache"))
    assert cache_admin.main(["info"]) == 1
    assert "a_file" in capsys.readouterr().err
    # through python -m coarsen
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(own_cache))
    proc = subprocess.run([sys.executable, "-m", "coarsen", "cache", "info"], capture_output=True,
                          text=True, timeout=240, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert f"cache directory: {own_cache}" in proc.stdout and "entries: 0 " in proc.stdout
