"""Custom rules and the gradient's own names: one fresh-name supply per generated module
(``coarsen/ir/fresh.py``, issue 41).

A ``custom_vjp`` backward rule is lowered apart from the function and runs first in the reverse
sweep.  Its temporaries used to be numbered ``_t<k>`` again by scalarization and in-place
rewriting (which saw only the function's body), so the rule's ``_t6 = 2.0 * g`` overwrote the
loop extent ``_t6 = x.shape[0]`` and the reverse loop made 2 trips instead of 4 (cpu target:
``[-1.29, 1.01, 0, 0]`` for ``[0.479, -1.819, 3.957, 0.107]``); a rule with its own loop gave
``[1.2, 0, 0, 0]``; a rule that copies and updates in place crashed on the python target
(``'float' object has no attribute 'shape'``) and failed to type on cpu.  Each repro is checked
against the extended-precision oracle on both targets and in both modes, with metamorphic
variants (the caller's names spelt as the compiler's, the code split into helpers, other
shapes, float32: which must be the float64 gradient rounded, bit for bit).  Every module the
suite generates also passes the name check (``coarsen.ir.fresh_check``, on in
``tests/conftest.py``); the last tests show that check failing where two generators bind one
name.
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from coarsen.ir.fresh import NameClash, NameSupply
from coarsen.ir.fresh_check import check_names
from tests.oracle import check_against_oracle

TARGETS = ["python", "cpu"]
MODES = [True, False]


# ----------------------------------------------------------------------------- the rules
@coarsen.custom_vjp
def sumsq(v):
    return np.sum(v * v)


def sumsq_fwd(v):
    return np.sum(v * v), (v,)


def sumsq_bwd(res, g):
    v, = res
    return (2.0 * g * v,)


sumsq.defvjp(sumsq_fwd, sumsq_bwd)


@coarsen.custom_vjp
def sumsq_loop(v):
    return np.sum(v * v)


def sumsq_loop_fwd(v):
    return np.sum(v * v), (v,)


def sumsq_loop_bwd(res, g):
    v, = res
    out = np.empty(v.shape[0])
    for i in range(v.shape[0]):
        out[i] = 2.0 * g * v[i]
    return (out,)


sumsq_loop.defvjp(sumsq_loop_fwd, sumsq_loop_bwd)


@coarsen.custom_vjp
def meansq(v):
    return np.mean(v * v)


def meansq_fwd(v):
    return np.mean(v * v), (v,)


def meansq_bwd(res, g):
    v, = res
    t = v.copy()
    t *= 2.0 * g / v.shape[0]
    return (t,)


meansq.defvjp(meansq_fwd, meansq_bwd)


@coarsen.custom_vjp
def sumsq_named(v):
    return np.sum(v * v)


def sumsq_named_fwd(v):
    return np.sum(v * v), (v,)


def sumsq_named_bwd(res, g):
    # the rule's own locals spelt as the compiler's temporaries
    _t6, = res
    _t7 = 2.0 * g
    _i1 = _t7 * _t6
    return (_i1,)


sumsq_named.defvjp(sumsq_named_fwd, sumsq_named_bwd)


W = np.array([0.3, 0.7, -1.1, 2.0])


# ----------------------------------------------------------------------------- the callers
def through_sin(x):
    return sumsq(np.sin(x * x))


def through_loop_rule(x):
    return sumsq_loop(np.sin(x * x))


def after_inplace(x):
    a = x.copy()
    a *= 2.0
    return sumsq(a)


def weighted(x):
    b = np.sin(x * W + 1.0) * W
    return meansq(b)


# metamorphic: the caller's names spelt as the compiler's
def through_sin_renamed(_t6):
    _i1 = np.sin(_t6 * _t6)
    _pa1 = sumsq(_i1)
    return _pa1


def after_inplace_renamed(_t2):
    _t6 = _t2.copy()
    _t6 *= 2.0
    return sumsq(_t6)


# metamorphic: split into helpers
def _squash(x):
    return np.sin(x * x)


def through_sin_split(x):
    return sumsq(_squash(x))


def _scaled(x, w):
    return np.sin(x * w + 1.0) * w


def weighted_split(x):
    return meansq(_scaled(x, W))


def both_rules(x):
    """Two rules in one gradient, with the caller scalarizing and updating in place between."""
    a = np.sin(x * x)
    s = sumsq_loop(a)
    a *= 3.0
    return s + meansq(a) + sumsq_named(np.cos(x))


def rule_with_compiler_names(x):
    return sumsq_named(np.sin(x * x))


X4 = np.array([0.5, -1.0, 2.0, 0.3])
CASES = {
    "through_sin": (through_sin, X4),
    "through_loop_rule": (through_loop_rule, X4),
    "after_inplace": (after_inplace, X4),
    "weighted": (weighted, X4),
    "through_sin_renamed": (through_sin_renamed, X4),
    "after_inplace_renamed": (after_inplace_renamed, X4),
    "through_sin_split": (through_sin_split, X4),
    "weighted_split": (weighted_split, X4),
    "both_rules": (both_rules, X4),
    "rule_with_compiler_names": (rule_with_compiler_names, X4),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("coarse", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_beside_scalarized_code_matches_the_oracle(case, target, coarse):
    fn, x = CASES[case]
    check_against_oracle(fn, (x.copy(),), target, coarse=coarse)


def test_the_issue_repro_gives_the_issue_numbers():
    g = coarsen.differentiate(through_sin, wrt="x", target="cpu")
    np.testing.assert_allclose(g(X4), [0.47942554, -1.81859485, 3.95743299, 0.10741774],
                               rtol=1e-7)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n", [1, 2, 7])
def test_other_lengths(n, target):
    x = np.linspace(-1.3, 0.9, n)
    for fn in (through_sin, through_loop_rule, after_inplace, both_rules):
        check_against_oracle(fn, (x,), target)


@pytest.mark.parametrize("target", TARGETS)
def test_matrices(target):
    x = np.linspace(-1.3, 0.9, 6).reshape(2, 3)
    for fn in (through_sin, after_inplace, through_sin_split):
        check_against_oracle(fn, (x,), target)


@pytest.mark.parametrize("target", TARGETS)
def test_metamorphic_variants_give_the_same_bits(target):
    x = np.array([0.25, -0.75, 1.5, 0.1])
    grad = {fn.__name__: coarsen.differentiate(fn, wrt=0, target=target)(x.copy())
            for fn in (through_sin, through_sin_renamed, through_sin_split,
                       after_inplace, after_inplace_renamed, weighted, weighted_split)}
    np.testing.assert_array_equal(grad["through_sin"], grad["through_sin_renamed"])
    np.testing.assert_array_equal(grad["through_sin"], grad["through_sin_split"])
    np.testing.assert_array_equal(grad["after_inplace"], grad["after_inplace_renamed"])
    np.testing.assert_allclose(grad["weighted"], grad["weighted_split"], rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("target", TARGETS)
def test_float32_is_the_float64_gradient_rounded(target):
    x = np.array([0.5, -1.0, 2.0, 0.3], dtype=np.float32)
    for fn in (through_sin, after_inplace, weighted, both_rules):
        g = coarsen.differentiate(fn, wrt=0, target=target)
        got = g(x.copy())
        assert got.dtype == np.float32
        want = g(x.astype(np.float64)).astype(np.float32)
        np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- the check
def test_supply_never_hands_out_a_name_twice():
    s = NameSupply(["x", "_t1"])
    assert s.numbered("_t", "scalarize") == "_t2"
    assert s.numbered("_t", "inplace") == "_t3"
    assert s.plain("_t2", "frontend") == "_t22"
    f = s.fork()
    assert f.numbered("_t", "reverse") == "_t4" and "_t4" not in s
    with pytest.raises(NameClash):
        s.take("_t2", "hoist")
    # a name built from a user's (a rule named s1) never enters the segment symbols' names
    assert s.plain("_s1_g", "frontend") == "_us1_g"


def test_check_fails_where_two_generators_bind_one_name():
    import gast
    s = NameSupply(["x"])
    s.numbered("_t", "frontend")
    ok = gast.parse("def f(x):\n    _t1 = x\n    _fpos = 0\n    _t1_bar = 1.0\n    return _t1\n")
    check_names(ok, s)
    for body in ("_t9 = x",          # no generator took it
                 "_ftape = x",       # fine: the driver's
                 "_s1_t0 = x"):      # fine: lifting's
        mod = gast.parse(f"def f(x):\n    {body}\n    return x\n")
        if body.startswith("_t9"):
            with pytest.raises(NameClash, match="no known generator"):
                check_names(mod, s)
        else:
            check_names(mod, s)
    s.take("_fw1", "scalarize")      # a supply name in a rewrite's namespace: two generators
    with pytest.raises(NameClash, match="_fw1"):
        check_names(gast.parse("def f(x):\n    _fw1 = x\n    return x\n"), s)
