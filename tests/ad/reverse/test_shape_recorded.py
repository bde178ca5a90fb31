"""Arrays saved by their shape alone (``coarsen.analysis.recording.shape_recorded``).

An array rebound in a loop is saved before each rebinding and restored when the rebinding is
reversed.  Where the reverse sweep reads only its shape (the reset of its adjoint,
``v_bar = np.zeros(v.shape)``), the tape holds its dimensions and the restore makes a new
array of that shape (``_pop_shapeN``); an array whose elements the reverse sweep reads is saved
whole.  Checked against the extended-precision oracle on both targets, with shapes that change
every trip (a wrong restored shape would break the adjoints' resets), the structure of what is
saved, and a renamed variant giving the same bits.
"""
import re
from types import SimpleNamespace

import numpy as np
import pytest

import coarsen
from coarsen.analysis.recording import shape_key, shape_recorded
from coarsen.ir.nodes import Array, Scalar
from tests.oracle import check_against_oracle


def shrink(x, w):
    v = x.copy()
    s = 0.0
    for k in range(3):
        v = np.sin(v[1:]) * 2.0 + v[:-1] * v[:-1]
        s += np.sum(w[:v.shape[0]] * v)
    return s


def shrink_renamed(_t1, v_bar):
    _s1 = _t1.copy()
    _pos = 0.0
    for _i1 in range(3):
        _s1 = np.sin(_s1[1:]) * 2.0 + _s1[:-1] * _s1[:-1]
        _pos += np.sum(v_bar[:_s1.shape[0]] * _s1)
    return _pos


def elems(x):
    t = x * 1.0
    s = 0.0
    for k in range(3):
        t = np.sin(t) + x
        s += np.sum(t * t)
    return s


def relax(d, c):
    p = d.copy()
    for k in range(p.shape[0]):
        p = np.maximum(p, p[k, :][None, :] * p[:, k][:, None])
    return np.sum(c * p)


def grow(x):
    v = x[:2].copy()
    s = 0.0
    for k in range(2, x.shape[0]):
        v = np.exp(x[:k + 1] * 0.5) * np.sum(v)
        s += np.sum(v * v)
    return s


def _args(name):
    rng = np.random.default_rng(3)
    return {"shrink": (rng.standard_normal(7), rng.standard_normal(7)),
            "elems": (rng.standard_normal(5),),
            "relax": (rng.uniform(0.5, 1.5, (4, 4)), rng.standard_normal((4, 4))),
            "grow": (0.3 * rng.standard_normal(6),)}[name]


PROGRAMS = {"shrink": shrink, "elems": elems, "relax": relax, "grow": grow}


@pytest.mark.parametrize("target", ["cpu", "python"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_oracle(name, target):
    check_against_oracle(PROGRAMS[name], _args(name), target=target, wrt=0)


def _saved(fn, args):
    src = coarsen.differentiate(fn, wrt=0, target="cpu").source_for(*args)
    shapes = set(re.findall(r"(\w+), _ipos = _pop_shape\d\(_itape, _ipos\)", src))
    whole = set(re.findall(r"_push_array\(_ftape, _fpos, (\w+)\)", src))
    return shapes, whole


def test_what_is_saved_by_its_shape():
    # shrink: ``v``'s elements are read through the nest's element reads, its shape by the
    # reset of its adjoint; elems: ``t``'s elements are read by the derivative of sin (whole)
    shapes, whole = _saved(shrink, _args("shrink"))
    assert "v" in shapes and "v" not in whole
    shapes, whole = _saved(elems, _args("elems"))
    assert "t" in whole and "t" not in shapes
    # the relaxation's nest temporary: its shape; the relaxed array: whole
    shapes, whole = _saved(relax, _args("relax"))
    assert "p" in whole and "p" not in shapes and len(shapes) == 1


def test_renamed_variant_gives_the_same_bits():
    args = _args("shrink")
    want = coarsen.differentiate(shrink, wrt=0, target="cpu").value_and_grad(*args)
    got = coarsen.differentiate(shrink_renamed, wrt=0, target="cpu").value_and_grad(*args)
    assert got[0] == want[0] and np.array_equal(got[1], want[1])


def test_shape_recorded_needs_a_shape_read_and_no_element_read():
    fn = SimpleNamespace(types={"a": Array("f64", 2), "b": Array("f64", 1), "c": Array("f64", 1),
                                "s": Scalar("f64")})
    reads = {shape_key("a"): [], "b": [], shape_key("b"): [], shape_key("s"): []}
    # a: its shape only; b: its elements as well; c: nothing read (saved whole); s: a scalar
    assert shape_recorded(fn, {"a", "b", "c", "s"}, reads) == {"a"}
