"""Forward mode, ``coarsen.jvp``: the directional derivative against the reverse-mode gradient.

For each program (zoo, realistic programs, the newer primitives, reductions with axes and
ties): ``coarsen.jvp(fn, wrt)(*args, tangents=t)`` gives ``fn``'s value bit for bit as the
gradient's value, and a tangent equal to ``sum_i <grad_i, t_i>`` of
``coarsen.differentiate(fn, wrt, coarsen=False)`` to 1e-12 relative to ``sum_i |grad_i * t_i|``
(the size of the terms: forward and reverse mode add the same products in different orders);
each unit tangent (a Jacobian column) gives the gradient's entry; one program is checked
against the extended-precision finite differences of ``tests/oracle.py``; an inactive path
gives a zero tangent; renaming variables gives bit-identical results; malformed tangents
raise ``CoarsenError``; every differentiable primitive of the registry has a forward rule.
Most cases run on the python target; a few on the cpu target (one Numba compile each).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import coarsen
from coarsen.ir.primitives import REGISTRY, forward_rule
from tests.oracle import fd_grad
from tests.ir.test_new_primitives import es_products, loop_all, sv_vec, well_conditioned
from tests.zoo import arrays, hard, loops, realistic, scalar

R = np.random.default_rng(7)


def reductions_mix(A, v):
    """Every reduction with and without axis and keepdims, maximum/minimum with broadcasting."""
    return (np.sum(np.prod(A, axis=0)) + np.prod(v) + np.sum(np.prod(A, axis=1, keepdims=True))
            + np.max(A) + np.sum(np.min(A, axis=1)) + np.sum(np.max(A, axis=0, keepdims=True))
            + np.std(A) + np.sum(np.var(A, axis=0)) + np.sum(np.std(A, axis=1, keepdims=True))
            + np.var(v) + np.sum(np.mean(A, axis=1)) + np.min(v, keepdims=True)[0]
            + np.sum(np.maximum(A, v)) + np.sum(np.minimum(v, 0.9)))


def ties(v, w):
    """Tied extrema and tied maximum/minimum: the tangent is split evenly, as the VJP splits."""
    return np.max(v) + np.sum(np.maximum(v, w)) + np.sum(np.minimum(v, v)) + np.sum(np.where(v > w, v, w))


_U = R.uniform(0.5, 1.5, (3, 4)), R.uniform(0.5, 1.5, 4)
_A4 = well_conditioned(4)

# (fn, args factory, wrt)
CASES = [
    (scalar.branches3, lambda: (0.6, 1.3), None),
    (scalar.loop_branch, lambda: (0.7, 0.4, 9), None),
    (scalar.while_halving, lambda: (3.7,), None),
    (loops.nested3, *loops.CASES[[c[0] for c in loops.CASES].index(loops.nested3)][1:]),
    (loops.elem_augassign, *loops.CASES[[c[0] for c in loops.CASES].index(loops.elem_augassign)][1:]),
    (arrays.dot_matmul, *arrays.CASES[[c[0] for c in arrays.CASES].index(arrays.dot_matmul)][1:]),
    (arrays.slices_neg_open, *arrays.CASES[[c[0] for c in arrays.CASES].index(arrays.slices_neg_open)][1:]),
    (arrays.slice_assign, *arrays.CASES[[c[0] for c in arrays.CASES].index(arrays.slice_assign)][1:]),
    (arrays.np_unary, *arrays.CASES[[c[0] for c in arrays.CASES].index(arrays.np_unary)][1:]),
    (hard.prefix_scan, *hard.CASES[[c[0] for c in hard.CASES].index(hard.prefix_scan)][1:]),
    (hard.element_swap, *hard.CASES[[c[0] for c in hard.CASES].index(hard.element_swap)][1:]),
    (realistic.logreg_loss, realistic._logreg_args, ("w", "b")),
    (realistic.heat_slices, realistic._heat_args, ("u0", "kappa")),
    (realistic.gauss_seidel_inplace, realistic._gs_args, None),
    (realistic.lu_sum, realistic._lu_args, None),
    (realistic.newton_cbrt, lambda: (2.7, 1.0), "a"),
    (realistic.softmax_regression, *[c for c in realistic.CASES if c[0] is realistic.softmax_regression][0][1:]),
    (realistic.rk4_lotka_volterra_array, lambda: (np.array([1.1, 0.4, 0.9, 0.3]), np.array([1.2, 0.8]),
                                                  0.05, 30), None),
    (sv_vec, lambda: (_A4.copy(), np.array([0.7, 1.1, 0.9, 1.3])), None),
    (es_products, lambda: (_U[0].copy(), np.linspace(0.5, 1.5, 8).reshape(4, 2),
                           _U[1].copy(), _U[1][::-1].copy()), None),
    (loop_all, lambda: (_A4.copy(), _U[1].copy(), _U[1][::-1].copy(), 0.7), None),
    (reductions_mix, lambda: (_U[0].copy(), _U[1].copy()), None),
    (ties, lambda: (np.array([1.0, 2.0, 2.0, 0.5]), np.array([1.0, 3.0, 2.0, 0.1])), None),
]
IDS = [c[0].__name__ for c in CASES]
CPU = ["logreg_loss", "heat_slices", "sv_vec", "reductions_mix", "loop_branch"]


def _positions(fn, args, wrt):
    import inspect
    names = list(inspect.signature(getattr(fn, "py_func", fn)).parameters)
    if wrt is None:
        return [k for k, a in enumerate(args) if isinstance(a, float)
                or (isinstance(a, np.ndarray) and a.dtype.kind == "f")], False
    if isinstance(wrt, (str, int)):
        return [names.index(wrt) if isinstance(wrt, str) else wrt], True
    return [names.index(w) if isinstance(w, str) else w for w in wrt], False


class Built:
    """One case's jvp and gradient, built once (module scope)."""

    def __init__(self, fn, factory, wrt, target):
        self.fn, self.factory, self.wrt = fn, factory, wrt
        self.j = coarsen.jvp(fn, wrt, target=target)
        # the reference gradient: the python target's (a cpu one would be one more long Numba
        # compile per case, and the cpu gradient has its own oracle tests)
        self.g = coarsen.differentiate(fn, wrt, coarsen=False, target="python")
        self.exact_value = target == "python"
        self.pos, self.single = _positions(fn, factory(), wrt)
        value, grads = self.g.value_and_grad(*factory())
        self.value = value
        self.grads = [np.asarray(grads, dtype=np.float64)] if self.single else \
            [np.asarray(gr, dtype=np.float64) for gr in grads]

    def tangents(self, rng):
        args = self.factory()
        return [rng.normal(size=args[p].shape) if isinstance(args[p], np.ndarray)
                else float(rng.normal()) for p in self.pos]

    def call(self, tans):
        return self.j(*self.factory(), tangents=tans[0] if self.single else tuple(tans))


