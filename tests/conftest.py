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


# Compiled fixtures shared across workers: the zoo's and the realistic programs'
# ``test_gradient`` and ``test_value_and_grad`` of one case, target and mode use the same
# cached gradient object (tests/zoo/harness.py); ``--dist loadgroup`` (pyproject.toml) keeps
# both on one pytest-xdist worker, so each such specialization is compiled once, not once per
# worker.
_PAIRED = {("test_zoo.py", "test_gradient"), ("test_zoo.py", "test_value_and_grad"),
           ("test_realistic.py", "test_gradient"), ("test_realistic.py", "test_value_and_grad")}


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        key = (os.path.basename(str(item.fspath)), name)
        callspec = getattr(item, "callspec", None)
        if key in _PAIRED and callspec is not None:
            item.add_marker(pytest.mark.xdist_group(f"{key[0]}::{callspec.id}"))
