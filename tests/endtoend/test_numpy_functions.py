"""Issue 44a: NumPy's element-wise and complex-on-real functions, axis moves, diagonals, tensor
products, sorting, padding and the argument forms (ddof, tuple axes, cumsum without an axis,
dtype strings, methods), on 1-D, 2-D and 3-D inputs, against the extended-precision oracle.

One differentiated program per family checks many functions with one compile: its gradient
(reverse mode) and its JVP (forward mode) against ``fd_grad``, on the python target for every
family and on the cpu target (Numba) for each family's program; negative axes, keepdims and
broadcasting appear in the programs. Metamorphic variants: renamed variables and a split into
helpers give the same bits; float32 inputs get the float64 gradient cast to float32 (coarsen's
behaviour for float32 arrays). Then the conventions (ties of sort as those of max), NumPy's run-time
errors, the refusals (each a CoarsenError at the call, with a hint), and the static parts
(permutations, tensordot specs, pad widths) against NumPy itself, without compiling.
"""
import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.ir.primitives.axes import permutation
from coarsen.ir.primitives.padding import widths_for
from coarsen.ir.primitives.products import tensordot_spec
from tests.oracle import assert_grad_close, fd_grad


# ------------------------------------------------------------------ the programs, by family
def elementwise(x, y, M, T):
    a = np.deg2rad(x) + np.radians(y) * np.rad2deg(x) + np.degrees(y)
    b = np.exp2(x) * np.logaddexp2(x, y) + np.remainder(x, 0.7) + np.mod(M, 0.3).sum(axis=0)
    c = np.real(x) * np.conj(y) + np.conjugate(M)[1] * np.real_if_close(y, tol=1000) + np.imag(x) \
        + np.angle(x - 0.5) + np.angle(y - 0.3, deg=True)
    d = np.nan_to_num(np.log(x - 0.6)) + np.exp2(M[0]) * x \
        + np.nan_to_num(np.log(x - 0.6), nan=-2.0, posinf=1.0) * y     # nan_to_num: x[0] < 0.6
    e = np.exp2(T) * np.remainder(T, 0.9) + np.rad2deg(T) * np.logaddexp2(T, M) + np.conj(T) * x
    return np.sum(a * b + c + d) + np.sum(e)


def axes_and_forms(x, v, T):
    a = np.sum(np.moveaxis(T, 0, -1) * np.rollaxis(T, 0, 3)) + np.sum(np.swapaxes(T, 0, 2)[0] ** 3) \
        + np.sum(np.rollaxis(T, -1, 1)[0, 1] ** 2) + np.sum(np.moveaxis(T, [0, 1], [2, 0]) ** 2)
    b = np.squeeze(T[:, :1, :], axis=1) * np.atleast_2d(v) + np.atleast_3d(v)[:, :, 0] ** 2 \
        + np.atleast_2d(v[0]) + np.atleast_3d(v)[0, :, 0]
    c = np.sum(T, axis=(0, 2)) + np.max(T, axis=(-1, 0), keepdims=True).ravel() \
        + np.var(T, axis=(1, 2), ddof=1).sum() + np.mean(T, axis=(0, -1), keepdims=True)[0, :, 0]
    d = np.std(T, ddof=1) + np.var(x, axis=0, ddof=1).sum() + T.std(axis=-2, ddof=2).sum() \
        + np.sum(np.cumsum(T) ** 2) + np.sum(np.cumsum(x) * np.cumsum(v[:2])[1])
    e = np.sum(x.astype("float64") ** 2) + np.sum(np.clip(x, a_min=-0.5, a_max=0.7)) \
        + np.sum(np.clip(x, None, 0.5) ** 2) + np.sum(np.clip(x, a_min=0.1, a_max=None) ** 3) \
        + np.sum(np.transpose(T, axes=(2, 0, 1))[0] ** 2) + x.T.sum() + x.mean() * x.sum() \
        + x.ravel()[1] + x.reshape(4, 1)[3, 0] + T.squeeze(axis=()).sum() \
        + np.sum(np.zeros(3, dtype="f8") + v)
    return np.sum(a) + np.sum(b) + np.sum(c) + d + e


def diagonals(A, B, x, T):
    a = np.sum(np.diagonal(A, 1) ** 2) + np.trace(A) * np.trace(A, -1) \
        + np.sum(np.diagonal(A, axis1=1, axis2=0) ** 3)
    b = np.sum(np.diag(x, 1)[:3, :3] * B) + np.sum(np.diag(A) ** 2) \
        + np.sum(np.tril(A) ** 2 + np.triu(A, 1) * A) + np.sum(np.tril(T, -1) ** 2) \
        + np.sum(np.triu(T, -1) * T)
    c = np.sum(np.diagonal(T, 1, 0, 2) ** 2) + np.sum(np.trace(T, -1, 2, 1) ** 2) \
        + np.sum(np.trace(T, axis1=0, axis2=-1)) + np.sum(np.diagonal(T) ** 3)
    return a + b + c


