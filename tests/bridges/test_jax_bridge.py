"""``coarsen.jax.function`` with the real JAX: ``check_grads`` through ``jnp`` operations,
``jit``, ``grad``, ``value_and_grad``, ``vmap`` (values and per-example gradients against
coarsen's own ``g.batch``), a plain-JAX training loop through a ``while``-loop ODE integrator,
and every refusal the bridge makes (forward mode, second derivatives, traced loop counts,
dtypes, ``argnums`` outside ``wrt``)."""
import math

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.test_util import check_grads

import coarsen

jax.config.update("jax_enable_x64", True)


def poly_sin(x, a, n):
    s = 0.0
    for i in range(n):
        s = s + a * math.sin(x[i]) * x[i] ** 2
    return s


def ode_final(k, y0, t_end, h):
    """Euler steps of y' = -k y + sin(t) until t reaches t_end (a while rule): y(t_end)^2."""
    y = y0
    t = 0.0
    while t < t_end:
        y = y + h * (-k * y + math.sin(t))
        t = t + h
    return y * y


@pytest.fixture(scope="module")
def F():
    return coarsen.jax.function(poly_sin, wrt=("x", "a"))


X = np.linspace(0.1, 1.0, 5)
A = 1.3


def test_eager_grad_and_jit(F):
    value, (gx, ga) = F.gradient.value_and_grad(X, A, 5)
    y = F(jnp.asarray(X), A, 5)
    assert y.shape == () and y.dtype == jnp.float64 and float(y) == value
    gx1, ga1 = jax.grad(F, argnums=(0, 1))(jnp.asarray(X), A, 5)
    np.testing.assert_array_equal(gx1, gx)
    assert float(ga1) == ga
    vg = jax.jit(jax.value_and_grad(F, argnums=(0, 1)), static_argnums=2)
    v2, (gx2, ga2) = vg(jnp.asarray(X), A, 5)
    assert float(v2) == value
    np.testing.assert_array_equal(gx2, gx)
    assert float(ga2) == ga
    # the loop count closed over under jit
    assert float(jax.jit(lambda x: F(x, A, 5))(jnp.asarray(X))) == value


def test_check_grads_through_jnp_ops(F):
    def G(x, a):
        return jnp.exp(F(jnp.tanh(x) * 2.0, a * a, 5)) * 0.3 + jnp.sum(x ** 2)

    check_grads(G, (jnp.asarray(X), jnp.asarray(A)), order=1, modes=["rev"])


def test_vmap_is_coarsens_batch(F):
    Xs = np.stack([X, 2.0 * X, 0.5 * X])
    As = np.array([1.3, 0.7, -0.4])
    vals, (gx, ga) = jax.vmap(jax.value_and_grad(F, argnums=(0, 1)), in_axes=(0, 0, None))(
        jnp.asarray(Xs), jnp.asarray(As), 5)
    bvals, (bgx, bga) = F.gradient.batch((0, 0, None))(Xs, As, 5)
    np.testing.assert_array_equal(vals, bvals)
    np.testing.assert_array_equal(gx, bgx)
    np.testing.assert_array_equal(ga, bga)
    # a shared wrt argument: its gradient per example (coarsen's batch sums it)
    vals, (gx, ga) = jax.jit(jax.vmap(jax.value_and_grad(F, argnums=(0, 1)), in_axes=(0, None, None)),
                             static_argnums=2)(jnp.asarray(Xs), A, 5)
    bvals, (bgx, bga) = F.gradient.batch((0, 0, None))(Xs, np.full(3, A), 5)
    np.testing.assert_array_equal(vals, bvals)
    np.testing.assert_array_equal(gx, bgx)
    np.testing.assert_array_equal(ga, bga)
    # values alone under vmap
    np.testing.assert_array_equal(jax.vmap(F, in_axes=(0, None, None))(jnp.asarray(Xs), A, 5), bvals)


