"""Rough edges a new user meets first: the ``Report`` that ``g.report()`` returns echoes a short
repr at a REPL prompt (the plan itself is printed once), and ``target="cuda"`` with a numba-cuda
that cannot be imported is a ``CoarsenError`` saying what to install, not a traceback from inside
numba-cuda.  The import failures are simulated (a finder that raises for ``numba.cuda``), so
these checks need neither a GPU nor numba-cuda.
"""
import importlib.abc
import sys

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.transforms.batching import cuda as cuda_batch


def two_steps(x, a, n):
    s = x * a
    for i in range(n):
        s = s * a + x
    return s


def scalar_fn(x, c):
    return x * x * c


# ============================================================================ Report's repr

def test_report_repr_is_short_and_str_is_the_plan(capsys):
    g = coarsen.differentiate(two_steps, wrt="x", target="python")
    g(1.5, 0.5, 3)
    capsys.readouterr()
    rep = g.report()
    printed = capsys.readouterr().out
    assert printed.startswith("coarsen plan for two_steps(") and len(rep) >= 1
    n = len(rep)
    assert repr(rep) == f"<coarsen Report of two_steps: coarse, {n} segment{'' if n == 1 else 's'}>"
    assert "\n" not in repr(rep) and "segments=[" not in repr(rep)
    # print(rep), str(rep) and rep.format() are the full plan, the text g.report() printed
    assert str(rep) == rep.format() == printed.rstrip("\n")
    print(rep)
    assert capsys.readouterr().out == printed


def test_report_repr_fine_grained_and_singular():
    rep = coarsen.transforms.report.Report("f", ("float64",), False, [], 0.0)
    assert repr(rep) == "<coarsen Report of f: fine-grained, 0 segments>"
    rep = coarsen.transforms.report.Report("f", ("float64",), True, [{"segment": 1}], 0.0)
    assert repr(rep) == "<coarsen Report of f: coarse, 1 segment>"


# ============================================================= numba-cuda that fails to import

class _Refuse(importlib.abc.MetaPathFinder):
    """Makes importing ``name`` (and anything below it) raise ``exc``."""

    def __init__(self, name, exc):
        self.name, self.exc = name, exc

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name or fullname.startswith(self.name + "."):
            raise self.exc


def _refuse(monkeypatch, name, exc):
    import numba
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, mod)
    if name == "numba.cuda":
        monkeypatch.delattr(numba, "cuda", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Refuse(name, exc)] + sys.meta_path)


ROW_STACK = AttributeError("module 'numpy' has no attribute 'row_stack'")


def test_cuda_batch_with_numba_cuda_broken_by_numpy_says_what_to_install(monkeypatch):
    _refuse(monkeypatch, "numba.cuda", ROW_STACK)
    g = coarsen.differentiate(scalar_fn, target="python")
    bg = g.batch((0, None), target="cuda")
    with pytest.raises(CoarsenError) as info:
        bg(np.array([1.0, 2.0]), 3.0)
    err = info.value
    assert "failed to import with NumPy " + np.__version__ in err.problem
    assert "numba" in err.problem and "row_stack" in err.problem
    assert "numpy<2.5" in err.hint and "pip install 'numpy<2.5'" in err.hint
    assert "[cuda] extra" in err.hint and "target='cpu'" in err.hint
    assert isinstance(err.__cause__, AttributeError)


def test_numba_cuda_missing_pieces_get_the_install_hint(monkeypatch):
    _refuse(monkeypatch, "numba.cuda", ImportError("NVIDIA CUDA Python bindings not found"))
    with pytest.raises(CoarsenError) as info:
        cuda_batch.import_numba_cuda()
    assert "NVIDIA CUDA Python bindings not found" in info.value.problem
    assert "pip install -e '.[cuda]'" in info.value.hint and "numpy<2.5" not in info.value.hint


def test_numba_cuda_numpy_module_checked_outside_the_simulator(monkeypatch):
    """numba-cuda imports its NumPy support only at the first kernel compile: the guard imports
    it up front (not under the simulator, which does not need it)."""
    from numba import config
    _refuse(monkeypatch, "numba.cuda.np", ROW_STACK)
    monkeypatch.setattr(config, "ENABLE_CUDASIM", False)
    with pytest.raises(CoarsenError) as info:
        cuda_batch.import_numba_cuda()
    assert "row_stack" in info.value.problem and "numpy<2.5" in info.value.hint
    monkeypatch.setattr(config, "ENABLE_CUDASIM", True)
    assert cuda_batch.import_numba_cuda() is sys.modules["numba.cuda"]


def test_numba_cuda_guard_passes_a_working_numba_cuda():
    # Numba's built-in numba.cuda (no numba.cuda.np) or numba-cuda: imports without a GPU
    assert cuda_batch.import_numba_cuda() is sys.modules["numba.cuda"]