def products(A, B, x, y, T):
    a = np.inner(x, y) + np.sum(np.inner(A, B) ** 2) + np.sum(np.inner(T, x) ** 2)
    b = np.sum(np.tensordot(T, A, axes=1) ** 2) + np.sum(np.tensordot(A, B, axes=([0, 1], [1, 0]))) \
        + np.sum(np.tensordot(T, T, axes=((0, 2), (0, 2))) ** 2) + np.tensordot(A, A) \
        + np.sum(np.tensordot(x, y, axes=0) ** 2)
    c = np.sum(np.cross(T[0], x) ** 2) + np.sum(np.cross(A, B) * A)
    return a + b + c


def sorting(x, y, A, T):
    a = np.sum(np.sort(x, kind="stable") * y) + np.sum(np.sort(A, axis=0) * A) + np.sum(np.sort(T, axis=None)[:5] ** 2)
    b = np.sum(np.sort(T, axis=-2)[:, 0] ** 2) + np.sum(np.partition(x, 1)[:2] ** 2) \
        + np.partition(y, -1)[-1] + np.sum(np.partition(A, 0, axis=1)[:, 0] ** 3)
    return a + b


def padding(x, M, T):
    a = np.sum(np.pad(x, 2) ** 2 * np.cumsum(np.ones(7))) \
        + np.sum(np.pad(M, ((1, 0), (2, 1)), mode="constant", constant_values=1.5) ** 3)
    return a + np.sum(np.pad(T, (1, 2)) ** 2) + np.sum(np.pad(M, [[0, 1], [1, 0]]) * 2.0)


RNG = np.random.default_rng(44)


def _n(*shape):
    return RNG.normal(size=shape)


PROGRAMS = {
    "elementwise": (elementwise, (np.array([0.3, 0.9, 1.3]), np.array([0.2, 0.5, 0.8]),
                                  np.array([[0.4, 1.1, 0.7], [0.2, 0.65, 1.7]]),
                                  np.array([[[0.1, 1.2, -0.7], [0.3, -0.5, 1.6]]] * 2) * [[[1.0]], [[1.1]]])),
    "axes_and_forms": (axes_and_forms, (_n(4), _n(3), _n(2, 3, 3))),
    "diagonals": (diagonals, (_n(3, 3), _n(3, 3), _n(3), _n(2, 3, 4))),
    "products": (products, (_n(3, 3), _n(3, 3), _n(3), _n(3), _n(2, 3, 3))),
    "sorting": (sorting, (_n(4), _n(4), _n(3, 3), _n(2, 3, 2))),
    "padding": (padding, (_n(3), _n(2, 3), _n(2, 1, 3))),
}


@pytest.fixture(scope="module")
def expected():
    """The oracle's gradient of each program (computed once)."""
    return {k: fd_grad(f, [a.copy() for a in args], list(range(len(args))))
            for k, (f, args) in PROGRAMS.items()}


def _check(name, target, expected, modes=("reverse", "forward")):
    fn, args = PROGRAMS[name]
    exp = expected[name]
    if "reverse" in modes:
        g = coarsen.differentiate(fn, target=target)
        value, grads = g.value_and_grad(*[a.copy() for a in args])
        assert value == pytest.approx(fn(*[a.copy() for a in args]), rel=1e-13, abs=1e-13)
        assert_grad_close(grads, exp, err_msg=f"{name} on {target}")
    if "forward" in modes:
        tangents = tuple(RNG.normal(size=a.shape) for a in args)
        jvalue, tangent = coarsen.jvp(fn, target=target)(*args, tangents=tangents)
        want = sum(float(np.sum(e * t)) for e, t in zip(exp, tangents))
        scale = sum(float(np.sum(np.abs(e * t))) for e, t in zip(exp, tangents))
        assert abs(tangent - want) <= 1e-9 * scale, (name, target, tangent, want)
        assert jvalue == pytest.approx(fn(*[a.copy() for a in args]), rel=1e-13, abs=1e-13)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_family_on_the_python_target(name, expected):
    _check(name, "python", expected)


