"""Slices of slices as one slice (``coarsen.ir.slice_chains``).

``u = t[s2]`` of ``t = a[s1]`` becomes ``u = a[s3]`` with ``s3`` computed by integer
statements.  Checked: the composed slice selects the elements ``a[s1][s2]`` selects, in order,
for every pair of a grid of slices (steps of both signs, bounds omitted, negative, past the
ends, empty results) on axes of several lengths, by running the statements the pass writes
with the runtime's own ``_slice_start``/``_slice_len``; the conditions (a rebinding between
the two reads, an integer item, a view used again); gradients against the extended-precision
oracle on both targets (durbin's reversed prefix, 2-D chains, empty ones); a renamed variant
giving the same bits; the input IR not modified.
"""
import importlib
import itertools
import re
from dataclasses import replace

import numpy as np
import pytest

import coarsen
from apps.arrays.durbin import objective as durbin
from coarsen.codegen import helpers as H
from coarsen.frontend.lower import lower
from coarsen.ir.nodes import Assign, Const, Slice, Var, walk
from coarsen.ir.printer import format_function
from coarsen.ir.slice_chains import compose_slice_chains
from coarsen.ir.typeinfer import infer
from coarsen.transforms.artifact import arg_type
from tests.oracle import check_against_oracle


def _typed(fn, args):
    fn_ir, _ = lower(fn)
    infer(fn_ir, [arg_type("a", a)[0] for a in args])
    return fn_ir


def _composed(fn, args):
    fn_ir = _typed(fn, args)
    before = format_function(fn_ir)
    out = compose_slice_chains(fn_ir)
    assert format_function(fn_ir) == before, "compose_slice_chains modified its input"
    return out


_OPS = {"chain_lower": H._chain_lower, "chain_upper": H._chain_upper}


def _run_index(out, a, name="a"):
    """The index of ``u = getitem(a; s3)`` in ``out``, its statements run with ``a``'s shape."""
    env = {}

    def val(x):
        if x is None:
            return None
        return x.value if isinstance(x, Const) else env[x.name]

    for st in walk(out.body):
        if not isinstance(st, Assign):
            continue
        if st.op == "dim":
            env[st.target] = a.shape[st.args[1].value]
        elif st.op in _OPS:
            env[st.target] = _OPS[st.op](*[val(x) for x in st.args])
        elif st.op == "getitem" and st.target == "u":
            assert st.args == (Var(name),), "not composed"
            return tuple(slice(val(it.lower), val(it.upper), val(it.step)) for it in st.index)
    raise AssertionError("no u")


def _src(s):
    lo, hi, st = s
    return f"{'' if lo is None else lo}:{'' if hi is None else hi}{'' if st is None else ':' + str(st)}"


SLICES = [(None, None, -1), (None, 3, None), (1, None, None), (-2, None, None), (None, -1, None),
          (2, 5, None), (5, 2, -1), (None, None, 2), (None, None, -2), (1, None, -3),
          (-1, -9, -1), (9, None, None), (3, 1, None), (-9, 2, 1), (None, 0, -1)]


def test_the_composed_slice_selects_what_the_chain_selects(tmp_path, monkeypatch):
    pairs = list(itertools.product(SLICES, SLICES))
    (tmp_path / "chain_grid.py").write_text("".join(
        f"def f{k}(a):\n    t = a[{_src(s1)}]\n    u = t[{_src(s2)}]\n    return u[0]\n\n\n"
        for k, (s1, s2) in enumerate(pairs)))
    monkeypatch.syspath_prepend(str(tmp_path))
    grid = importlib.import_module("chain_grid")
    checked = 0
    for k, (s1, s2) in enumerate(pairs):
        out = _composed(getattr(grid, f"f{k}"), [np.zeros(4)])
        for n in (0, 1, 2, 5, 8):
            a = np.arange(n, dtype=float)
            want = a[slice(*s1)][slice(*s2)]
            got = a[_run_index(out, a)]
            assert np.array_equal(got, want), (s1, s2, n, got, want)
            checked += 1
    assert checked == len(SLICES) ** 2 * 5


def test_two_axes_compose_each_and_a_full_slice_keeps_the_other():
    def f(A):
        t = A[1:, ::-1]
        u = t[::2, 1:]
        return u[0, 0]

    out = _composed(f, [np.zeros((3, 3))])
    for shape in ((0, 4), (5, 6), (7, 1)):
        A = np.arange(np.prod(shape), dtype=float).reshape(shape)
        assert np.array_equal(A[_run_index(out, A, "A")], A[1:, ::-1][::2, 1:])

    def g(A):
        t = A[:, 2:]
        u = t[1:3]
        return u[0, 0]

    out = _composed(g, [np.zeros((3, 3))])
    # each axis composed alone: no statement is needed for either
    assert not [s for s in walk(out.body) if isinstance(s, Assign) and s.op == "chain_lower"]
    u = [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "u"][0]
    assert u.args == (Var("A"),)
    assert u.index == (Slice(Const(1), Const(3), None), Slice(Const(2), None, None))


def rebound(a, k):
    t = a[:k]
    a = a * 2.0
    u = t[::-1]
    return u[0]


def int_item(a, k):
    t = a[:k]
    u = t[1]
    return u


def bound_changed(a, k):
    t = a[:k]
    k = k + 1
    u = t[::-1]
    return u[0]


def used_again(a, k):
    t = a[:k]
    u = t[::-1]
    return u[0] + t[0]


def variable_step(a, k, s):
    t = a[:k]
    u = t[::s]
    return u[0]


def computed(a):
    t = a * 2.0
    u = t[::-1]
    return u[0]


def unary(a):
    t = np.sin(a)
    u = t[1:][::-1]
    return u[0]


