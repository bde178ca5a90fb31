"""Sharp edges of the API (issue 9): keyword and default arguments bind like the function;
a ``wrt`` that names no parameter is refused by ``differentiate`` itself; generated and
exported headers name the source file relative to its package, never by an absolute path."""
import importlib
import sys

import numpy as np
import pytest

import coarsen
from coarsen.frontend.source import display_path


def model(w, b, x, scale=2.0, n=3):
    s = 0.0
    for i in range(n):
        s += scale * (w[i] * x[i] + b) ** 2
    return s


W = np.array([0.5, -1.0, 2.0])
XS = np.array([1.0, 2.0, 3.0])


def grads_equal(p, q):
    assert len(p) == len(q)
    for a, b in zip(p, q):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_keyword_mixed_and_default_arguments_bind_like_the_function(target):
    g = coarsen.differentiate(model, wrt=("w", "b", "scale"), target=target)
    ref_value, ref = g.value_and_grad(W, 0.3, XS, 2.0, 3)
    assert ref_value == pytest.approx(model(W, 0.3, XS))
    calls = [
        ((W, 0.3, XS), {}),                                  # defaults of the function
        ((), {"w": W, "b": 0.3, "x": XS}),                   # all by keyword
        ((), {"x": XS, "b": 0.3, "w": W, "n": 3}),           # any order
        ((W,), {"x": XS, "b": 0.3}),                         # mixed
        ((W, 0.3), {"x": XS, "scale": 2.0}),
    ]
    for args, kwargs in calls:
        grads_equal(g(*args, **kwargs), ref)
        value, grads = g.value_and_grad(*args, **kwargs)
        assert value == ref_value
        grads_equal(grads, ref)
    # a default overridden by keyword changes the answer as it does for the function
    value, grads = g.value_and_grad(W, 0.3, XS, n=2, scale=1.0)
    assert value == pytest.approx(model(W, 0.3, XS, scale=1.0, n=2))
    assert grads[0][2] == 0.0 and grads[0][0] != 0.0


def test_wrong_bindings_are_refused_like_the_function():
    g = coarsen.differentiate(model, wrt="w", target="python")
    with pytest.raises(coarsen.CoarsenError, match="missing a required argument: 'x'"):
        g(W, 0.3)
    with pytest.raises(coarsen.CoarsenError, match="unexpected keyword argument 'y'"):
        g(W, 0.3, XS, y=1.0)
    with pytest.raises(coarsen.CoarsenError, match="multiple values for argument 'w'"):
        g(W, 0.3, XS, w=W)
    with pytest.raises(coarsen.CoarsenError, match="too many positional arguments"):
        g.value_and_grad(W, 0.3, XS, 2.0, 3, 4)


@pytest.mark.parametrize("wrt,match", [
    ("v", "wrt names 'v', which is not a parameter of model"),
    (("w", "bb"), "wrt names 'bb'"),
    (5, "wrt position 5 is out of range"),
    (-1, "wrt position -1 is out of range"),
    ((0, 7), "wrt position 7 is out of range"),
    ((), "wrt is empty"),
    ((1.5,), "parameter names or positions"),
    (("w", "w"), "wrt names 'w' more than once"),
    ((1, "b"), "wrt names 'b' more than once"),
])
def test_bad_wrt_is_refused_by_differentiate(wrt, match):
    with pytest.raises(coarsen.CoarsenError, match=match):
        coarsen.differentiate(model, wrt=wrt, target="python")
    # every transform checks it where it is made (a repeated one crashed with a SyntaxError
    # from the generated code)
    for transform in (coarsen.jvp, coarsen.jacobian, coarsen.hessian, coarsen.hvp):
        with pytest.raises(coarsen.CoarsenError, match=match):
            transform(model, wrt=wrt, target="python")


def test_good_wrt_by_name_and_position_still_work():
    g = coarsen.differentiate(model, wrt=(1, "w"), target="python")
    db, dw = g(W, 0.3, XS)
    assert isinstance(db, float) and dw.shape == W.shape


# ------------------------------------------------------------------ file names in headers
SOURCE = '''\
import numpy as np


def loss(w, x):
    return np.sum(w * w * x)
'''