_BUILT: dict = {}


def built(k, target="python"):
    key = (k, target)
    if key not in _BUILT:
        fn, factory, wrt = CASES[k]
        _BUILT[key] = Built(fn, factory, wrt, target)
    return _BUILT[key]


def _check_dot(b, rng):
    tans = b.tangents(rng)
    value, tangent = b.call(tans)
    terms = [np.asarray(gr) * t for gr, t in zip(b.grads, tans)]
    expected = sum(float(np.sum(t)) for t in terms)
    scale = sum(float(np.sum(np.abs(t))) for t in terms)
    if b.exact_value:
        assert value == b.value
    else:       # Numba's and NumPy's reductions may round differently
        assert math.isclose(value, b.value, rel_tol=1e-13, abs_tol=1e-13), (value, b.value)
    assert isinstance(tangent, float)
    assert abs(tangent - expected) <= 1e-12 * scale, (tangent, expected, scale)


@pytest.mark.parametrize("k", range(len(CASES)), ids=IDS)
def test_jvp_is_gradient_dot_tangent(k):
    _check_dot(built(k), np.random.default_rng(100 + k))


@pytest.mark.parametrize("name", CPU)
def test_jvp_cpu(name):
    _check_dot(built(IDS.index(name), "cpu"), np.random.default_rng(7))


@pytest.mark.parametrize("name", ["loop_branch", "elem_augassign", "slice_assign", "logreg_loss",
                                  "sv_vec", "ties"])
