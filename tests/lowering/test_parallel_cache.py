"""A parallel (``numba.prange``) function's caller loaded from Numba's cache runs.

Numba's cache of a function compiled in a process where its ``parallel=True`` callee was
loaded from the cache crashed the next process that loaded it (a segmentation fault).  It
happened whenever the caller's cache entry was missing and the callee's was not: a gradient
module whose text changed (a new coarsen, other options) while its outlined parallel loop,
a shared helper named by the hash of its text, stayed the same; an entry evicted alone.  The
printer now writes ``cache=False`` on parallel functions (``lowering.targets``), so they are
compiled with their caller, whose cached code holds them.

Each child process imports ``par_loss`` from a file, differentiates it on the cpu target with
a private ``COARSEN_CACHE_DIR`` and prints its gradient.
"""
import glob
import json
import os
import subprocess
import sys
import textwrap

SOURCE = '''\
import numpy as np
from numba import prange


def par_loss(qs, a):
    t = 0.0
    for i in prange(qs.shape[0]):
        t += np.sin(a * qs[i]) ** 2
    return t
'''

CHILD = textwrap.dedent('''
    import json
    import numpy as np
    import coarsen
    import pmod
    g = coarsen.differentiate(pmod.par_loss, target="cpu")
    qs = np.linspace(0.3, 1.5, 7)
    gq, ga = g(qs, 2.0)
    print(json.dumps({"gq": list(gq), "ga": ga, "source": g.source_for(qs, 2.0)}))
''')


def _child(work, cache):
    env = dict(os.environ, COARSEN_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(work), os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                          cwd=str(work), timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_caller_compiled_beside_a_cached_parallel_function_loads_and_runs(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    (work / "pmod.py").write_text(SOURCE)
    first = _child(work, cache)
    # the parallel function is never cached: it is compiled with its caller
    decorators = [ln for ln in first["source"].splitlines()
                  if ln.startswith("@") and "parallel=True" in ln]
    assert decorators and all("cache=False" in ln for ln in decorators), decorators
    qs = [0.3 + 0.2 * k for k in range(7)]
    want_q = [2.0 * 2.0 * __import__("math").sin(2.0 * q) * __import__("math").cos(2.0 * q) for q in qs]
    assert max(abs(a - b) for a, b in zip(first["gq"], want_q)) < 1e-12
    # the caller's cache entry gone, the rest kept: the caller is compiled again (before the
    # change, beside a parallel function loaded from the cache), then loaded by a new process
    mains = glob.glob(str(cache / "**" / "*.value_and_grad_par_loss-*"), recursive=True)
    assert mains, os.listdir(cache)
    for p in mains:
        os.remove(p)
    second = _child(work, cache)
    third = _child(work, cache)
    assert second["gq"] == third["gq"] == first["gq"] and second["ga"] == third["ga"] == first["ga"]