@pytest.fixture
def package(tmp_path, monkeypatch):
    root = tmp_path / "site"
    (root / "mypkg" / "sub").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "sub" / "__init__.py").write_text("")
    (root / "mypkg" / "model.py").write_text(SOURCE)
    (root / "mypkg" / "sub" / "deep.py").write_text(SOURCE)
    (root / "loose_model.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path / "cache"))
    importlib.invalidate_caches()
    yield root
    for name in ("mypkg", "mypkg.model", "mypkg.sub", "mypkg.sub.deep", "loose_model"):
        sys.modules.pop(name, None)


def test_headers_name_the_file_relative_to_its_package(package, tmp_path):
    cases = [("mypkg.model", "mypkg/model.py"), ("mypkg.sub.deep", "mypkg/sub/deep.py"),
             ("loose_model", "loose_model.py")]
    w, x = np.ones(3), np.arange(3.0)
    for modname, rel in cases:
        fn = importlib.import_module(modname).loss
        assert display_path(fn) == rel
        g = coarsen.differentiate(fn, target="python")
        g(w, x)
        first = g.source.splitlines()[0]
        assert f"({rel}:4)" in first, first
        assert str(package) not in g.source
        out = g.export(tmp_path / f"exported_{modname.replace('.', '_')}.py")
        text = out.read_text()
        assert f"source: {rel}:4 ({modname}.loss)" in text
        assert str(package) not in text and str(tmp_path) not in text


def test_display_path_never_absolute_for_this_package():
    from coarsen import examples
    assert display_path(examples.ridge_loss) == "coarsen/examples.py"
    here = display_path(model)        # this test module: "test_api_edges.py" or under tests/
    assert here.endswith("test_api_edges.py") and not here.startswith("/")


def test_coarsen_error_pickles_with_its_parts():
    """An error raised in another process (a Dask worker) reads as it was raised: pickled
    with its parts, not its formatted text (which would be formatted a second time)."""
    import pickle
    from coarsen import CoarsenError
    e = CoarsenError("x is bad", filename="m.py", lineno=3, col_offset=4,
                     source_line="    y = x + 1\n", hint="do y")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is CoarsenError and str(back) == str(e)
    assert (back.problem, back.filename, back.lineno, back.col_offset, back.hint) == \
        ("x is bad", "m.py", 3, 4, "do y")
    assert str(back).count("CoarsenError:") == 1


def _float_in_place(w, b, X):
    s = 0.0
    for i in range(X.shape[0]):
        z = b                       # a float parameter, then updated in place
        for j in range(X.shape[1]):
            z += X[i, j] * w[j]
        s += z * z
    return s


def test_a_float_parameter_updated_in_place_is_not_a_written_array():
    """``z = b; z += ...`` writes no array: the kind keeps the direct hit (before, ``b`` counted
    as written, and every call went through the aliasing check and the conversions: 5 us a
    call on logistic regression).  Arrays of another byte order are their own kind, converted,
    with the same gradient."""
    X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    w, b = np.array([0.3, -0.2, 0.1]), 0.7
    g = coarsen.differentiate(_float_in_place, wrt=("w", "b"))
    got = [g(w, b, X) for _ in range(3)]
    assert g.last_specialization.written == frozenset()
    hits = list(g._fast_arrays.values())
    assert len(hits) == 1 and type(hits[0]) is tuple
    z = b + X @ w
    np.testing.assert_allclose(got[-1][0], 2 * X.T @ z, rtol=1e-14)
    assert got[-1][1] == pytest.approx(2 * z.sum(), rel=1e-14)
    swapped = g(w, b, X.astype(">f8"))
    assert len(g._fast_arrays) == 2
    np.testing.assert_array_equal(swapped[0], got[-1][0])
    assert swapped[1] == got[-1][1]


def _element_in_place(bh, X):
    s = 0.0
    for i in range(bh.shape[0]):
        a = bh[i]                   # an element of an array parameter: a number
        for j in range(X.shape[1]):
            a += X[i, j]
        s += a * a
    return s


def test_an_element_updated_in_place_is_not_a_view():
    """``a = bh[i]; a += ...`` (an RNN's pre-activation) writes nothing of ``bh``: the kind
    keeps the direct hit; a row of a matrix (fewer ints than axes) is still a view."""
    from coarsen.transforms.artifact import written_positions
    from coarsen.frontend.lower import lower
    from coarsen.ir.nodes import Array
    bh, X = np.array([0.5, -0.25]), np.array([[1.0, 2.0], [0.5, -1.5]])
    g = coarsen.differentiate(_element_in_place, wrt="bh")
    got = [g(bh, X) for _ in range(3)]
    assert g.last_specialization.written == frozenset()
    assert all(type(h) is tuple for h in g._fast_arrays.values())
    np.testing.assert_allclose(got[-1], 2 * (bh + X.sum(axis=1)), rtol=1e-14)
    fn_ir, _ = lower(_element_in_place)
    # bh typed as a matrix: bh[i] is a row, a view, and a += ... may write it
    assert written_positions(fn_ir, (Array("f64", 2), Array("f64", 2))) == frozenset({0})
    assert written_positions(fn_ir, (Array("f64", 1), Array("f64", 2))) == frozenset()


def ema_default(c, beta=0.9, n=5):
    s = 0.0
    for _ in range(n):
        s = beta * s + (1.0 - beta) * c
    return s


def test_report_and_source_bind_arguments_as_the_call_does():
    """g(2.5) took the defaults; g.report(2.5) said "takes 3 arguments, got 1"."""
    import io
    g = coarsen.differentiate(ema_default, wrt="c", target="python")
    j = coarsen.jvp(ema_default, wrt="c", target="python")
    for rep in (g.report(2.5, file=io.StringIO()), g.report(c=2.5, n=3, file=io.StringIO()),
                j.report(2.5, file=io.StringIO())):
        assert rep is not None
    assert g.source_for(2.5) == g.source_for(2.5, 0.9, 5) and "ema_default" in j.source_for(c=2.5)


def test_wrong_bindings_are_type_errors_too():
    """As Python's own for the function: ``except TypeError`` catches them (cpu target's
    fast path included)."""
    g = coarsen.differentiate(model, wrt="w")
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        g(W, 0.3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        g(W, 0.3, XS, y=1.0)
