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
