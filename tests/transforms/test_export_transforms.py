"""export() of coarsen.jvp, coarsen.jacobian and coarsen.hessian (coarsen.transforms.export_sweeps):
standalone modules defining jvp_<f>, jacobian_<f>, hessian_<f> and hvp_<f>, bit-identical to
the in-process transforms, importable without coarsen (checked in a subprocess where
``import coarsen`` fails)."""
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

_TABLE = np.array([[1.0, -0.5], [0.25, 2.0], [math.pi, 0.125]])


def table_energy(x, c):
    s = 0.0
    for i in range(_TABLE.shape[0]):
        s += _TABLE[i, 0] * math.sin(c * x[i]) + _TABLE[i, 1] * x[i] * x[i] * c
    return s


def two_outputs(x, a):
    out = np.zeros(2)
    out[0] = x[0] * x[1] * a
    out[1] = math.sin(x[0]) + x[2] * x[2]
    return out


def polar(r, theta):
    return r * math.cos(theta), r * math.sin(theta), r * r


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    old = os.environ.get("COARSEN_CACHE_DIR")
    os.environ["COARSEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("coarsen_cache_export_tr"))
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
    """Bit-identical results of the same types (floats, arrays, tuples)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_exported_transforms_are_bit_identical_and_run_without_coarsen(tmp_path):
    x = np.array([0.4, -1.1, 0.7])
    x32 = x.astype(np.float32)
    jv = coarsen.jvp(table_energy)
    jac = coarsen.jacobian(two_outputs, wrt="x", mode="forward")
    tup = coarsen.jacobian(polar, mode="forward", target="python")
    hes = coarsen.hessian(table_energy)
    hx = coarsen.hessian(table_energy, wrt="x")
    hvp = coarsen.hvp(table_energy)
    jac2 = coarsen.jacobian(two_outputs, wrt="x", mode="forward", directions=2)
    # (transform, exported function, arguments as called in process, in the module)
    cases = [
        (jv, "jvp_table_energy", [((x, 0.3), {"tangents": (np.ones(3), 0.5)})]),
        (jac, "jacobian_two_outputs", [((x, 0.3), {}), ((x32, 2.0), {})]),
        (tup, "jacobian_polar", [((1.3, 0.7), {})]),
        (hes, "hessian_table_energy", [((x, 0.3), {})]),
        (hx, "hessian_table_energy", [((x, 0.3), {}), ((x32, np.float64(0.2)), {})]),
        (jac2, "jacobian_two_outputs", [((x, 0.3), {})]),     # 3 columns in blocks of 2
        (hvp, None, []),
    ]
    expected, names = [], []
    for k, (t, fname, sets) in enumerate(cases):
        if fname is None:
            continue
        t(*sets[0][0], **sets[0][1])            # the export's default signature
        name = f"exported_tr_{k}"
        path = t.export(tmp_path / f"{name}.py")
        text = path.read_text()
        tree = ast.parse(text)
        mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
        mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert mods <= {"math", "numpy", "numba"}
        assert f"def {fname}(" in text and f"coarsen {coarsen.__version__}" in text
        assert t.src.filename not in text
        expected.append([t(*a, **kw) for a, kw in sets])
        names.append((name, fname, [a + tuple(kw.values()) for a, kw in sets]))
    # hvp from the Hessian's module, as coarsen.hvp gives it
    v = (np.array([0.2, -0.1, 0.4]), 0.7)
    expected.append([hvp(x, 0.3, v)])
    names.append(("exported_tr_3", "hvp_table_energy", [(x, 0.3, v)]))
    assert "_MODULE_ARRAYS = (" in (tmp_path / "exported_tr_3.py").read_text()
    with open(tmp_path / "cases.pkl", "wb") as fh:
        pickle.dump(names, fh)
    child = textwrap.dedent("""
        import pickle, sys
        sys.modules["coarsen"] = None          # coarsen is absent: importing it fails
        import importlib
        names = pickle.load(open("cases.pkl", "rb"))
        out = []
        for name, fname, sets in names:
            fn = getattr(importlib.import_module(name), fname)
            out.append([fn(*a) for a in sets])
        assert not any(m == "coarsen" or m.startswith("coarsen.") for m in sys.modules
                       if sys.modules[m])
        pickle.dump(out, open("results.pkl", "wb"))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(tmp_path / "results.pkl", "rb") as fh:
        got = pickle.load(fh)
    assert len(got) == len(expected)
    for exp_case, got_case in zip(expected, got):
        for e, g in zip(exp_case, got_case):
            assert _same(e, g), (e, g)
    # the layouts: JAX's nested tuple, a tuple result's tuple, floats for scalars
    H = got[3][0]
    assert len(H) == 2 and H[0][0].shape == (3, 3) and isinstance(H[1][1], float)
    assert isinstance(got[2][0], tuple) and len(got[2][0]) == 3
    assert got[1][0].shape == (2, 3)


def test_export_needs_a_signature_and_checks_arguments(tmp_path):
    hx = coarsen.hessian(table_energy, wrt="x", target="python")
    with pytest.raises(coarsen.CoarsenError, match="no signature given"):
        hx.export(tmp_path / "h.py")
    path = hx.export(tmp_path / "h.py", signature="float64[:], float64")
    mod = _import_path(path, "exported_tr_checks")
    x = np.array([0.4, -1.1, 0.7])
    assert _same(mod.hessian_table_energy(x, 0.3), hx(x, 0.3))
    with pytest.raises(TypeError, match="must be an array"):
        mod.hessian_table_energy(0.4, 0.3)
    with pytest.raises(ValueError, match="shape"):
        mod.hvp_table_energy(x, 0.3, np.ones(2))
    j = coarsen.jvp(table_energy, wrt="c", target="python")
    mod = _import_path(j.export(tmp_path / "j.py", signature="float64[:], float64"),
                       "exported_tr_jvp")
    assert _same(mod.jvp_table_energy(x, 0.3, 1.0), j(x, 0.3, tangents=1.0))
