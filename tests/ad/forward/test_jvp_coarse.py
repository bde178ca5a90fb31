"""Coarse forward mode (``coarsen.jvp``, the default): closed-form loops give closed-form
tangents, lifted blocks go through their partials where that is cheaper, and every answer is
the fine-grained JVP's and the gradient's.

Checked: a loop in closed form (``apps.series``) against ``coarsen=False`` and against the
gradient, on both targets, at a generic point and at the closed form's singular point
(``r == 1``, where the loop runs) and with zero trips; the generated code has no loop on the
closed form's path; the user's names chosen like the compiler's temporaries; the same
function split into helpers; blocks forced through their partials (``COARSE_BLOCK_RATIO``
raised, in a fresh cache) on the JVP test programs, against fine forward mode; a block SymPy
simplifies, which the cost estimate sends through its partials; the report says what was
lifted; the cache keeps coarse and fine apart.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import coarsen
import coarsen.ad.forward.segments as fsegments
from apps import series
from tests.ad.forward.test_jvp import CASES, IDS

WRT = ("a", "r", "x")
T = (0.3, -0.7, 1.1)


def _expected(fn, args, wrt, t):
    g = coarsen.differentiate(fn, wrt=wrt, coarsen=False, target="python")
    v, grads = g.value_and_grad(*args)
    return v, sum(gi * ti for gi, ti in zip(grads, t)), sum(abs(gi * ti) for gi, ti in zip(grads, t))


@pytest.mark.parametrize("target", ["python", "cpu"])
@pytest.mark.parametrize("args", [(0.5, 0.97, 1.5, 40), (0.5, 1.0, 1.5, 40), (0.5, 0.97, 1.5, 0),
                                  (-0.2, -1.3, 0.4, 9)], ids=["generic", "singular", "zero_trips", "negative"])
def test_closed_form_tangent(target, args):
    j = coarsen.jvp(series.objective, wrt=WRT, target=target)
    v, t = j(*args, tangents=T)
    vf, tf = coarsen.jvp(series.objective, wrt=WRT, target=target, coarsen=False)(*args, tangents=T)
    v0, expected, scale = _expected(series.objective, args, WRT, T)
    assert v == pytest.approx(v0, rel=1e-12, abs=1e-12)
    assert abs(t - expected) <= 1e-12 * max(scale, 1.0)
    assert abs(t - tf) <= 1e-12 * max(scale, 1.0)
    assert j._last.stats["closed_forms"] == 1
    # the closed form's path runs no loop: the only loop is the singular points' one
    src = j.source
    assert "in closed form, with its tangents" in src
    assert len(re.findall(r"^\s*for i in range\(", src, re.M)) == 1


def renamed(a, r, x, n):
    _tan1 = 0.0
    s_dot = 1.0
    for _n1 in range(n):
        _tan1 += a * _n1 * _n1 + x * s_dot
        s_dot *= r
    return _tan1


def _power(p, r):
    return p * r


def split(a, r, x, n):
    s = 0.0
    p = 1.0
    for i in range(n):
        s = _term(s, a, i, x, p)
        p = _power(p, r)
    return s


def _term(s, a, i, x, p):
    return s + a * i * i + x * p


@pytest.mark.parametrize("fn", [renamed, split], ids=["renamed", "helpers"])
def test_metamorphic_same_tangent(fn):
    args = (0.5, 0.97, 1.5, 40)
    ref = coarsen.jvp(series.objective, wrt=WRT, target="python")(*args, tangents=T)
    got = coarsen.jvp(fn, wrt=WRT, target="python")(*args, tangents=T)
    _, _, scale = _expected(series.objective, args, WRT, T)
    assert got[0] == pytest.approx(ref[0], rel=1e-13)
    assert abs(got[1] - ref[1]) <= 1e-12 * scale


def test_report_and_cache_keep_modes_apart(capsys):
    args = (0.5, 0.97, 1.5, 40)
    j = coarsen.jvp(series.objective, wrt=WRT, target="python")
    jf = coarsen.jvp(series.objective, wrt=WRT, target="python", coarsen=False)
    j(*args, tangents=T)
    jf(*args, tangents=T)
    assert j._last.cache_key != jf._last.cache_key
    assert re.search(r"^\s*for i in range\(", jf.source, re.M) and "closed form" not in jf.source
    text = j.report().format()
    assert "coarse (1 of 1 segments lifted: 1 loops in closed form" in text
    assert "fine-grained" in jf.report().format()


def simplifies(x, y):
    # SymPy: log(exp(x)) is x, exp(log(y)) is y (sums or products in which a term cancels,
    # (x + y) - y, are kept as they are: float rounding, coarsen.ad.lift)
    t = math.log(math.exp(x)) + math.exp(math.log(y)) * math.log(math.exp(y))
    u = t * t * math.exp(math.log(x)) + math.exp(math.log(y))
    return u * math.sin(x) + math.cos(t) * u


def test_a_block_sympy_simplifies_goes_through_its_partials(forced_blocks):
    # (the cost ratio forced: the example's block was (x + y) - y, which SymPy folds to x; a
    # sum in which a term cancels is no longer lifted, float64 rounding being what it computes)
    j = coarsen.jvp(simplifies, target="python")
    v, t = j(0.7, 1.3, tangents=(0.4, -0.9))
    v0, expected, scale = _expected(simplifies, (0.7, 1.3), None, (0.4, -0.9))
    assert v == pytest.approx(v0, rel=1e-14)
    assert abs(t - expected) <= 1e-12 * scale
    assert j._last.stats["coarse_blocks"] == 1, j.source


@pytest.fixture
def forced_blocks(monkeypatch, tmp_path):
    # every lifted block through its partials; a fresh cache (the ratio is not in the key)
    monkeypatch.setattr(fsegments, "COARSE_BLOCK_RATIO", 1e9)
    monkeypatch.setenv("COARSEN_CACHE_DIR", str(tmp_path / "cache"))


def _tangent_args(fn, args, wrt):
    import inspect
    params = list(inspect.signature(fn).parameters)
    names = [wrt] if isinstance(wrt, str) else list(wrt) if wrt is not None else \
        [p for p, a in zip(params, args) if isinstance(a, float) or
         (isinstance(a, np.ndarray) and a.dtype.kind == "f")]
    ts = []
    for k, w in enumerate(names):
        a = args[params.index(w)]
        ts.append(0.3 + 0.6 * np.cos(np.arange(np.size(a)) * 1.7 + k).reshape(np.shape(a))
                  if np.ndim(a) else 0.3 + 0.6 * math.cos(k))
    return ts[0] if isinstance(wrt, str) else tuple(ts)


FORCED = [(k, "python") for k in range(len(CASES))] + \
    [(IDS.index("logreg_loss"), "cpu")]


@pytest.mark.parametrize("k,target", FORCED, ids=[f"{IDS[k]}-{t}" for k, t in FORCED])
def test_blocks_through_partials_equal_fine(forced_blocks, k, target):
    fn, make, wrt = CASES[k]
    args = make()
    ts = _tangent_args(fn, args, wrt)
    j = coarsen.jvp(fn, wrt=wrt, target=target)
    v, t = j(*make(), tangents=ts)
    vf, tf = coarsen.jvp(fn, wrt=wrt, target=target, coarsen=False)(*make(), tangents=ts)
    np.testing.assert_allclose(v, vf, rtol=1e-12, atol=1e-12)
    scale = np.max(np.abs(tf)) if np.size(tf) else 0.0
    np.testing.assert_allclose(t, tf, rtol=1e-10, atol=1e-12 * max(scale, 1.0))
    st = j._last.stats
    assert st["coarse_blocks"] == st["lifted"] - st["closed_forms"]