# the cpu target (Numba) compiles each program for seconds: reverse mode of three programs
# with every new primitive once between them (each helper and NumPy call Numba must compile;
# three smaller functions compile faster than one large one, and on two workers at once), forward
# mode of one with the primitives that have forward rules of their own (the others' are their
# own emitters)
def cpu_sampler_elementwise(x, v, A, T):
    a = np.sum(np.exp2(x) + np.logaddexp2(x, 0.5) * np.deg2rad(x)) \
        + np.sum(np.nan_to_num(x) * np.angle(x - 0.5) + np.conj(x) + np.imag(x))
    b = np.sum(np.moveaxis(T, 0, -1) ** 2 * np.swapaxes(T, 0, 2)[0, 0]) \
        + np.sum(np.squeeze(T[:1], axis=0) * np.atleast_2d(v)) + np.sum(np.atleast_3d(A)[0])
    return a + b


def cpu_sampler_reductions(x, v, A, T):
    c = np.sum(np.max(T, axis=(0, 2), keepdims=True) ** 2) + np.std(T, ddof=1) \
        + np.sum(np.var(A, axis=-1, ddof=1)) + np.sum(np.cumsum(A) ** 2)
    e = np.sum(np.sort(T, axis=1)[:, 0] ** 3) + np.sum(np.partition(x, 1)[:2] ** 2) \
        + np.sum(np.pad(A, ((1, 0), (0, 2)), constant_values=0.5) ** 2)
    return c + e


def cpu_sampler_diagonals(x, v, A, T):
    return np.trace(A, 1) + np.sum(np.diagonal(A) ** 2) + np.sum(np.diag(v) * A) \
        + np.sum(np.diagonal(T, 0, 2, 0) ** 2) + np.sum(np.trace(T, 1, 1, 2)) \
        + np.sum(np.tril(A, -1) ** 2 + np.triu(T) * T) + np.inner(v, v) \
        + np.sum(np.tensordot(T, A, axes=([2], [1])) ** 2) + np.sum(np.cross(A, v) ** 2)


def cpu_forward_sampler(x, A):
    return np.sum(np.sort(A, axis=0)[0] ** 3) + np.sum(np.partition(x, 1)[:2] ** 2) \
        + np.sum(np.pad(A, (1, 0)) ** 2) + np.std(A, ddof=1) + np.sum(np.exp2(x)) \
        + np.sum(np.nan_to_num(np.log(A), nan=-2.0, neginf=-5.0) * A)


_SAMPLER_ARGS = (np.array([0.3, 0.9, -0.4, 1.3]), _n(3), _n(3, 3), _n(2, 3, 3))
CPU = {**{f.__name__: (f, _SAMPLER_ARGS, ("reverse",))
          for f in (cpu_sampler_elementwise, cpu_sampler_reductions, cpu_sampler_diagonals)},
       "cpu_forward_sampler": (cpu_forward_sampler, (_n(4), _n(3, 3)), ("forward",))}


@pytest.mark.parametrize("name", list(CPU))
def test_new_primitives_on_the_cpu_target(name):
    fn, args, modes = CPU[name]
    PROGRAMS[name] = (fn, args)
    try:
        exp = fd_grad(fn, [a.copy() for a in args], list(range(len(args))))
        _check(name, "cpu", {name: exp}, modes)
    finally:
        del PROGRAMS[name]


# ------------------------------------------------------------------ metamorphic variants
def products_renamed(P, Q, u, w, S):
    first = np.inner(u, w) + np.sum(np.inner(P, Q) ** 2) + np.sum(np.inner(S, u) ** 2)
    second = np.sum(np.tensordot(S, P, axes=1) ** 2) + np.sum(np.tensordot(P, Q, axes=([0, 1], [1, 0]))) \
        + np.sum(np.tensordot(S, S, axes=((0, 2), (0, 2))) ** 2) + np.tensordot(P, P) \
        + np.sum(np.tensordot(u, w, axes=0) ** 2)
    third = np.sum(np.cross(S[0], u) ** 2) + np.sum(np.cross(P, Q) * P)
    return first + second + third


def _contractions(A, B, x, y, T):
    return np.inner(x, y) + np.sum(np.inner(A, B) ** 2) + np.sum(np.inner(T, x) ** 2)


def _crosses(A, B, x, T):
    return np.sum(np.cross(T[0], x) ** 2) + np.sum(np.cross(A, B) * A)


def products_split(A, B, x, y, T):
    a = _contractions(A, B, x, y, T)
    b = np.sum(np.tensordot(T, A, axes=1) ** 2) + np.sum(np.tensordot(A, B, axes=([0, 1], [1, 0]))) \
        + np.sum(np.tensordot(T, T, axes=((0, 2), (0, 2))) ** 2) + np.tensordot(A, A) \
        + np.sum(np.tensordot(x, y, axes=0) ** 2)
    return a + b + _crosses(A, B, x, T)


