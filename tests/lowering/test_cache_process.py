"""The on-disk cache across processes: a second process gets the gradient without re-running the
symbolic stage; editing the function's source gives new code; clear_cache() empties the cache.

Each child process imports a function from a file in a temporary folder, with a private
COARSEN_CACHE_DIR, and wraps ``coarsen.transforms.gradient.differentiate_ir`` (the symbolic and reverse-mode
stage) to count its calls; it prints the count, the gradient and the generated source.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

SOURCE = '''\
import math


def spiral(a, x0, n):
    x = x0
    acc = 0.0
    for k in range(n):
        x = x + a * math.sin(x) * SCALE
        acc += x
    return acc
'''

CHILD = textwrap.dedent('''
    import json, sys
    import coarsen, coarsen.transforms.gradient
    calls = []
    real = coarsen.transforms.gradient.differentiate_ir
    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    coarsen.transforms.gradient.differentiate_ir = counting
    import fmod
    g = coarsen.differentiate(fmod.spiral)
    value, grad = g.value_and_grad(0.7, 0.3, 8)
    spec = g.specialize((0.7, 0.3, 8))
    print(json.dumps({"calls": len(calls), "value": value, "grad": list(grad), "source": spec.source,
                      "cached": spec.cached}))
''')


@pytest.fixture
def setup(tmp_path):
    cache = tmp_path / "cache"
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, COARSEN_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(work) + os.pathsep + env.get("PYTHONPATH", "")
    return work, cache, env


def child(work, env):
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=work, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write(work, scale):
    """The function's source with the constant ``scale`` written into it (an edit of the
    function itself, not of a module-level value)."""
    path = work / "fmod.py"
    path.write_text(SOURCE.replace("SCALE", repr(scale)))
    return path


def test_second_process_skips_the_symbolic_stage_edits_invalidate_and_clear_empties(setup, monkeypatch):
    work, cache, env = setup
    write(work, 0.5)
    first = child(work, env)
    assert first["calls"] == 1
    second = child(work, env)
    assert second["calls"] == 0                         # the symbolic stage did not run
    assert second["source"] == first["source"]
    assert second["value"] == first["value"] and second["grad"] == first["grad"]
    assert not first["cached"] and second["cached"]     # served from the disk cache
    # editing the function's source: new code, new numbers
    write(work, 0.25)
    edited = child(work, env)
    assert edited["calls"] == 1
    assert edited["source"] != first["source"] and "0.25" in edited["source"]
    assert edited["grad"] != first["grad"]
    # clear_cache() leaves only the cache tag; the next process starts from scratch
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(cache))
    from coarsen import lowering

    assert [p for p in cache.rglob("*") if p.is_file() and p.name != "CACHEDIR.TAG"]
    lowering.clear_cache()
    assert [p.name for p in cache.iterdir()] == ["CACHEDIR.TAG"]
    after = child(work, env)
    assert after["calls"] == 1
    assert after["grad"] == edited["grad"] and after["source"] == edited["source"]
