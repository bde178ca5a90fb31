"""Export (coarsen.transforms.export): standalone modules with g's calling convention, bit-identical
gradients, importable without coarsen (checked in a subprocess where ``import coarsen`` fails)."""
import ast
import importlib.util
import math
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import coarsen
from coarsen import examples as ex
from coarsen.transforms.export import parse_signature

_TABLE = np.array([[1.0, -0.5], [0.25, 2.0], [math.pi, 1e-300]])


def table_energy(x, c):
    s = 0.0
    for i in range(_TABLE.shape[0]):
        s += _TABLE[i, 0] * math.sin(c * x[i]) + _TABLE[i, 1] * x[i] * x[i]
    return s


def sq_dist(w, x, lam, n):
    s = 0.0
    for j in range(n):
        d = x[j] - w[j]
        s += d * d * math.exp(-lam * j)
    return s + lam * w[0] * w[0]


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    old = os.environ.get("COARSEN_CACHE_DIR")
    os.environ["COARSEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("coarsen_cache_export"))
    yield
    if old is None:
        os.environ.pop("COARSEN_CACHE_DIR", None)
    else:
        os.environ["COARSEN_CACHE_DIR"] = old


def _import_path(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same(a, b):
    """Bit-identical results of the same types (floats, float32/float64 arrays, tuples)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_parse_signature():
    assert parse_signature("float64[:], float64[:, :], int64") == [("float64", 1), ("float64", 2), ("int64", 0)]
    assert parse_signature("(float32[::1], bool, boolean, float64[:, ::1], int32[:])") == [
        ("float32", 1), ("bool", 0), ("bool", 0), ("float64", 2), ("int32", 1)]
    assert parse_signature(("float64", "int64")) == [("float64", 0), ("int64", 0)]
    with pytest.raises(coarsen.CoarsenError, match="cannot read the type"):
        parse_signature("float64, complex128")
    with pytest.raises(coarsen.CoarsenError, match="dimensions"):
        parse_signature("float64[1:3]")
    with pytest.raises(coarsen.CoarsenError, match="has 2 types but the function has 3"):
        parse_signature("float64, float64", 3)


def test_exported_modules_are_bit_identical_and_run_without_coarsen(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=3)
    w32 = rng.normal(size=5).astype(np.float32)
    xs = rng.normal(size=5)
    cases = [
        # (gradient, signature, argument sets)
        (coarsen.differentiate(ex.logistic_map, wrt="r"), "float64, float64, int64",
         [(3.7, 0.3, 12), (2.9, np.float64(0.6), np.int32(40))]),
        (coarsen.differentiate(sq_dist, wrt=("w", "lam")), "float32[:], float64[:], float64, int64",
         [(w32, xs, 0.1, 5), (w32.astype(np.float64), xs, 0.2, 3)]),
        (coarsen.differentiate(table_energy), "float64[:], float64", [(x, 0.7)]),
    ]
    expected, names = [], []
    for k, (g, sig, sets) in enumerate(cases):
        name = f"exported_{k}"
        path = g.export(tmp_path / f"{name}.py", signature=sig)
        text = path.read_text()
        # only math, numpy and numba are imported
        mods = {a.name.split(".")[0] for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)}
        assert mods <= {"math", "numpy", "numba"}
        fname = g.fn.__name__
        assert f"def value_and_grad_{fname}(" in text and f"def grad_{fname}(" in text
        assert f"signature: ({sig})" in text and f"coarsen {coarsen.__version__}" in text
        # the source file relative to its package, never the absolute path (tests/transforms/test_api_edges.py)
        assert f"{os.path.basename(g.src.filename)}:{g.src.node.lineno}" in text
        assert g.src.filename not in text
        expected.append([(g.value_and_grad(*a), g(*a)) for a in sets])
        names.append((name, fname, sets))
    with open(tmp_path / "cases.pkl", "wb") as fh:
        pickle.dump(names, fh)
    child = textwrap.dedent("""
        import pickle, sys
        sys.modules["coarsen"] = None          # coarsen is absent: importing it fails
        try:
            import coarsen
        except ImportError:
            pass
        else:
            raise SystemExit("coarsen imported")
        import importlib
        names = pickle.load(open("cases.pkl", "rb"))
        out = []
        for name, fname, sets in names:
            mod = importlib.import_module(name)
            vg, gr = getattr(mod, "value_and_grad_" + fname), getattr(mod, "grad_" + fname)
            out.append([(vg(*a), gr(*a)) for a in sets])
        assert not any(m == "coarsen" or m.startswith("coarsen.") for m in sys.modules if sys.modules[m])
        pickle.dump(out, open("results.pkl", "wb"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "results.pkl", "rb") as fh:
        got = pickle.load(fh)
    for exp_case, got_case in zip(expected, got):
        for (e_vg, e_g), (g_vg, g_g) in zip(exp_case, got_case):
            assert _same(e_vg, g_vg), (e_vg, g_vg)
            assert _same(e_g, g_g)
    # the single-wrt convention, the float32 cast back and the module-level array
    assert isinstance(got[0][0][1], float)
    assert got[1][0][1][0].dtype == np.float32 and got[1][1][1][0].dtype == np.float64
    assert "_MODULE_ARRAYS = (" in (tmp_path / "exported_2.py").read_text()


def test_default_signature_is_the_last_call_and_errors(tmp_path):
    g = coarsen.differentiate(ex.logistic_map, wrt=("r", "x0"), target="python")
    with pytest.raises(coarsen.CoarsenError, match="not been called"):
        g.export(tmp_path / "never.py")
    g(3.1, 0.2, 7)
    path = g.export(tmp_path / "last_call.py")
    text = path.read_text()
    assert "signature: (float64, float64, int64)" in text
    assert "numba" not in text.split("# ----")[0].split("\n\n", 1)[1]  # target python: no numba
    mod = _import_path(path, "last_call_mod")
    assert _same(mod.value_and_grad_logistic_map(3.1, 0.2, 7), g.value_and_grad(3.1, 0.2, 7))
    assert _same(mod.grad_logistic_map(3.3, 0.25, 9), g(3.3, 0.25, 9))
    with pytest.raises(TypeError, match="must be an int"):
        mod.grad_logistic_map(3.1, 0.2, 7.5)
    with pytest.raises(TypeError, match="exported for float64"):
        mod.grad_logistic_map(np.ones(2), 0.2, 7)
    with pytest.raises(coarsen.CoarsenError, match="has 2 types"):
        g.export(tmp_path / "bad.py", signature="float64, float64")
    with pytest.raises(coarsen.CoarsenError, match="does not exist"):
        g.export(tmp_path / "missing_dir" / "x.py", signature="float64, float64, int64")


def test_export_of_arrays_checks_rank_and_keeps_dtypes(tmp_path):
    g = coarsen.differentiate(sq_dist, wrt="w", target="python")
    path = g.export(tmp_path / "sq.py", signature="float64[:], float64[:], float64, int64")
    mod = _import_path(path, "sq_mod")
    w = np.linspace(0, 1, 4).astype(np.float32)
    xs = np.ones(4)
    assert _same(mod.grad_sq_dist(w, xs, 0.5, 4), g(w, xs, 0.5, 4))
    with pytest.raises(TypeError, match="2-d array"):
        mod.grad_sq_dist(np.ones((2, 2)), xs, 0.5, 4)
    with pytest.raises(TypeError, match="must be an array"):
        mod.grad_sq_dist(1.0, xs, 0.5, 4)


def scaled(x, _scale=2.0, n=3, flip=False):
    s = 0.0
    for i in range(n):
        s += _scale * x[i % x.shape[0]] ** 2
    return -s if flip else s


def shadowing(x_bar, np=2.0):
    return x_bar[0] * np


def test_exported_wrappers_take_the_arguments_g_takes(tmp_path):
    # the wrappers took the IR's names without defaults: grad_scaled(x) raised TypeError
    # (missing arguments) and _scale was u_scale (found by a probe)
    import inspect
    x = np.array([1.0, 2.0])
    g = coarsen.differentiate(scaled, wrt="x")
    g(x)
    mod = _import_path(g.export(str(tmp_path / "scaled_grad.py")) or str(tmp_path / "scaled_grad.py"),
                       "scaled_grad")
    assert str(inspect.signature(mod.grad_scaled)) == "(x, _scale=2.0, n=3, flip=False)"
    assert _same(mod.grad_scaled(x), g(x))
    assert _same(mod.value_and_grad_scaled(x, _scale=3.0, flip=True),
                 g.value_and_grad(x, _scale=3.0, flip=True))
    # a parameter that would shadow what the wrappers read keeps the escaped name
    h = coarsen.differentiate(shadowing, wrt="x_bar")
    h(x)
    mod2 = _import_path(h.export(str(tmp_path / "shadow_grad.py")) or str(tmp_path / "shadow_grad.py"),
                        "shadow_grad")
    assert _same(mod2.grad_shadowing(x, 3.0), h(x, 3.0))
    # each name on its own: x_bar stays x_bar (one shadowing name took the IR's for all)
    assert str(inspect.signature(mod2.grad_shadowing)) == "(x_bar, np_v=2.0)"
