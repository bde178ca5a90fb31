"""Hessians of code with matrix products, ``np.linalg.solve`` and ``np.einsum``.

``coarsen.hessian`` is reverse mode over the generated JVP, which reverse mode reads back as
source.  The JVP's products used to call the runtime helpers ``_mm*`` (loops with a shape
check that raises), which reverse mode cannot read, so every Hessian of code with ``@`` was
refused.  The JVP made for ``hessian`` is now in coarsen's input language (``a @ b``,
``np.linalg.solve``, ``np.einsum``; ``JvpOptions.input_language``).  Checked here against
closed forms, central differences of coarsen's gradient, ``hvp`` against ``H @ v``, symmetry,
both targets, and metamorphic variants (renamed, split into helpers) that must give the same
matrix bit for bit.
"""
import numpy as np
import pytest

import coarsen
from coarsen.transforms import hessian as hessian_api
from tests.transforms.test_hessian import _fd_of_gradient, _positions, _single, check_symmetric, dense
from tests.zoo import realistic


def quad_norm(x, A):
    return x @ A @ x + np.linalg.norm(x)


def quad_norm_renamed(x_bar, _t1):
    return x_bar @ _t1 @ x_bar + np.linalg.norm(x_bar)


def _form(u, M):
    return u @ M @ u


def quad_norm_split(x, A):
    return _form(x, A) + np.linalg.norm(x)


def solve_form(b, A):
    return b @ np.linalg.solve(A, b)


def solve_wrt_matrix(A, b):
    z = np.linalg.solve(A, b)
    return np.sum(z * z)


def einsum_tanh(W, x):
    return np.sum(np.tanh(np.einsum("ij,j->i", W, x)))


def dot_rows(A, x):
    y = np.zeros(A.shape[0])
    for i in range(A.shape[0]):
        y[i] = np.dot(A[i], x)
    return np.sum(np.sin(y)) + x @ x


def _quad_args():
    r = np.random.default_rng(7)
    return np.array([0.3, -0.2, 0.5]), r.standard_normal((3, 3))


def _solve_args():
    r = np.random.default_rng(8)
    return np.array([0.4, -0.1, 0.7]), r.standard_normal((3, 3)) + 3.0 * np.eye(3)


def test_quadratic_form_against_its_closed_form():
    x, A = _quad_args()
    H = coarsen.hessian(quad_norm, wrt="x", target="python")(x, A)
    r = np.linalg.norm(x)
    ref = A + A.T + np.eye(3) / r - np.outer(x, x) / r ** 3
    check_symmetric(H)
    np.testing.assert_allclose(H, ref, rtol=1e-12, atol=1e-12)


def test_solve_against_its_closed_form():
    b, A = _solve_args()
    H = coarsen.hessian(solve_form, wrt="b", target="python")(b, A)
    inv = np.linalg.inv(A)
    np.testing.assert_allclose(H, inv + inv.T, rtol=1e-10, atol=1e-12)
    check_symmetric(H)


CASES = [
    (solve_wrt_matrix, lambda: (_solve_args()[1], _solve_args()[0]), "A"),
    (einsum_tanh, lambda: (np.random.default_rng(9).standard_normal((2, 3)),
                           np.array([0.3, -0.6, 0.2])), "W"),
    (dot_rows, lambda: (np.random.default_rng(4).standard_normal((3, 4)),
                        np.array([0.1, 0.2, -0.3, 0.4])), ("A", "x")),
] + [c for c in realistic.CASES if c[0].__name__ == "softmax_regression"][:1]


@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_against_differences_of_the_gradient(case):
    fn, make, wrt = case
    args = make()
    pos = _positions(fn, args, wrt)
    single = _single(wrt)
    res = coarsen.hessian(fn, wrt, target="python")(*args)
    got = dense(res, [np.shape(args[p]) for p in pos], single)
    check_symmetric(got)
    g = coarsen.differentiate(fn, wrt, target="python")
    ref = _fd_of_gradient(g, args, pos, single)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(ref).max()))


def test_cpu_matches_python_and_hvp_is_h_times_v():
    x, A = _quad_args()
    Hp = coarsen.hessian(quad_norm, wrt="x", target="python")(x, A)
    Hc = coarsen.hessian(quad_norm, wrt="x")(x, A)
    np.testing.assert_allclose(Hc, Hp, rtol=1e-13, atol=1e-14)
    v = np.array([1.0, -2.0, 0.5])
    hv = coarsen.hvp(quad_norm, wrt="x")(x, A, v)
    np.testing.assert_allclose(hv, Hc @ v, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("variant", [quad_norm_renamed, quad_norm_split])
def test_renaming_and_helpers_give_the_same_hessian(variant):
    x, A = _quad_args()
    H = coarsen.hessian(quad_norm, wrt=0, target="python")(x, A)
    np.testing.assert_array_equal(coarsen.hessian(variant, wrt=0, target="python")(x, A), H)


def test_helper_products_are_still_refused_with_the_generated_line(monkeypatch):
    """The flag is what makes these readable: without it the JVP calls ``_mm*`` and the
    Hessian is refused at the function, naming the generated line (never differentiated
    wrongly)."""
    options = hessian_api.JvpOptions
    monkeypatch.setattr(hessian_api, "JvpOptions",
                        lambda *a, **kw: options(*a, **{**kw, "input_language": False}))
    x, A = _quad_args()
    with pytest.raises(coarsen.CoarsenError, match="cannot read back the JVP") as exc:
        coarsen.hessian(quad_norm, wrt="x", target="python")(x, A)
    assert exc.value.filename.endswith("test_hessian_linalg.py")
    assert "matmul/dot: shapes not aligned" in str(exc.value)
