"""Cache faults across processes (issue 47), as a user meets them.

Each child process differentiates ``spiral`` (a loop) from a file in a temporary folder with a
private COARSEN_CACHE_DIR and prints its value, gradient and the ``CacheWarning``s it saw:
    * several processes compiling into one empty cache at once agree, leave one entry and no
      temporary files;
    * a cache whose files of every kind are damaged (Numba's ``.nbi`` truncated and ``.nbc``
      garbage, coarsen's entry and a module truncated) gives the same numbers, naming each file
      (every kind in both forms is in test_cache_faults.py, in one process);
    * a cache location under a regular file gives the same numbers from a temporary directory;
    * a process killed (SIGKILL) inside its first compile, while Numba writes its machine code,
      leaves a cache the next process uses;
    * 8 threads of this process share one gradient of ``spiral`` over a copy of that cache whose
      machine code is garbage, through the switch to direct calls (1,024 calls);
    * ``cache_admin.prune(0)`` running over and over while another process loads, builds and
      calls cached code never makes that process fail.
"""
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

import coarsen
from coarsen.lowering import CacheWarning, cache_admin

SOURCE = '''\
import math


def spiral(a, x0, n):
    x = x0
    acc = 0.0
    for k in range(n):
        x = x + a * math.sin(x) * 0.5
        acc += x
    return acc
'''

CHILD = textwrap.dedent('''
    import json, os, signal, sys, warnings
    if sys.argv[1:] == ["kill"]:
        # die the moment Numba renames its first machine-code file into place
        real = os.replace
        def replace(src, dst, *args, **kwargs):
            if str(dst).endswith(".nbc"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(src, dst, *args, **kwargs)
        os.replace = replace
    from coarsen.lowering import CacheWarning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        import coarsen
        import fmod
        g = coarsen.differentiate(fmod.spiral)
        value, grad = g.value_and_grad(0.7, 0.3, 8)
    print(json.dumps({"value": value, "grad": list(grad),
                      "warnings": [str(w.message) for w in caught
                                   if issubclass(w.category, CacheWarning)]}))
''')


