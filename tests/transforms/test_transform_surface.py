"""The transforms' common surface (``coarsen.transforms.base.Transform``): every transform has
``source_for``, ``ir``, ``report(*args, file=None)`` returning a ``TransformReport``, ``export``
and ``batch`` (a ``CoarsenError`` where it has none)."""
import io

import numpy as np
import pytest

import coarsen
from coarsen import CoarsenError
from coarsen.transforms.base import Transform
from coarsen.transforms.fast_path import arity_class
from coarsen.transforms.report import TransformReport


def scalar_f(x, w):
    return np.sum(np.sin(x) * w) + 0.5 * np.sum(x * x)


def vector_f(x, w):
    return np.sin(x) * w


def tuple_f(x, w):
    return np.sum(x * w), np.sum(x * x)


X = np.array([0.1, 0.7, -0.3])
W = np.array([1.5, -0.25, 2.0])


MAKE = {"gradient": lambda: coarsen.differentiate(scalar_f, "x"),
        "jvp": lambda: coarsen.jvp(scalar_f, "x"),
        "jacobian": lambda: coarsen.jacobian(vector_f, "x"),
        "hessian": lambda: coarsen.hessian(scalar_f, "x"),
        "hvp": lambda: coarsen.hvp(scalar_f, "x")}


@pytest.mark.parametrize("which", ["gradient", "jvp", "jacobian", "hessian", "hvp"])
def test_every_transform_has_the_surface(which):
    t, args = MAKE[which](), (X, W)
    assert isinstance(t, Transform)
    src = t.source_for(*args)
    assert "def " in src
    assert isinstance(t.ir(*args), str) and t.ir(*args)
    buf = io.StringIO()
    rep = t.report(*args, file=buf)
    assert isinstance(rep, TransformReport)
    assert buf.getvalue().rstrip("\n") == rep.format() == str(rep)
    assert t.returns_single and t.module_arrays == ()
    # the keyword binding of a call
    assert t.source_for(X, w=W) == src


def test_report_of_the_last_call_without_arguments():
    j = coarsen.jacobian(vector_f, "x")
    with pytest.raises(CoarsenError, match="call the jacobian once"):
        j.report(file=io.StringIO())
    J = j(X, W)
    np.testing.assert_allclose(J, np.diag(np.cos(X) * W))
    assert j.report(file=io.StringIO()).mode == j.mode_used == "reverse"   # 3 outputs, 3 inputs
    assert j.last_signature == ("float64[:]", "float64[:]")


@pytest.mark.parametrize("target", ["cpu", "python"])
def test_jacobian_batch_is_the_jacobian_per_set(target):
    j = coarsen.jacobian(vector_f, "x", target=target)
    xs = np.stack([X, 2 * X, -X, X + 0.5])
    bJ = j.batch((0, None))(xs, W)
    assert bJ.shape == (4, 3, 3)
    fwd = coarsen.jacobian(vector_f, "x", mode="forward", target=target)
    for b in range(4):
        assert np.array_equal(bJ[b], fwd(xs[b], W))
    # two wrt parameters, both batched: a tuple of (B, out, in) blocks
    both = coarsen.jacobian(vector_f, target=target).batch(0)(xs, np.stack([W] * 4))
    assert isinstance(both, tuple) and [b.shape for b in both] == [(4, 3, 3), (4, 3, 3)]
    np.testing.assert_allclose(both[1][2], np.diag(np.sin(xs[2])))
    # a scalar-valued function: one gradient row per set
    rows = coarsen.jacobian(scalar_f, "x", target=target).batch((0, None))(xs, W)
    g = coarsen.differentiate(scalar_f, "x", target=target)
    assert rows.shape == (4, 3)
    for b in range(4):
        np.testing.assert_allclose(rows[b], g(xs[b], W), rtol=1e-13)
    # a tuple result: one (B, *x.shape) block per returned value
    pair = coarsen.jacobian(tuple_f, "x", mode="forward", target=target)
    blocks = coarsen.jacobian(tuple_f, "x", target=target).batch((0, None))(xs, W)
    assert isinstance(blocks, tuple) and [b.shape for b in blocks] == [(4, 3), (4, 3)]
    for b in range(4):
        one = pair(xs[b], W)
        assert np.array_equal(blocks[0][b], one[0]) and np.array_equal(blocks[1][b], one[1])


def test_differentiate_makes_the_fast_path_class_of_the_arity():
    g = coarsen.differentiate(scalar_f)
    assert type(g) is arity_class(coarsen.Gradient, 2) and isinstance(g, coarsen.Gradient)
    assert g.last_signature is None
    g(X, W)
    assert g.last_signature == ("float64[:]", "float64[:]")
    # built directly, a Gradient still ends as its arity's class
    direct = coarsen.Gradient(scalar_f, None, True, "cpu")
    assert type(direct) is type(g)
