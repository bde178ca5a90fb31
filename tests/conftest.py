"""Shared pytest setup for the test suite.

The zoo of example functions lives in the package ``tests.zoo`` and the oracle in
``tests.oracle``; both are imported by their dotted names (the zoo's own modules import their
helpers as ``tests.zoo.helpers_mod``), so the repository root must be importable whichever way
pytest was started (``pytest`` from any folder, ``python -m pytest``, an IDE).
"""
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# plan="auto" chooses each segment's strategy with the cost model's weights, which coarsen
# calibrates once per machine (coarsen.analysis.costmodel): the tests use the documented
# defaults, so that what they generate does not depend on the machine they run on.
os.environ.setdefault("COARSEN_COST_WEIGHTS", "default")


# every module the suite generates is checked for compiler names with no generator or more
# than one (coarsen.ir.fresh_check): set before coarsen is imported, inherited by workers
os.environ.setdefault("COARSEN_CHECK_NAMES", "1")

# Numba compiles the generated modules at LLVM's -O1 in the tests (NUMBA_OPT=1), not the -O3
# users get: a third of the compile time, which is most of the suite's time.  The optimization
# level does not change what the code computes (no fast-math anywhere: LLVM keeps IEEE
# semantics at every level); tests/lowering/test_opt_levels.py compiles programs at -O3 in a
# fresh process and checks the same bits.  Set before Numba is imported, inherited by the
# workers and by the processes tests start.  The modules then go to a cache of their own
# (Numba's cache index does not key on the level): -O1 code never reaches the users' cache.
os.environ.setdefault("NUMBA_OPT", "1")
os.environ.setdefault("COARSEN_CACHE_DIR", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    f"coarsen-tests-O{os.environ['NUMBA_OPT']}"))
