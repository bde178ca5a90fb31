"""NumPy functions added through the primitive registry (``coarsen/ir/primitives``).

The ufunc spellings of the operators (``np.multiply``, ``np.add``, ``np.subtract``,
``np.divide``, ``np.negative``, ``np.power``), ``np.cumsum``, ``np.diff``, ``np.linalg.solve``,
``np.einsum`` (two operands here; the rest in tests/endtoend/test_numpy_rank.py) and ``np.atleast_1d``: values against the
function itself, gradients against the extended-precision oracle (``tests.oracle``, which runs
the user's code unchanged; ``np.linalg.solve`` by its longdouble elimination), in coarse and
fine mode.  The python target runs every case; the cpu target (Numba) compiles one function
that uses them all inside a loop whose values are overwritten (tapes) in fine mode, and a
lighter one (no solve) in coarse mode.
Unsupported forms raise ``CoarsenError`` at the call, with its location and a hint.
"""
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from tests.oracle import check_against_oracle

R = np.random.default_rng(11)


def vec(n, lo=0.5, hi=1.5):
    return R.uniform(lo, hi, n)


def mat(n, m, lo=0.5, hi=1.5):
    return R.uniform(lo, hi, (n, m))


def well_conditioned(n):
    return mat(n, n, -0.5, 0.5) + 3.0 * np.eye(n)


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check(fn, args, target="python", coarse=True, wrt=None):
    """Value against the function itself, gradient against the oracle, arguments unchanged."""
    return check_against_oracle(fn, args, target, wrt, coarse=coarse)[0]


# ------------------------------------------------------------------ ufunc spellings
def uf_scalars(x, y):
    return (np.multiply(x, y) + np.add(x, 1.5) - np.subtract(y, x) + np.divide(x, y)
            + np.negative(x) * y + np.power(x, y) + np.power(y, 2))


def uf_arrays(a, b):
    return np.sum(np.multiply(a, b) + np.divide(a, b) + np.power(a, b)
                  - np.subtract(a, np.negative(b)) + np.add(a, b) * a)


def uf_broadcast(A, v, s):
    return np.sum(np.multiply(A, v) + np.divide(v, A) + np.power(A, s) + np.subtract(s, A)
                  + np.add(v, s) * A + np.negative(np.multiply(s, v)))


def uf_mixed_int(x, n, k):
    # ints: np.divide is true division, np.power of ints stays an int, negative of an int
    return (np.divide(n, 4) * x + np.power(x, n) + np.multiply(n, x) + np.negative(n) * x
            + np.sum(np.multiply(k, x)) + np.sum(np.power(k, 2)) * x + np.sum(np.divide(k, x)))


def uf_loop(x, a):
    s = x
    for i in range(a.shape[0]):
        s = np.add(np.multiply(s, a[i]), np.divide(1.0, s))     # s overwritten every trip
        s = np.subtract(s, np.power(s, 0.5) * 0.1)
    return s


# ------------------------------------------------------------------ cumsum, diff
def cs_1d(x):
    return np.sum(np.sin(np.cumsum(x)) * x)


def cs_2d(A):
    return (np.sum(np.cumsum(A, axis=0) ** 2) + np.sum(np.sin(np.cumsum(A, 1)))
            + np.sum(np.cumsum(A, axis=-2) * A))


def cs_int(x, k):
    return np.sum(np.cumsum(k) * x) + np.sum(np.cumsum(x * k))


def df_1d(x):
    return (np.sum(np.diff(x) ** 2) + np.sum(np.diff(x, 2) ** 3)
            + np.sum(np.diff(x, n=3) * x[:-3]))


def df_2d(A):
    return (np.sum(np.diff(A, axis=0) ** 2) + np.sum(np.sin(np.diff(A)))
            + np.sum(np.diff(A, 2, -1) * A[:, 2:]))


# ------------------------------------------------------------------ solve
def sv_vec(A, b):
    x = np.linalg.solve(A, b)
    return np.sum(x * x) + x[0] * b[1]


def sv_mat(A, B):
    return np.sum(np.sin(np.linalg.solve(A, B)))


def sv_transposed(A, b):
    x = np.linalg.solve(A.T, b)          # a non-contiguous A
    y = np.linalg.solve(A, x)            # A read by two solves
    return np.sum(y * b) + np.sum(x)


# ------------------------------------------------------------------ einsum
def es_products(A, B, x, y):
    return (np.sum(np.sin(np.einsum("ij,j->i", A, x)))
            + np.sum(np.einsum("ij,jk->ik", A, B) ** 2)
            + np.einsum("i,i->", x, y)
            + np.einsum("ij,ij->", A, A) * 0.1)