def trailing(A):
    t = A[1:, :]
    u = t[::-1]
    return u[0, 0]


def new_axis(a):
    t = a[:, None]
    u = t[::-1]
    return u[0, 0]


def test_only_slices_of_slices_with_constant_steps_compose():
    for fn, args in ((variable_step, [np.zeros(5), 3, 2]), (computed, [np.zeros(5)]),
                     (new_axis, [np.zeros(5)])):
        fn_ir = _typed(fn, args)
        assert compose_slice_chains(fn_ir) is fn_ir, fn.__name__
    # sin(a)[1:][::-1]: the slice of the slice composes, onto the new array, not onto a
    out = _composed(unary, [np.zeros(5)])
    u = [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "u"][0]
    sin = [s for s in walk(out.body) if isinstance(s, Assign) and s.op == "sin"][0]
    assert u.args == (Var(sin.target),)
    # a full slice last is dropped: one item, the composed first axis
    out = _composed(trailing, [np.zeros((4, 3))])
    u = [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "u"][0]
    assert u.args == (Var("A"),) and len(u.index) == 1 and u.index[0].step == Const(-1)
    A = np.arange(12.0).reshape(4, 3)
    assert np.array_equal(A[_run_index(out, A, "A")], A[1:, :][::-1])


def test_near_misses_and_the_view_kept_where_used_again():
    args = [np.zeros(5), 3]
    fn_ir = _typed(int_item, args)
    assert compose_slice_chains(fn_ir) is fn_ir
    # a rebinding between the two reads is another version (SSA): the chain reads the first
    for fn, again in ((rebound, "a_2"), (bound_changed, "k_2")):
        out = _composed(fn, args)
        u = [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "u"][0]
        made = [s for s in walk(out.body) if isinstance(s, Assign) and s.target not in
                {t.target for t in walk(_typed(fn, args).body) if isinstance(t, Assign)}]
        assert u.args == (Var("a"),) and made
        assert not [s for s in made if Var(again) in s.args]
        # the same IR with the rebinding written to the same name: left alone
        fn_ir = _typed(fn, args)
        name = again.split("_")[0]
        fn_ir.body = [replace(s, target=name) if isinstance(s, Assign) and s.target == again else s
                      for s in fn_ir.body]
        assert compose_slice_chains(fn_ir) is fn_ir, fn.__name__
    out = _composed(used_again, args)
    u = [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "u"][0]
    assert u.args == (Var("a"),) and out.views["u"] == "a"
    assert [s for s in walk(out.body) if isinstance(s, Assign) and s.target == "t"]
    # durbin: both chains composed, the view r[:k] dropped (its one use composed)
    out = _composed(durbin, _durbin_args(4))
    sliced = {s.target for s in walk(out.body) if isinstance(s, Assign) and s.op == "getitem"
              and s.index and all(isinstance(i, Slice) for i in s.index)}
    assert not [s for s in walk(out.body) if isinstance(s, Assign) and s.op == "getitem"
                and s.args and isinstance(s.args[0], Var) and s.args[0].name in sliced]
    assert not [s for s in walk(out.body) if isinstance(s, Assign) and s.op == "getitem"
                and s.args == (Var("r"),) and s.index == (Slice(None, Var("k"), None),)]


def durbin_renamed(_t8, y_bar):
    k = _t8.shape[0]
    n = np.zeros(k)
    n[0] = -_t8[0]
    _i1 = 1.0
    a = -_t8[0]
    for r in range(1, k):
        _i1 = (1.0 - a * a) * _i1
        a = -(_t8[r] + _t8[:r][::-1] @ n[:r]) / _i1
        n[:r] = n[:r] + a * n[:r][::-1]
        n[r] = a
    return np.sum(y_bar * n)


def chains(a, B):
    s = np.sum(a[1:][::2] * a[:-1][::-2]) + np.sum(np.sin(a[::-1][1:-1]))
    s += np.sum(B[1:, ::-1][::2, 1:] ** 2) + np.sum(a[:0][::-1]) + np.sum(a[5:2:-1][::-1] * 3.0)
    return s


def _durbin_args(n, seed=0):
    g = np.random.default_rng(seed)
    return [0.5 ** np.arange(1, n + 1) * (1.0 + 0.05 * g.standard_normal(n)), g.standard_normal(n)]


@pytest.mark.parametrize("target", ["python", "cpu"])
def test_durbin_and_chains_match_the_oracle(target):
    for n in (1, 2, 6, 11):
        check_against_oracle(durbin, _durbin_args(n), target=target)
    r = np.random.default_rng(4)
    for n, shape in ((7, (4, 5)), (2, (1, 3)), (10, (6, 2))):
        check_against_oracle(chains, [r.normal(size=n), r.normal(size=shape)], target=target)


def test_durbin_reads_r_itself_and_a_renamed_variant_gives_the_same_bits():
    args = _durbin_args(12, seed=3)
    g = coarsen.differentiate(durbin)
    src = g.source_for(*args)
    # the dot reads r's elements through the composed slice's bounds: no view of r is made
    # (none is pushed or popped per trip), and the loop tapes no element of r
    assert "_chain_lower(" in src and not re.search(r"^\s+\w+ = r\[[^\]]*:[^\]]*\]$", src, re.M)
    assert not re.search(r"_ftape\[_fpos\] = _t\d+\n\s+_fpos \+= 1\n\s+_t\d+ = r\[", src)
    want = g.value_and_grad(*args)
    got = coarsen.differentiate(durbin_renamed).value_and_grad(*args)
    assert got[0] == want[0] and all(np.array_equal(a, b) for a, b in zip(got[1], want[1]))
