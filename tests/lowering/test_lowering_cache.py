"""The keyed source cache: keys, store/load, hash checks, concurrent writers, clear_cache."""

import json
import math
import os
import subprocess
import sys

import pytest

from coarsen.lowering import (
    CacheSecurityError,
    LoweringError,
    build,
    cache_key,
    clear_cache,
    load,
    load_meta,
    load_source,
    store_source,
)
from coarsen.lowering.cache import sha256_hex

PARTS = dict(
    source_hash="abc",
    signature=["float64[:]", "int64"],
    options={"coarsen": True, "target": "cpu"},
    version="0.1.0",
)

GRAD_SOURCE = "import math\n\n\ndef grad(x):\n    return math.sin(x), (math.cos(x),)\n"


def test_cache_key_is_stable_and_canonical():
    key = cache_key(**PARTS)
    # Pinned: the key must not change between runs, processes or releases of this scheme.
    assert key == "6b6eeedf60539d289f735bd607427dab9d5db549fdac450fd3c908d5acc14ef0"
    reordered = dict(reversed(list(PARTS.items())))
    reordered["options"] = {"target": "cpu", "coarsen": True}
    assert cache_key(**reordered) == key
    assert cache_key(**{**PARTS, "signature": ("float64[:]", "int64")}) == key
    assert cache_key(**{**PARTS, "version": "0.1.1"}) != key
    assert cache_key(**{**PARTS, "options": {"coarsen": False, "target": "cpu"}}) != key
    assert cache_key(a=1) != cache_key(a="1") != cache_key(a=1.0)
    with pytest.raises(TypeError):
        cache_key(fn=object())
    with pytest.raises(TypeError):
        cache_key(x=float("nan"))


def test_store_and_load_round_trip(own_cache):
    key = cache_key(**PARTS)
    assert load_source(key) is None and load_meta(key) is None and load(key) is None
    meta = {"report": {"segments": 2, "closed_forms": ["loop at line 4"]}, "ok": True}
    store_source(key, GRAD_SOURCE, meta)
    assert load_source(key) == GRAD_SOURCE
    assert load_meta(key) == meta
    assert load(key) == (GRAD_SOURCE, meta)
    # Overwriting the key replaces both, consistently.
    store_source(key, GRAD_SOURCE + "\n", {"v": 2})
    assert load(key) == (GRAD_SOURCE + "\n", {"v": 2})
    with pytest.raises(LoweringError, match="invalid cache key"):
        load_source("../../etc/passwd")
    with pytest.raises(TypeError):
        store_source(key, GRAD_SOURCE, meta={"bad": object()})


def test_tampered_or_corrupt_entries_are_misses(own_cache):
    key = cache_key(**PARTS)
    store_source(key, GRAD_SOURCE, {"n": 1})
    blob = own_cache / "sources" / f"{sha256_hex(GRAD_SOURCE)}.py"
    blob.write_text(GRAD_SOURCE.replace("math.cos(x)", "-math.cos(x)"))
    assert load_source(key) is None and load_meta(key) is None
    blob.write_text(GRAD_SOURCE[:10])  # partial file
    assert load_source(key) is None
    store_source(key, GRAD_SOURCE, {"n": 1})  # storing again repairs the blob
    assert load_source(key) == GRAD_SOURCE
    entry = own_cache / "entries" / f"{key}.json"
    entry.write_text("{not json")
    assert load(key) is None
    other = cache_key(x=1)
    entry.write_text(json.dumps({"key": other, "source_sha256": sha256_hex(GRAD_SOURCE),
                                 "meta": {}}))
    assert load(key) is None  # an entry copied from another key is not trusted


WRITER = r"""
import sys
from coarsen.lowering import store_source, load
key, wid, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sources = {w: f"def grad(x):\n    return x * {w}.0, ({w}.0,)\n" + "# pad\n" * (200 * w) for w in range(4)}
for r in range(rounds):
    store_source(key, sources[wid], {"writer": wid, "round": r})
    hit = load(key)
    assert hit is not None, "a stored key vanished"
    src, meta = hit
    assert src == sources[meta["writer"]], "source and meta of different writers mixed"
print("ok")
"""


def test_concurrent_writers_same_key_do_not_corrupt(own_cache):
    key = cache_key(**PARTS)
    assert not own_cache.exists()  # the writers also race to create the directory itself
    env = dict(os.environ, COARSEN_CACHE_DIR=str(own_cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, key, str(w), "150"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(4)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    src, meta = load(key)
    wid = meta["writer"]
    assert meta["round"] == 149
    assert src.startswith(f"def grad(x):\n    return x * {wid}.0, ({wid}.0,)\n")
    assert src.count("# pad\n") == 200 * wid
    leftovers = [name for d in ("", "sources", "entries")
                 for name in os.listdir(own_cache / d) if name.endswith(".tmp")]
    assert leftovers == []


def test_second_process_gets_source_and_module_without_transforming(own_cache, run_python):
    key = cache_key(**PARTS)
    store_source(key, GRAD_SOURCE, {"report": "two segments"})
    code = (
        "from coarsen.lowering import load, build\n"
        f"src, meta = load({key!r})\n"
        "mod = build(src, name='grad', target='python')\n"
        "value, (g,) = mod.grad(0.5)\n"
        "print(repr(value), repr(g), meta['report'], mod.__file__)\n"
    )
    out = run_python(code, env_extra={"COARSEN_CACHE_DIR": str(own_cache)}).stdout.split()
    assert float(out[0]) == math.sin(0.5) and float(out[1]) == math.cos(0.5)
    assert out[2:4] == ["two", "segments"]
    assert out[4] == build(GRAD_SOURCE, name="grad", target="python").__file__


def test_clear_cache_empties_safely(own_cache, tmp_path):
    key = cache_key(**PARTS)
    store_source(key, GRAD_SOURCE, {})
    mod = build(GRAD_SOURCE, name="grad", target="python")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    os.symlink(outside, own_cache / "link_to_outside")
    os.symlink(outside, own_cache / "sources" / "nested_link")
    clear_cache()
    assert os.listdir(own_cache) == ["CACHEDIR.TAG"]
    assert (outside / "keep.txt").read_text() == "keep"  # symlinks were not followed
    assert load_source(key) is None
    assert not os.path.exists(mod.__file__)
    # The cache is usable again right away.
    store_source(key, GRAD_SOURCE, {"again": True})
    assert load_meta(key) == {"again": True}
    clear_cache()
    clear_cache()  # idempotent
    assert os.listdir(own_cache) == ["CACHEDIR.TAG"]


def test_clear_cache_refuses_unsafe_dir(tmp_path, monkeypatch):
    foreign = tmp_path / "not_a_cache"
    foreign.mkdir(mode=0o700)
    (foreign / "data.txt").write_text("x")
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(foreign))
    with pytest.raises(CacheSecurityError):
        clear_cache()
    assert (foreign / "data.txt").read_text() == "x"
