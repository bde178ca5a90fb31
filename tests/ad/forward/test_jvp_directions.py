"""The vector JVP, ``coarsen.jvp(fn, wrt, directions=K)``: K directions per call.

Row k of its result must be what the single-direction JVP gives for direction k, bit for bit
(each lane's tangent code is the single direction's, statement for statement), and the value
the single JVP's value.  Checked on the programs of ``tests/ad/forward/test_jvp.py`` (python target) and
a few on the cpu target; an array result (the bundle-adjustment residuals the bench times);
the columns of a forward-mode Jacobian; user names that look like the lanes' names; and the
refusals (wrong shapes, K out of range, ``batch``/``export``).
"""
from __future__ import annotations

import numpy as np
import pytest

import coarsen
from apps.bench.jacobians import stacked_residuals
from tests.ad.forward.test_jvp import CASES, IDS, _positions

K = 3


def _directions(args, pos, rng, k=K):
    return [rng.normal(size=(k,) + np.shape(args[p])) for p in pos]


def _check_lanes(fn, factory, wrt, target, k=K):
    args = factory()
    pos, single = _positions(fn, args, wrt)
    tans = _directions(args, pos, np.random.default_rng(11), k)
    jk = coarsen.jvp(fn, wrt, target=target, directions=k)
    j1 = coarsen.jvp(fn, wrt, target=target)
    value, tk = jk(*factory(), tangents=tans[0] if single else tuple(tans))
    out = np.shape(fn(*factory()))
    assert np.shape(tk) == (k,) + out
    for lane in range(k):
        row = [t[lane] if np.ndim(args[p]) else float(t[lane]) for t, p in zip(tans, pos)]
        v1, t1 = j1(*factory(), tangents=row[0] if single else tuple(row))
        np.testing.assert_array_equal(value, v1)
        np.testing.assert_array_equal(tk[lane], t1)
    # the caller's tangents are not modified
    again = _directions(args, pos, np.random.default_rng(11), k)
    for a, b in zip(tans, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("k", range(len(CASES)), ids=IDS)
def test_each_lane_is_the_single_direction_jvp(k):
    fn, factory, wrt = CASES[k]
    _check_lanes(fn, factory, wrt, "python")


@pytest.mark.parametrize("name", ["logreg_loss", "heat_slices", "loop_branch"])
def test_each_lane_on_the_cpu_target(name):
    fn, factory, wrt = CASES[IDS.index(name)]
    _check_lanes(fn, factory, wrt, "cpu")


def _ba_args(p=7):
    r = np.random.default_rng(5)
    C = r.normal(size=(p, 11)) * 0.1
    C[:, 3:6] = r.normal(size=(p, 3))
    C[:, 6] = 1.5
    C[2, 0:3] = 0.0                      # the theta == 0 branch
    P = r.normal(size=(p, 3))
    P[:, 2] += 8.0
    return C, P, r.uniform(0.5, 1.5, p), r.normal(size=(p, 2))


def test_array_result_and_jacobian_columns():
    """An array result: ``(K, p, 3)``; with unit directions, the dense forward Jacobian's
    columns."""
    _check_lanes(stacked_residuals, _ba_args, ("C", "P", "w"), "python", k=4)
    C, P, w, feats = _ba_args()
    J = coarsen.jacobian(stacked_residuals, wrt="w", mode="forward", target="python")(
        C, P, w, feats)
    jk = coarsen.jvp(stacked_residuals, wrt=("C", "P", "w"), directions=len(w),
                     target="python")
    _, cols = jk(C, P, w, feats, tangents=(np.zeros((len(w),) + C.shape),
                                          np.zeros((len(w),) + P.shape), np.eye(len(w))))
    np.testing.assert_array_equal(np.moveaxis(cols, 0, -1), J)


def clashing(x, a):
    x_dot0_ = x * a
    x_dots = np.sin(x_dot0_)
    _dots_out1 = np.sum(x_dots * x)
    a_dot1_ = a * _dots_out1
    return a_dot1_ + np.sum(x_dot0_)


def plain(x, a):
    u = x * a
    v = np.sin(u)
    s = np.sum(v * x)
    t = a * s
    return t + np.sum(u)


def test_user_names_like_the_lanes_names_change_nothing():
    args = (np.array([0.3, -0.7, 1.1]), 0.8)
    tans = (np.random.default_rng(2).normal(size=(2, 3)), np.array([1.0, -0.5]))
    got = coarsen.jvp(clashing, directions=2, target="python")(*args, tangents=tans)
    ref = coarsen.jvp(plain, directions=2, target="python")(*args, tangents=tans)
    np.testing.assert_array_equal(got[1], ref[1])
    assert got[0] == ref[0]


def test_refusals():
    x = np.array([0.3, -0.7, 1.1])
    with pytest.raises(coarsen.CoarsenError, match="not both"):
        coarsen.jacobian(plain, directions=4, parallel=True)
    with pytest.raises(coarsen.CoarsenError, match="directions"):
        coarsen.jacobian(plain, directions=40)
    j = coarsen.jvp(plain, directions=2, target="python")
    with pytest.raises(coarsen.CoarsenError, match=r"shape \(2, 3\)"):
        j(x, 0.8, tangents=(np.ones((3, 3)), np.ones(2)))
    with pytest.raises(coarsen.CoarsenError, match=r"shape \(2,\)"):
        j(x, 0.8, tangents=(np.ones((2, 3)), 1.0))
    for bad in (0, 0.5, True, -1, 33):
        with pytest.raises(coarsen.CoarsenError, match="directions"):
            coarsen.jvp(plain, directions=bad)
    with pytest.raises(coarsen.CoarsenError, match="batch"):
        j.batch((0, None))
    with pytest.raises(coarsen.CoarsenError, match="export"):
        j.export("/nonexistent/never_written.py")


def spring_chain(x, k, c):
    """A vector result of several float inputs: 3 + 1 + 1 = 5 inputs, less than the lanes of
    a block, and 11 + 3 + 1 = 15 in the BA case (a block and a part)."""
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(n):
        left = x[i - 1] if i > 0 else 0.0
        right = x[i + 1] if i < n - 1 else 0.0
        out[i] = k * (left - 2.0 * x[i] + right) - c * x[i] ** 3
    return out


@pytest.mark.parametrize("case", ["spring", "ba"])
def test_forward_jacobian_in_blocks_is_the_single_direction_columns(case):
    """``coarsen.jacobian(mode="forward", directions=8)`` runs blocks of 8 directions per
    call: every column must be one single-direction JVP's, also where the last block is
    partial."""
    # the cpu target on the small program, the python target on the larger one (each cpu
    # compile of the BA residuals' 8 lanes takes seconds)
    if case == "spring":
        fn, args, wrt = spring_chain, (np.array([0.3, -0.2, 0.5]), 1.3, 0.4), ("x", "k", "c")
        target = "cpu"
    else:
        fn, args, wrt = stacked_residuals, _ba_args(3), ("C", "P", "w")
        target = "python"
    J = coarsen.jacobian(fn, wrt=wrt, mode="forward", directions=8, target=target)(*args)
    j1 = coarsen.jvp(fn, wrt=wrt, target=target)
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    pos = [names.index(w) for w in wrt]
    for q, p in enumerate(pos):
        size = int(np.size(args[p]))
        for e in range(size):
            tans = [np.zeros(np.shape(args[r])) if np.ndim(args[r]) else 0.0 for r in pos]
            if np.ndim(args[p]):
                tans[q].reshape(-1)[e] = 1.0
            else:
                tans[q] = 1.0
            col = j1(*args, tangents=tuple(tans))[1]
            got = J[q][..., e] if np.ndim(args[p]) == 1 else \
                (J[q] if np.ndim(args[p]) == 0 else J[q].reshape(col.shape + (size,))[..., e])
            np.testing.assert_array_equal(got, col)