def test_renamed_and_split_give_the_same_bits():
    _, args = PROGRAMS["products"]
    ref = coarsen.differentiate(products, target="python").value_and_grad(*args)
    for variant in (products_renamed, products_split):
        got = coarsen.differentiate(variant, target="python").value_and_grad(*args)
        assert got[0] == ref[0], variant.__name__
        for a, b in zip(got[1], ref[1]):
            assert np.array_equal(a, b), variant.__name__


def test_float32_inputs_get_the_float64_gradient_cast():
    fn, args = PROGRAMS["sorting"]
    g = coarsen.differentiate(fn, target="python")
    wide = [a.astype(np.float32).astype(np.float64) for a in args]
    ref = g(*wide)
    got = g(*[a.astype(np.float32) for a in args])
    for a, b in zip(got, ref):
        assert a.dtype == np.float32 and np.array_equal(a, b.astype(np.float32))


# ------------------------------------------------------------------ second derivatives
def hessian_sampler(x):
    A = x.reshape(2, 2)
    a = np.sum(np.exp2(x) * np.deg2rad(x)) + np.sum(np.logaddexp2(x, 0.3)) + np.std(A, ddof=1)
    b = np.sum(np.moveaxis(A, 0, 1) ** 3) + np.sum(np.max(A, axis=(0, 1), keepdims=True) ** 2)
    c = np.trace(A @ A) + np.sum(np.diagonal(A) ** 3) + np.sum(np.tril(A) ** 2) \
        + np.inner(x, x) ** 2 + np.sum(np.tensordot(A, A, axes=1) ** 2)
    d = np.sum(np.pad(A, ((1, 0), (0, 2)), constant_values=0.5) ** 3) \
        + np.sum(np.cross(x[:3], x[1:]) ** 2) + np.sum(np.atleast_2d(x) ** 3)
    return a + b + c + d


def sort_hessian(x):
    return np.sum(np.sort(x) ** 3)


def test_hessian_reads_back_the_new_functions():
    """coarsen.hessian (reverse mode over the JVP read back) against central differences of
    the gradient; sort's JVP (a permutation helper) is not in coarsen's input language: a
    CoarsenError, never a wrong answer."""
    x = np.array([0.3, -0.7, 1.1, 0.5])
    H = coarsen.hessian(hessian_sampler, target="python")(x)
    g = coarsen.differentiate(hessian_sampler, target="python")
    h, fd = 1e-5, np.zeros((4, 4))
    for i in range(4):
        e = np.zeros(4)
        e[i] = h
        fd[i] = (g(x + e)[0] - g(x - e)[0]) / (2 * h)
    np.testing.assert_allclose(np.reshape(H, (4, 4)), fd, rtol=1e-7, atol=1e-7 * np.max(np.abs(fd)))
    with pytest.raises(CoarsenError, match="cannot read back"):
        coarsen.hessian(sort_hessian, target="python")(x)


# ------------------------------------------------------------------ conventions, run-time errors
def sorted_top(x):
    return np.sort(x)[-1] + 2.0 * np.sort(x)[0]


def max_and_min(x):
    return np.max(x) + 2.0 * np.min(x)


def test_ties_of_sort_are_shared_as_those_of_max():
    x = np.array([0.5, 2.0, -1.0, 2.0, -1.0, 2.0])
    (got,) = coarsen.differentiate(sorted_top, target="python")(x)
    (ref,) = coarsen.differentiate(max_and_min, target="python")(x)
    assert np.array_equal(got, ref)
    assert np.array_equal(got, [0.0, 1 / 3, 1.0, 1 / 3, 1.0, 1 / 3])
    value, tangent = coarsen.jvp(sorted_top, target="python")(x, tangents=(np.arange(6.0),))
    assert tangent == pytest.approx((1 + 3 + 5) / 3 + 2.0 * (2 + 4) / 2)


def squeeze_wrong_axis(T):
    return np.sum(np.squeeze(T, axis=0))


def partition_out_of_bounds(x):
    return np.sum(np.partition(x, 7))


def cross_of_2_vectors(A, B):
    return np.sum(np.cross(A, B))


@pytest.mark.parametrize("fn,args", [
    (squeeze_wrong_axis, (_n(2, 3),)), (partition_out_of_bounds, (_n(4),)),
    (cross_of_2_vectors, (_n(3, 2), _n(3, 2))),
])
def test_numpy_run_time_errors_are_raised(fn, args):
    with pytest.raises(ValueError):
        coarsen.differentiate(fn, target="python")(*args)


