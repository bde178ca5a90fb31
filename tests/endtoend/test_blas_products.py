"""Issue 45: float64 matrix products at BLAS sizes (``_bmm*`` helpers: Numba's ``np.dot``).

Below the crossover sizes the products are the loops the other tests cover; these programs
are above them (matrices of 40, vectors of 300), so every product and every adjoint product
runs in BLAS on the cpu target (NumPy's BLAS on the python target).  Covered: ``@`` and
``np.dot`` in every rank combination, transposed operands (their strides, read transposed by
BLAS), products of computed values, strided slices (copied to contiguous first: Numba's
``np.dot`` would warn and copy), integer operands (loops: Numba's ``np.dot`` takes floats
only), ``np.linalg.solve``'s adjoint (a product), reverse and forward mode.

Oracle: extended-precision directional derivatives along random directions
(``tests.oracle.fd_directional``; per-component differences would take minutes at these
sizes).  A wrong entry of any gradient moves ``sum(grad * direction)`` for almost every
direction.  Metamorphic: renamed variables and the products split into a helper give the same
bits; the cpu and python targets agree to rounding (different BLAS libraries).
"""
import importlib.util
import sys
import warnings

import numpy as np
import pytest

import coarsen
from tests.oracle import fd_directional

R = np.random.default_rng(45)
N = 40


def mm_chain(A, B, C, x):
    """Matrix products of parameters, transposes and computed values; matrix-vector too."""
    H = np.tanh(A @ B) @ C.T
    G = A.T @ (A * 0.5)
    v = H @ x + np.dot(G, x) + C @ (x @ C) * 0.1
    return np.sum(H * G) * 0.01 + np.sum(np.sin(v)) + np.dot(v, x) * 0.1


def mm_chain_renamed(p, q, r, s):
    h = np.tanh(p @ q) @ r.T
    k = p.T @ (p * 0.5)
    w = h @ s + np.dot(k, s) + r @ (s @ r) * 0.1
    return np.sum(h * k) * 0.01 + np.sum(np.sin(w)) + np.dot(w, s) * 0.1


def _products(A, B, C, x):
    H = np.tanh(A @ B) @ C.T
    G = A.T @ (A * 0.5)
    return H, G, H @ x + np.dot(G, x) + C @ (x @ C) * 0.1


def mm_chain_split(A, B, C, x):
    H, G, v = _products(A, B, C, x)
    return np.sum(H * G) * 0.01 + np.sum(np.sin(v)) + np.dot(v, x) * 0.1


def sliced(A, B, x):
    """Strided views as operands: interior blocks, every other row, a transposed block."""
    C = A[1:-1, 1:-1] @ B[1:-1, :-2]
    y = A[2:, 1:-1].T @ x[2:]
    z = A[::2] @ x
    return np.sum(C * C) * 1e-3 + np.sum(np.sin(y)) + np.sum(z * z) * 0.01 + A[0, :] @ x


def with_ints(A, M, x):
    """Integer matrices: the loops (Numba's np.dot takes one float dtype)."""
    return np.sum(np.cos(A @ M)) + np.sum((M @ x) ** 2) * 1e-3 + np.sum(x @ M)


def solved(A, B):
    """``np.linalg.solve`` of a matrix right-hand side: its adjoint is a BLAS product."""
    return np.sum(np.linalg.solve(A, B) ** 2)


def _mat(*shape):
    return R.uniform(-1.0, 1.0, shape) / np.sqrt(shape[-1])


ARGS = {
    "mm_chain": (_mat(N, N), _mat(N, N + 1), _mat(N, N + 1), R.uniform(-1, 1, N)),
    "sliced": (_mat(N, N), _mat(N, N), R.uniform(-1, 1, N)),
    "with_ints": (_mat(N, N), R.integers(-3, 4, (N, N)), R.uniform(-1, 1, N)),
    "solved": (np.eye(N) * 3.0 + _mat(N, N), _mat(N, 5)),
}
FNS = {"mm_chain": mm_chain, "sliced": sliced, "with_ints": with_ints, "solved": solved}
WRT = {"mm_chain": None, "sliced": None, "with_ints": ("A", "x"), "solved": None}


def _float_positions(name):
    fn, args, wrt = FNS[name], ARGS[name], WRT[name]
    params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    names = wrt or tuple(p for p, a in zip(params, args) if np.asarray(a).dtype.kind == "f")
    return [params.index(n) for n in names]


def _directions(name, k=3):
    rng = np.random.default_rng(7)
    args = ARGS[name]
    return [tuple(rng.standard_normal(np.shape(args[p])) for p in _float_positions(name))
            for _ in range(k)]