def start(work, cache, *args):
    env = dict(os.environ, COARSEN_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(work) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """Three processes compile ``spiral`` into one empty cache at the same time."""
    base = tmp_path_factory.mktemp("faults")
    work, cache = base / "work", base / "cache"
    work.mkdir()
    (work / "fmod.py").write_text(SOURCE)
    results = [finish(p) for p in [start(work, cache) for _ in range(3)]]
    return work, cache, results


def same_numbers(a, b):
    return a["value"] == b["value"] and a["grad"] == b["grad"]


def test_concurrent_writers_on_an_empty_cache(populated):
    work, cache, results = populated
    assert all(same_numbers(r, results[0]) and r["warnings"] == [] for r in results)
    info = cache_admin.info(cache)
    assert info.entries == 1 and info.modules >= 2
    assert [p for p in cache.rglob("*") if ".tmp" in p.name] == []


def test_damaged_files_of_every_kind(populated, tmp_path):
    work, cache, results = populated
    damaged = tmp_path / "cache"
    shutil.copytree(cache, damaged)
    # each damaged where this process reads it: the entry (truncated); the gradient-only
    # module's file (truncated; rewritten, so Numba would ignore files keyed to the old one);
    # the value-and-gradient module's machine code (garbage), which it loads, then compiles,
    # and so loads the index of each helper it calls (truncated)
    names = []
    for p in sorted(damaged.rglob("*")):
        kind = p.name.split(".", 1)[0].split("_")[0]
        if (p.suffix == ".json" or (p.suffix == ".py" and kind == "spiral" and "_grad_" in p.name)
                or (p.suffix == ".nbc" and kind == "spiral") or (p.suffix == ".nbi" and kind == "rt")):
            data = p.read_bytes()
            p.write_bytes(b"\x00garbage\xff" * 3 if p.suffix == ".nbc" else data[: len(data) // 2])
            names.append(p.name)
    assert {n.rsplit(".", 1)[1] for n in names} == {"nbi", "nbc", "json", "py"}
    out = finish(start(work, damaged))
    assert same_numbers(out, results[0])
    said = " ".join(out["warnings"])
    for suffix in (".nbi", ".nbc", ".json", ".py"):
        assert any(n.endswith(suffix) and n in said for n in names), suffix


def test_unwritable_location(populated, tmp_path):
    work, cache, results = populated
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    out = finish(start(work, blocker / "cache"))
    assert same_numbers(out, results[0])
    assert len(out["warnings"]) == 1 and "cannot use the cache directory" in out["warnings"][0]


def test_sigkill_during_the_first_compile_then_a_rerun(populated, tmp_path):
    work, cache, results = populated
    fresh = tmp_path / "cache"
    killed = start(work, fresh, "kill")
    killed.communicate(timeout=300)
    assert killed.returncode == -9
    assert list(fresh.rglob("*.nbi"))                  # it died with Numba's files half written
    out = finish(start(work, fresh))
    assert same_numbers(out, results[0]) and out["warnings"] == []


def test_threads_share_one_gradient_over_damaged_machine_code(populated, tmp_path, monkeypatch):
    work, cache, results = populated
    damaged = tmp_path / "cache"
    shutil.copytree(cache, damaged)
    data = [p for p in damaged.rglob("spiral_*.nbc")]
    assert data
    for p in data:
        p.write_bytes(b"\x00garbage\xff" * 3)
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(damaged))
    monkeypatch.syspath_prepend(str(work))
    saved = sys.modules.pop("fmod", None)
    try:
        g = coarsen.differentiate(importlib.import_module("fmod").spiral)
        got, errors = [], []
        gate = threading.Barrier(8)

        def work_():
            try:
                gate.wait()
                for _ in range(200):
                    got.append(tuple(g(0.7, 0.3, 8)))
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CacheWarning)
            threads = [threading.Thread(target=work_) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.modules.pop("fmod", None)
        if saved is not None:
            sys.modules["fmod"] = saved
    assert errors == [] and len(got) == 1600 and set(got) == {tuple(results[0]["grad"])}
    said = [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]
    assert said and all(any(p.name in m for p in data) for m in said)


READER = textwrap.dedent('''
    import sys, warnings
    import numpy as np
    from coarsen.lowering import CacheWarning, build, cache_key, load, store_source
    from coarsen.lowering.shared_helpers import module_name
    warnings.simplefilter("error", CacheWarning)
    x = np.arange(5.0)
    for i in range(int(sys.argv[1])):
        j = i % 3
        src = ("import numba\\n\\n\\n@numba.njit(cache=True)\\ndef f(x):\\n"
               f"    return x.sum() * {j + 2}.0\\n")
        hit = load(cache_key(reader=j))
        if hit is None:
            store_source(cache_key(reader=j), src, {"j": j})
        else:
            assert hit == (src, {"j": j}), hit
        sys.modules.pop(module_name(src, f"reader{j}"), None)    # read it as a new process
        assert build(src, name=f"reader{j}", target="cpu").f(x) == 10.0 * (j + 2)
    print("ok")
''')


def test_prune_while_another_process_reads(own_cache, run_python):
    # a first reader fills the cache, so the second starts from cached code
    run_python(READER.replace("range(int(sys.argv[1]))", "range(3)"))
    assert cache_admin.info(own_cache).modules == 3
    reader = subprocess.Popen([sys.executable, "-c", READER, "30"], env=dict(os.environ),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    removed = 0
    while reader.poll() is None:
        removed += cache_admin.prune(0).removed_units
        time.sleep(0.005)
    out, err = reader.communicate()
    assert reader.returncode == 0 and out.strip() == "ok", err
    assert removed > 0
