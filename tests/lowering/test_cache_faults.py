"""Cache faults in one process (issue 47): a damaged or unwritable cache never breaks a program.

Every cache file kind, truncated to half and overwritten with garbage: coarsen's entries,
sources and built modules, Numba's ``.nbi`` index and ``.nbc`` data. Each is treated as absent:
discarded, named in one ``CacheWarning``, rebuilt, and the next use finds the cache whole. A
location that cannot be created or written falls back to a per-process temporary directory.
A "new process" is simulated by dropping the built module from ``sys.modules`` (``build`` then
executes it again, and Numba's new dispatchers read their disk cache).

The tests may run as root, for whom a mode-0o500 directory is writable: an unwritable location
is then made a path under a regular file, a folder the cache needs replaced by a file, a
module file replaced by a folder (the chmod variant runs where the user is not root).
"""
import os
import sys
import threading
import warnings

import numpy as np
import pytest

from coarsen.lowering import CacheWarning, build, cache_dir, cache_key, load, module_path, store_source
from coarsen.lowering.cache import configured_dir, sha256_hex
from coarsen.lowering.shared_helpers import module_name

CPU_SOURCE = '''\
import math

import numba
import numpy as np


@numba.njit(cache=True, error_model='numpy')
def wave(x, k):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += math.sin(k * x[i]) * x[i]
    return acc
'''

PY_SOURCE = "def twice(x):\n    return 2.0 * x\n"
GRAD_SOURCE = "import math\n\n\ndef grad(x):\n    return math.sin(x), (math.cos(x),)\n"
X = np.linspace(0.0, 1.0, 7)


def damage(path, how):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if how == "truncate" else b"\x00garbage\xff" * 4)


def fresh_build(source, name, target="cpu"):
    """``build`` as a new process would: the module is executed again from its file."""
    sys.modules.pop(module_name(source, name), None)
    return build(source, name=name, target=target)


def cache_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


@pytest.mark.parametrize("how", ["truncate", "garbage"])
@pytest.mark.parametrize("kind", ["nbi", "nbc"])
def test_damaged_numba_file_is_recompiled_and_named(own_cache, kind, how):
    name = f"nb_{kind}_{how}"
    want = build(CPU_SOURCE, name=name, target="cpu").wave(X, 3.0)
    files = sorted(p for p in (own_cache / "__pycache__").iterdir()
                   if p.name.startswith(name) and p.name.endswith("." + kind))
    assert files
    for p in files:
        damage(p, how)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh_build(CPU_SOURCE, name).wave(X, 3.0) == want
    named = cache_warnings(caught)
    assert len(named) == len(files) and all(str(p) in " ".join(named) for p in files)
    # Numba wrote the files again: the next "process" loads its machine code, silently
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        again = fresh_build(CPU_SOURCE, name)
        assert again.wave(X, 3.0) == want
    assert sum(again.wave.stats.cache_hits.values()) == 1


@pytest.mark.parametrize("how", ["truncate", "garbage"])
@pytest.mark.parametrize("kind", ["entry", "source"])
def test_damaged_entry_or_source_is_a_named_miss(own_cache, kind, how):
    key = cache_key(kind=kind, how=how)
    store_source(key, GRAD_SOURCE, {"n": 1})
    path = (own_cache / "entries" / f"{key}.json" if kind == "entry"
            else own_cache / "sources" / f"{sha256_hex(GRAD_SOURCE)}.py")
    damage(path, how)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert load(key) is None
    assert [m for m in cache_warnings(caught) if str(path) in m]
    assert not path.exists()                     # discarded
    store_source(key, GRAD_SOURCE, {"n": 2})
    assert load(key) == (GRAD_SOURCE, {"n": 2})


@pytest.mark.parametrize("how", ["truncate", "garbage"])
def test_damaged_module_file_is_rewritten_and_named(own_cache, how):
    name = f"py_{how}"
    build(PY_SOURCE, name=name, target="python")
    path = module_path(PY_SOURCE, name=name)
    damage(path, how)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh_build(PY_SOURCE, name, target="python").twice(1.5) == 3.0
    assert [m for m in cache_warnings(caught) if str(path) in m]
    assert path.read_text() == PY_SOURCE


@pytest.mark.parametrize("where", ["env_under_file", "xdg_under_file", "read_only"])
def test_unusable_location_falls_back_to_a_temporary_directory(tmp_path, monkeypatch, where):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    if where == "env_under_file":
        monkeypatch.setenv("COARSEN_CACHE_DIR", str(blocker / "cache"))
    elif where == "xdg_under_file":
        monkeypatch.delenv("COARSEN_CACHE_DIR", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "xdg"))
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a mode-0o500 folder (the other cases cover it)")
        ro = tmp_path / "ro"
        ro.mkdir()
        os.chmod(ro, 0o500)
        monkeypatch.setenv("COARSEN_CACHE_DIR", str(ro / "cache"))
    wanted = configured_dir()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root = cache_dir()
        assert cache_dir() == root != wanted and root.is_dir()
        key = cache_key(where=where)
        store_source(key, GRAD_SOURCE, {"where": where})
        assert load(key) == (GRAD_SOURCE, {"where": where})
        mod = fresh_build(CPU_SOURCE, f"fallback_{where}")
        assert mod.wave(X, 3.0) == fresh_build(CPU_SOURCE, f"fallback_{where}").wave(X, 3.0)
        assert mod.__file__.startswith(str(root))
    named = cache_warnings(caught)
    assert len(named) == 1 and str(wanted) in named[0] and str(root) in named[0]


def test_folders_that_cannot_be_written(own_cache):
    cache_dir()
    (own_cache / "entries").write_text("a file where the entries folder belongs")
    key = cache_key(folder="entries")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store_source(key, GRAD_SOURCE, {})          # nothing stored, nothing raised
        assert load(key) is None
        path = module_path(PY_SOURCE, name="blocked")
        path.mkdir()                                 # the module file cannot be written
        mod = fresh_build(PY_SOURCE, "blocked", target="python")
        assert mod.twice(2.0) == 4.0 and mod.__file__ != str(path)
    named = cache_warnings(caught)
    assert [m for m in named if str(own_cache) in m and "cannot write" in m]
    assert [m for m in named if str(own_cache) in m and "cannot use" in m]


def test_threads_share_one_dispatcher_over_a_damaged_index(own_cache):
    name = "threads"
    want = build(CPU_SOURCE, name=name, target="cpu").wave(X, 2.0)
    (index,) = [p for p in (own_cache / "__pycache__").iterdir() if p.name.endswith(".nbi")]
    damage(index, "garbage")
    mod = fresh_build(CPU_SOURCE, name)
    results, errors = [], []
    start = threading.Barrier(8)

    def work():
        try:
            start.wait()
            for _ in range(200):
                results.append(mod.wave(X, 2.0))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert len(results) == 1600 and set(results) == {want}
    assert cache_warnings(caught) == [m for m in cache_warnings(caught) if str(index) in m]
    assert len(cache_warnings(caught)) == 1