def test_plain_jax_training_loop():
    F = coarsen.jax.function(ode_final, wrt="k")

    def loss(w, feats, y0):
        k = feats @ w[:2] + w[2]
        per = jax.vmap(F, in_axes=(0, 0, None, None))(k, y0, 1.0, 0.05)
        return jnp.mean(per)

    step = jax.jit(jax.value_and_grad(loss))
    feats = jnp.asarray(np.random.default_rng(0).random((8, 2)))
    y0 = jnp.linspace(0.5, 1.5, 8)
    w = jnp.array([0.1, -0.2, 0.3])
    losses = []
    for _ in range(5):
        value, dw = step(w, feats, y0)
        losses.append(float(value))
        w = w - 0.5 * dw
    assert all(b < a for a, b in zip(losses, losses[1:])), losses


def test_float32_values_and_gradients(F):
    x32 = jnp.asarray(X, dtype=jnp.float32)
    y, g = jax.value_and_grad(F)(x32, jnp.float32(A), 5)
    assert y.dtype == jnp.float32 and g.dtype == jnp.float32
    value, (gx, _) = F.gradient.value_and_grad(np.asarray(x32, np.float64), float(np.float32(A)), 5)
    assert float(y) == np.float32(value)
    np.testing.assert_array_equal(g, gx.astype(np.float32))


def test_refusals(F):
    x = jnp.asarray(X)
    with pytest.raises(coarsen.CoarsenError, match="'n' is a traced integer") as e:
        jax.jit(F)(x, A, 5)
    assert "static_argnums" in e.value.hint
    with pytest.raises(coarsen.CoarsenError, match="second derivatives"):
        jax.grad(jax.grad(lambda a: F(x, a, 5)))(A)
    with pytest.raises(coarsen.CoarsenError, match="second derivatives"):
        jax.hessian(lambda x: F(x, A, 5))(x)
    # forward mode: JAX's own refusal of a custom_vjp function (the module docstring)
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(lambda a: F(x, a, 5), (A,), (1.0,))
    Fx = coarsen.jax.function(poly_sin, wrt="x")
    with pytest.raises(coarsen.CoarsenError, match="'a' is differentiated by JAX, but it is not in wrt"):
        jax.grad(Fx, argnums=1)(x, A, 5)
    np.testing.assert_array_equal(jax.grad(Fx)(x, A, 5), F.gradient(X, A, 5)[0])
    with pytest.raises(coarsen.CoarsenError, match="float16"):
        F(x.astype(jnp.float16), A, 5)
    with pytest.raises(coarsen.CoarsenError, match="complex"):
        F(x.astype(jnp.complex64), A, 5)
    with pytest.raises(coarsen.CoarsenError, match="'a' is in wrt but got int"):
        F(x, 2, 5)


def test_nested_vmap_and_shared_arguments(F):
    rng = np.random.default_rng(0)
    Xs, As = rng.random((2, 3, 5)), rng.random(3)
    inner = jax.vmap(jax.value_and_grad(F, argnums=(0, 1)), in_axes=(0, 0, None))
    v, (gx, ga) = jax.vmap(inner, in_axes=(0, None, None))(Xs, As, 5)
    for i in range(2):
        for j in range(3):
            value, (g1, g2) = F.gradient.value_and_grad(Xs[i, j], As[j], 5)
            assert v[i, j] == value and ga[i, j] == g2
            np.testing.assert_array_equal(gx[i, j], g1)
    # a shared argument outside wrt stays shared in coarsen's batch
    Fx = coarsen.jax.function(poly_sin, wrt="x")
    v, gx = jax.vmap(jax.value_and_grad(Fx), in_axes=(0, None, None))(Xs[0], A, 5)
    bv, bgx = Fx.gradient.batch((0, None, None))(Xs[0], A, 5)
    np.testing.assert_array_equal(v, bv)
    np.testing.assert_array_equal(gx, bgx)


def test_python_target():
    Fp = coarsen.jax.function(poly_sin, wrt=("x", "a"), target="python")
    gx, ga = jax.grad(Fp, argnums=(0, 1))(jnp.asarray(X), A, 5)
    want = coarsen.differentiate(poly_sin, wrt=("x", "a"))(X, A, 5)
    np.testing.assert_allclose(gx, want[0], rtol=1e-14)
    assert float(ga) == pytest.approx(want[1], rel=1e-14)
