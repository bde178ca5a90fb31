"""The suite compiles at LLVM -O1 (``NUMBA_OPT=1``, tests/conftest.py); users get Numba's -O3.

The level must not change what the generated code computes: no fast-math flag anywhere, so
LLVM keeps IEEE semantics at every level.  This test holds the suite to that: a fresh process
compiles programs of three kinds (reductions along an axis with a transcendental, a stencil
loop with a tape, matrix-vector products) at -O3 into an empty cache, and its values and
gradients must be the suite's, bit for bit (signs of zero included).  (All 25 kernels of the
arrays suite gave the same bits at both levels when the level was lowered; the three here keep
the check at a third of its cost.)
"""
import json
import os
import subprocess
import sys

import numpy as np

import coarsen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KERNELS = ("softmax", "heat-loop", "atax")

_CHILD = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import numba
assert int(numba.config.OPT) == int(sys.argv[1]), numba.config.OPT
import apps.arrays as AA, coarsen
out = {}
for name in sys.argv[2].split(","):
    m = AA.load(name)
    v, grads = coarsen.differentiate(m.objective, wrt=m.WRT).value_and_grad(*m.make_inputs("s"))
    out[name] = [np.asarray(v).tobytes().hex()] + [np.asarray(g).tobytes().hex() for g in grads]
print(json.dumps(out))
"""


def _bits(opt, tmp_path):
    env = dict(os.environ, NUMBA_OPT=str(opt), COARSEN_CACHE_DIR=str(tmp_path / f"cache{opt}"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _CHILD, str(opt), ",".join(KERNELS)], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_level_reached_numba():
    """Set before Numba was imported (else Numba would compile at its default)."""
    import numba
    assert int(numba.config.OPT) == int(os.environ["NUMBA_OPT"])


def test_o3_gives_the_bits_of_the_suites_level(tmp_path):
    import apps.arrays as AA
    here = {}
    for name in KERNELS:
        m = AA.load(name)
        v, grads = coarsen.differentiate(m.objective, wrt=m.WRT).value_and_grad(*m.make_inputs("s"))
        here[name] = [np.asarray(v).tobytes().hex()] + [np.asarray(g).tobytes().hex() for g in grads]
    assert _bits(3, tmp_path) == here