def test_jacobian_columns_are_gradient_entries(name):
    b = built(IDS.index(name))
    args = b.factory()
    zero = [np.zeros(args[p].shape) if isinstance(args[p], np.ndarray) else 0.0 for p in b.pos]
    for q, p in enumerate(b.pos):
        shape = np.shape(args[p])
        for idx in np.ndindex(*shape):
            tans = [z.copy() if isinstance(z, np.ndarray) else z for z in zero]
            if shape:
                tans[q][idx] = 1.0
            else:
                tans[q] = 1.0
            _, col = b.call(tans)
            entry = float(b.grads[q][idx]) if shape else float(b.grads[q])
            assert abs(col - entry) <= 1e-12 * max(abs(entry), 1e-300), (name, q, idx, col, entry)


def test_oracle_directional_derivative():
    fn, factory, wrt = CASES[IDS.index("logreg_loss")]
    j = coarsen.jvp(fn, None, target="python")
    args = factory()
    pos = [k for k, a in enumerate(args) if isinstance(a, float)
           or (isinstance(a, np.ndarray) and a.dtype.kind == "f")]
    rng = np.random.default_rng(5)
    tans = [rng.normal(size=args[p].shape) if isinstance(args[p], np.ndarray) else float(rng.normal())
            for p in pos]
    fd = fd_grad(fn, factory(), pos)
    expected = sum(float(np.sum(np.asarray(g, dtype=np.longdouble) * t)) for g, t in zip(fd, tans))
    _, tangent = j(*factory(), tangents=tuple(tans))
    assert abs(tangent - expected) <= 1e-8 * abs(expected), (tangent, expected)


def _inactive_path(x, y, flag):
    if flag > 0:
        return x * y + math.sin(x)
    return y * y + 1.0


def _no_dependence(x, a):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * a[i]
    return s + 0.0 * 0.0


def test_zero_tangent_on_an_inactive_path():
    j = coarsen.jvp(_inactive_path, "x", target="python")
    value, t = j(0.3, 2.0, -1, tangents=1.0)
    assert value == 5.0 and t == 0.0
    value, t = j(0.3, 2.0, 1, tangents=1.0)
    assert t == 2.0 + math.cos(0.3)
    j2 = coarsen.jvp(_no_dependence, "x", target="python")
    assert j2(0.5, np.arange(3.0), tangents=1.0) == (5.0, 0.0)
    assert "_dot" not in j2.source.split("def jvp__no_dependence")[1].split("return")[0] \
        .replace("x_dot)", "")        # no tangent statement: everything is inactive


def _renamed_a(w, b, X):
    total = 0.0
    for i in range(X.shape[0]):
        z = b
        for j in range(X.shape[1]):
            z += w[j] * X[i, j]
        total += math.log(1.0 + math.exp(-z)) * z
    return total


def _renamed_b(w_dot, _t1, x_bar):
    u = 0.0
    for k in range(x_bar.shape[0]):
        q = _t1
        for m in range(x_bar.shape[1]):
            q += w_dot[m] * x_bar[k, m]
        u += math.log(1.0 + math.exp(-q)) * q
    return u


def test_renaming_is_bit_identical():
    X = R.normal(size=(4, 3))
    w = R.normal(size=3)
    t = (R.normal(size=3), 0.7)
    ra = coarsen.jvp(_renamed_a, ("w", "b"), target="python")(w, 0.2, X, tangents=t)
    rb = coarsen.jvp(_renamed_b, ("w_dot", "_t1"), target="python")(w, 0.2, X, tangents=t)
    assert ra == rb
    assert np.float64(ra[1]).tobytes() == np.float64(rb[1]).tobytes()


def test_malformed_tangents_raise():
    fn, factory, _ = CASES[IDS.index("logreg_loss")]
    j = coarsen.jvp(fn, ("w", "b"), target="python")
    args = factory()
    with pytest.raises(coarsen.CoarsenError, match=r"tangent of 'w' has shape \(2,\), but w has shape \(3,\)"):
        j(*args, tangents=(np.zeros(2), 1.0))
    with pytest.raises(coarsen.CoarsenError, match=r"tangent of 'b' has shape \(3,\), but b is a scalar"):
        j(*args, tangents=(np.zeros(3), np.zeros(3)))
    with pytest.raises(coarsen.CoarsenError, match=r"1 tangent\(s\) given for 2 wrt parameter\(s\)"):
        j(*args, tangents=(np.zeros(3),))
    with pytest.raises(coarsen.CoarsenError, match="must be a tuple"):
        j(*args, tangents=np.zeros(3))
    with pytest.raises(coarsen.CoarsenError, match="needs tangents="):
        j(*args)
    with pytest.raises(coarsen.CoarsenError, match="dtype complex128"):
        j(*args, tangents=(np.zeros(3, complex), 1.0))
    e = pytest.raises(coarsen.CoarsenError, j, *args, tangents=(np.zeros(2), 1.0)).value
    assert e.filename and e.lineno and e.hint