def es_general(A, B, x):
    return (np.sum(np.einsum("ij,jk->ki", A, B) * A[:, :2].T)     # transposed output
            + np.einsum("ij,j->", A, x)                    # i summed in A alone
            + np.sum(np.sin(np.einsum("ij,k->ikj", A, x)))   # outer product, permuted
            + np.sum(np.einsum("ij,ik->jk", A, A)))        # the same operand twice


# ------------------------------------------------------------------ atleast_1d
def al(x, s):
    return (np.sum(np.atleast_1d(x) * x) + np.sum(np.atleast_1d(s) * 3.0)
            + np.atleast_1d(s * s)[0] * x[1])


def al_alias(x, s):
    y = np.atleast_1d(x)          # x itself
    z = np.atleast_1d(np.sum(y))
    return np.sum(y * x) * s + z[0] * x[0]


# ------------------------------------------------------------------ all of them in a loop
def loop_all(A, b, x, s):
    acc = 0.0
    v = b.copy()
    for k in range(3):
        v = np.linalg.solve(A, v) + np.cumsum(v) * 0.1       # v overwritten: taped for solve
        d = np.diff(v)
        w = np.einsum("ij,j->i", A, v)
        t = np.atleast_1d(np.multiply(s, np.sum(d)))
        acc = np.add(acc, np.sum(d * d) + np.sum(np.multiply(w, x)) + np.power(t[0], 2))
        s = np.divide(s, np.subtract(1.5, np.negative(s) * 0.1))
    M = np.linalg.solve(A, np.outer(v, x))                    # 2-D right-hand side
    return (acc + np.sum(np.cumsum(M, axis=1) * M) + np.sum(np.diff(M, axis=0) ** 2)
            + np.einsum("ij,j->", A, x) + np.sum(np.einsum("ij,jk->ki", M, A) * A))


def loop_light(x, a, s):
    acc = 0.0
    v = x.copy()
    for k in range(3):
        v = np.cumsum(v) * 0.3 + np.multiply(np.atleast_1d(s), a)      # overwritten each trip
        s = np.divide(np.power(s, 2), np.add(s, 1.0)) + np.negative(np.sum(np.diff(v))) * 0.01
        acc = np.subtract(acc, np.einsum("i,i->", v, a) * s)
    return acc


def _A():
    return well_conditioned(4)


CASES = [
    (uf_scalars, lambda: (0.7, 1.3)),
    (uf_arrays, lambda: (vec(5), vec(5))),
    (uf_broadcast, lambda: (mat(3, 4), vec(4), 1.3)),
    (uf_mixed_int, lambda: (0.9, 3, np.array([1, 2, 3]))),
    (uf_loop, lambda: (1.2, vec(4))),
    (cs_1d, lambda: (vec(6),)),
    (cs_2d, lambda: (mat(3, 4),)),
    (cs_int, lambda: (vec(4), np.array([1, -2, 3, 2]))),
    (df_1d, lambda: (vec(7),)),
    (df_2d, lambda: (mat(4, 5),)),
    (sv_vec, lambda: (_A(), vec(4))),
    (sv_mat, lambda: (_A(), mat(4, 2))),
    (sv_transposed, lambda: (_A(), vec(4))),
    (es_products, lambda: (mat(3, 4), mat(4, 2), vec(4), vec(4))),
    (es_general, lambda: (mat(3, 4), mat(4, 2), vec(4))),
    (al, lambda: (vec(3), 0.8)),
    (al_alias, lambda: (vec(3), 0.8)),
    (loop_all, lambda: (_A(), vec(4), vec(4), 0.7)),
    (loop_light, lambda: (vec(4), vec(4), 0.7)),
]


@pytest.mark.parametrize("coarse", [True, False], ids=["coarse", "fine"])
@pytest.mark.parametrize("fn,factory", CASES, ids=[c[0].__name__ for c in CASES])
def test_python_target(fn, factory, coarse):
    check(fn, factory(), "python", coarse)


def test_ufunc_spellings_are_the_registry_primitives():
    sp = coarsen.ir.primitives.spellings("numpy")
    assert {k: sp[k] for k in ("multiply", "add", "subtract", "divide", "negative", "power")} == \
        {"multiply": "mul", "add": "add", "subtract": "sub", "divide": "div",
         "negative": "neg", "power": "pow"}
    assert coarsen.ir.primitives.spelled("linalg", "solve") == "solve"


# Numba compiles cost seconds (the solve helpers most): every primitive once in fine mode, and
# the scalar work around them (what coarse mode lifts) once in coarse mode
def test_cpu_target_fine():
    check(loop_all, (_A(), vec(4), vec(4), 0.7), "cpu", False)