# ------------------------------------------------------------------ refusals
def r_squeeze_all(T):
    return np.sum(np.squeeze(T))


def r_pad_reflect(x):
    return np.sum(np.pad(x, 1, mode="reflect"))


def r_astype_f32(x):
    return np.sum(x.astype("float32"))


def r_astype_complex(x):
    return np.sum(x.astype("complex128"))


def r_atleast_two(x, y):
    return np.sum(np.atleast_2d(x, y)[0])


def r_diagonal_1d(x):
    return np.sum(np.diagonal(x))


def r_kth_list(x):
    return np.sum(np.partition(x, [1, 2]))


def r_tensordot_axes(A, k):
    return np.sum(np.tensordot(A, A, axes=k))


def r_moveaxis_range(T):
    return np.sum(np.moveaxis(T, 0, 3))


def r_sort_kind(x):
    return np.sum(np.sort(x, kind="bogosort"))


def r_nan_to_num_in_place(x):
    return np.sum(np.nan_to_num(x, copy=False))


def r_angle_deg(x, d):
    return np.sum(np.angle(x, deg=d))


@pytest.mark.parametrize("fn,args,words", [
    (r_squeeze_all, (_n(1, 3),), "without axis="),
    (r_pad_reflect, (_n(3),), "mode 'reflect'"),
    (r_astype_f32, (_n(3),), "float32"),
    (r_astype_complex, (_n(3),), "'complex128'"),
    (r_atleast_two, (_n(3), _n(3)), "of 2 arrays"),
    (r_diagonal_1d, (_n(2),), "1-D"),
    (r_kth_list, (_n(4),), "kth"),
    (r_tensordot_axes, (_n(2, 2), 1), "axes"),
    (r_moveaxis_range, (_n(2, 2, 2),), "out of bounds"),
    (r_sort_kind, (_n(3),), "kind 'bogosort'"),
    (r_angle_deg, (_n(3), True), "deg must be True or False"),
    (r_nan_to_num_in_place, (_n(3),), "copy=False"),
])
def test_unsupported_forms_are_refused_at_the_call(fn, args, words):
    with pytest.raises(CoarsenError, match=words) as err:
        coarsen.differentiate(fn, target="python")(*args)
    assert err.value.filename == __file__ and err.value.lineno is not None and err.value.hint


# ------------------------------------------------------------------ the static parts, against NumPy
def test_permutations_are_numpys():
    for shape in ((2,), (2, 3), (2, 3, 4), (2, 3, 4, 5)):
        x = np.empty(shape)
        n = len(shape)
        for a in range(-n, n):
            for b in range(-n, n):
                assert np.swapaxes(x, a, b).shape == tuple(shape[k] for k in permutation(("swap", a, b), n))
                assert np.moveaxis(x, a, b).shape == tuple(shape[k] for k in permutation(("move", (a,), (b,)), n))
            for start in range(-n, n + 1):
                want = np.rollaxis(x, a, start).shape
                assert want == tuple(shape[k] for k in permutation(("roll", a, start), n))
    x = np.arange(24.0).reshape(2, 3, 4)
    perm = permutation(("move", (0, 1), (2, 0)), 3)
    assert np.array_equal(np.moveaxis(x, [0, 1], [2, 0]), np.transpose(x, perm))


def test_tensordot_specs_are_numpys():
    a, b = _n(2, 3, 4), _n(4, 3, 2)
    for axes in (0, 1, ((1, 2), (1, 0)), ((0,), (2,)), ((-1, 0), (0, -1)), ([2], [0])):
        spec = tensordot_spec(axes, 3, 3)
        assert np.allclose(np.einsum(spec.text(), a, b), np.tensordot(a, b, axes=axes))
    assert np.allclose(np.einsum(tensordot_spec(((-1,), (-1,)), 3, 2).text(), a, _n(5, 4)).shape,
                       np.inner(a, np.ones((5, 4))).shape)


def test_pad_widths_are_numpys():
    x = np.ones((2, 3, 4))
    for widths in (1, (1, 2), ((1, 2),), ((0, 1), (2, 0), (1, 1)), [[1, 0], [0, 0], [2, 2]], (3,)):
        pairs = widths_for(widths if not isinstance(widths, list) else tuple(map(tuple, widths)), 3)
        assert np.pad(x, widths).shape == tuple(n + b + a for n, (b, a) in zip(x.shape, pairs))