def test_single_wrt_takes_a_bare_tangent_and_caller_arrays_are_kept():
    fn, factory, _ = CASES[IDS.index("slice_assign")]
    args = factory()
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    j = coarsen.jvp(fn, 0, target="python")
    t = np.ones(args[0].shape)
    value, tangent = j(*args, tangents=t)
    assert np.array_equal(t, np.ones(args[0].shape))
    for a, b in zip(args, before):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    g = coarsen.differentiate(fn, 0, coarsen=False, target="python")
    assert abs(tangent - float(np.sum(g(*args)))) <= 1e-12 * float(np.sum(np.abs(g(*args))))


def test_every_differentiable_primitive_has_a_forward_rule():
    missing = []
    for name, prim in REGISTRY.items():
        if prim.zero or prim.undifferentiable:
            continue
        differentiable = prim.partials is not None or prim.vjp is not None
        if differentiable and forward_rule(prim) not in ("jvp", "linear", "partials", "refused"):
            missing.append(name)
        if prim.linear and prim.vjp is not None:
            n = prim.arity or 2
            assert {p % n for p in prim.linear} <= set(prim.diff_positions(n)), name
    assert not missing, f"no forward rule (defjvp, deflinear, partials or refuse_jvp): {missing}"


def _refused_target(x):
    return math.sin(x) * 2.0


def test_a_refused_primitive_raises_before_code_is_generated():
    prim = REGISTRY["sin"]
    saved = prim.jvp_refused
    prim.jvp_refused = "refused for this test"
    try:
        j = coarsen.jvp(_refused_target, target="python")
        with pytest.raises(coarsen.CoarsenError, match="refused for this test") as e:
            j(0.3, tangents=(1.0,))
        assert e.value.lineno == _refused_target.__code__.co_firstlineno + 1 and e.value.hint
    finally:
        prim.jvp_refused = saved


def test_source_report_and_cache_namespace(capsys):
    b = built(IDS.index("logreg_loss"))
    b.call(b.tangents(np.random.default_rng(0)))
    src = b.j.source
    assert "def jvp_logreg_loss(w, b, X, y, lam, w_dot, b_dot)" in src
    assert "_ftape" not in src and "z_dot" in src and "# z += X[i, j] * w[j]" in src
    rep = b.j.report()
    assert "forward mode" in capsys.readouterr().out and rep.wrt == ("w", "b")
    art = b.j._last
    assert art.parts["transform"] == "jvp"
    again = coarsen.jvp(realistic.logreg_loss, ("w", "b"), target="python")
    again(*b.factory(), tangents=tuple(b.tangents(np.random.default_rng(0))))
    assert again._last.cached and again._last.cache_key == art.cache_key
    assert b.g._last.cache_key != art.cache_key


def polar(x, y):
    return math.hypot(x, y), math.atan2(y, x)


def test_jvp_of_a_tuple_result():
    # JAX's jvp of a tuple result gives tuples; coarsen refused the function ("returning a
    # tuple is not supported") while coarsen.jacobian accepted it (found by a probe)
    value, tangent = coarsen.jvp(polar)(0.6, 0.8, tangents=(1.0, 0.0))
    assert value == polar(0.6, 0.8)
    assert tangent == pytest.approx((0.6, -0.8), rel=1e-15)
    assert coarsen.jvp(polar, wrt="y")(0.6, 0.8, tangents=1.0)[1] == pytest.approx((0.8, 0.6), rel=1e-15)
    _, (dr, dth) = coarsen.jvp(polar, directions=2)(
        0.6, 0.8, tangents=(np.array([1.0, 0.0]), np.array([0.0, 1.0])))
    assert np.allclose(dr, [0.6, 0.8], rtol=1e-15) and np.allclose(dth, [-0.8, 0.6], rtol=1e-15)
    J = coarsen.jacobian(polar)(0.6, 0.8)
    assert J[0] == pytest.approx((0.6, 0.8), rel=1e-15) and J[1] == pytest.approx((-0.8, 0.6), rel=1e-15)