def test_cpu_target_coarse():
    g = check(loop_light, (vec(4), vec(4), 0.7), "cpu", True)
    assert "segment" in g.report(vec(4), vec(4), 0.7).format().lower()


# ------------------------------------------------------------------ refused forms
# (np.cumsum(A) of a 2-D A, once refused, flattens since issue 44: tests/endtoend/test_numpy_forms.py)


def r_cumsum_dtype(x):
    return np.sum(np.cumsum(x, dtype=np.float64))


def r_cumsum_scalar(s):
    return np.sum(np.cumsum(s))


def r_cumsum_axis(x):
    return np.sum(np.cumsum(x, axis=1))


def r_diff_n0(x):
    return np.sum(np.diff(x, 0))


def r_diff_prepend(x):
    return np.sum(np.diff(x, prepend=0.0))


def r_diff_bool(x):
    return np.sum(np.diff(x > 1.0) * x[1:])


def r_solve_vector_A(x, b):
    return np.sum(np.linalg.solve(x, b))


def r_solve_scalar_b(A, s):
    return np.sum(np.linalg.solve(A, s))


def r_write_through_atleast_1d(x, s):
    y = np.atleast_1d(x)
    y *= s                        # a view of x, as in NumPy: refused like other named views
    return np.sum(x * x) + np.sum(y)


def r_inv(A):
    return np.sum(np.linalg.inv(A))


def r_einsum_free_output(A, B):
    return np.sum(np.einsum("ij,jk->iz", A, B))


def r_einsum_rank(A, B):
    return np.sum(np.einsum("ijk,jk->i", A, B))


def r_einsum_drops_ellipsis(A, B):
    return np.sum(np.einsum("...j,jk->k", A, B))     # NumPy refuses it too


def r_einsum_spec_variable(A, B):
    spec = "ij,jk->ik"
    return np.sum(np.einsum(spec, A, B))


@pytest.mark.parametrize("fn,args,words", [
    (r_cumsum_dtype, (vec(3),), "'dtype'"),
    (r_cumsum_scalar, (1.5,), "of a scalar"),
    (r_cumsum_axis, (vec(3),), "out of range"),
    (r_diff_n0, (vec(3),), "n < 1"),
    (r_diff_prepend, (vec(3),), "'prepend'"),
    (r_diff_bool, (vec(3),), "boolean"),
    (r_solve_vector_A, (vec(3), vec(3)), "2-D matrix"),
    (r_solve_scalar_b, (mat(3, 3), 1.0), "right-hand side"),
    (r_inv, (mat(3, 3),), "np.linalg.inv"),
    (r_write_through_atleast_1d, (vec(3), 0.5), "view of 'x'"),
    (r_einsum_free_output, (mat(2, 3), mat(3, 2)), "in no operand"),
    (r_einsum_rank, (mat(2, 3), mat(3, 2)), "operand 1 is 2-D"),
    (r_einsum_drops_ellipsis, (mat(2, 3), mat(3, 2)), "drops the '...'"),
    (r_einsum_spec_variable, (mat(2, 3), mat(3, 2)), "string"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_refused(fn, args, words):
    with pytest.raises(CoarsenError) as e:
        coarsen.differentiate(fn, target="python")(*args)
    assert words in str(e.value)
    assert e.value.lineno is not None and e.value.col_offset is not None
    assert e.value.filename.endswith("test_new_primitives.py")


def test_refusals_carry_hints():
    for fn, args in ((r_einsum_free_output, (mat(2, 3), mat(3, 2))),
                     (r_solve_vector_A, (vec(3), vec(3))), (r_inv, (mat(3, 3),))):
        with pytest.raises(CoarsenError) as e:
            coarsen.differentiate(fn, target="python")(*args)
        assert e.value.hint, fn.__name__


# ------------------------------------------------------------------ shape errors at run time
def bad_einsum(A, x):
    return np.einsum("ij,j->", A, x)


def bad_solve(A, b):
    return np.sum(np.linalg.solve(A, b))


@pytest.mark.parametrize("fn,args,exc", [
    (bad_einsum, (mat(2, 3), vec(4)), ValueError),
    (bad_solve, (mat(3, 3), vec(4)), ValueError),       # NumPy: ValueError; Numba: LinAlgError
    (bad_solve, (np.zeros((2, 2)), vec(2)), np.linalg.LinAlgError),
], ids=["einsum-lengths", "solve-lengths", "solve-singular"])
def test_shape_errors_raise_at_run_time(fn, args, exc):
    with pytest.raises(exc):
        coarsen.differentiate(fn, target="python").value_and_grad(*args)