def _check_directional(name, grads):
    pos = _float_positions(name)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for d, ref in zip(_directions(name), fd_directional(FNS[name], ARGS[name], pos,
                                                        _directions(name))):
        terms = [np.asarray(g, dtype=np.float64) * v for g, v in zip(grads, d)]
        got = sum(float(np.sum(t)) for t in terms)
        scale = sum(float(np.sum(np.abs(t))) for t in terms)
        assert abs(got - float(ref)) <= 1e-11 * scale, (name, got, float(ref), scale)


@pytest.fixture(scope="module")
def cpu_grads():
    out = {}
    for name, fn in FNS.items():
        g = coarsen.differentiate(fn, WRT[name])
        out[name] = (g, g.value_and_grad(*ARGS[name]))
    return out


@pytest.mark.parametrize("name", sorted(FNS))
def test_cpu_gradients_match_the_oracle(cpu_grads, name):
    g, (value, grads) = cpu_grads[name]
    assert np.isclose(value, FNS[name](*ARGS[name]), rtol=1e-12, atol=0.0)
    _check_directional(name, grads)


@pytest.mark.parametrize("name", sorted(FNS))
def test_python_target_agrees_with_cpu(cpu_grads, name):
    _, (_, cpu) = cpu_grads[name]
    g = coarsen.differentiate(FNS[name], WRT[name], target="python")
    _, grads = g.value_and_grad(*ARGS[name])
    for a, b in zip(grads, cpu):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13 * np.max(np.abs(b)))


def test_the_products_run_in_blas(cpu_grads):
    """The float products call the BLAS helpers, the integer ones the loops; the strided
    operands are made contiguous once, the transposes are not copied."""
    src = cpu_grads["mm_chain"][0].source_for(*ARGS["mm_chain"])
    body = src[src.index("def value_and_grad_mm_chain"):]
    assert "_bmm22(" in body and "_bmm21(" in body and "_bmm12(" in body
    assert "_mm22(" not in body.replace("_bmm22(", "") and "ascontiguousarray" not in body
    src = cpu_grads["with_ints"][0].source_for(*ARGS["with_ints"])
    body = src[src.index("def value_and_grad_with_ints"):]
    assert "_mm22(" in body.replace("_bmm22(", "") and "_mm21(" in body.replace("_bmm21(", "")
    src = cpu_grads["sliced"][0].source_for(*ARGS["sliced"])
    assert "np.ascontiguousarray(" in src[src.index("def value_and_grad_sliced"):]


def test_numba_compiles_the_products_without_copies(tmp_path, monkeypatch):
    """Numba warns (``NumbaPerformanceWarning``) where np.dot gets a strided array and
    copies it; the generated module, compiled afresh here, makes it warn nowhere."""
    from numba.core.errors import NumbaPerformanceWarning

    g = coarsen.differentiate(sliced)
    path = tmp_path / "blas_sliced_module.py"
    path.write_text(g.source_for(*ARGS["sliced"]))
    spec = importlib.util.spec_from_file_location("blas_sliced_module", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "blas_sliced_module", mod)
    spec.loader.exec_module(mod)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, grads, _ = mod.value_and_grad_sliced(*ARGS["sliced"])
    assert not [w for w in caught if issubclass(w.category, NumbaPerformanceWarning)]
    ref = g(*ARGS["sliced"])
    for a, b in zip(grads, ref):
        np.testing.assert_array_equal(a, b)


def test_renamed_and_split_give_the_same_bits(cpu_grads):
    _, (value, ref) = cpu_grads["mm_chain"]
    for fn in (mm_chain_renamed, mm_chain_split):
        v, grads = coarsen.differentiate(fn).value_and_grad(*ARGS["mm_chain"])
        assert v == value
        for a, b in zip(grads, ref):
            np.testing.assert_array_equal(a, b)


def test_forward_mode_matches_the_oracle():
    """``coarsen.jvp``: the products' tangents ``dA @ B + A @ dB`` in BLAS too."""
    pos = _float_positions("mm_chain")
    d = _directions("mm_chain")[0]
    ref = fd_directional(mm_chain, ARGS["mm_chain"], pos, [d])[0]
    value, tangent = coarsen.jvp(mm_chain)(*ARGS["mm_chain"], tangents=d)
    assert np.isclose(value, mm_chain(*ARGS["mm_chain"]), rtol=1e-12, atol=0.0)
    assert abs(tangent - float(ref)) <= 1e-11 * abs(float(ref)) + 1e-13
