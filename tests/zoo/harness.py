"""The checks shared by ``tests/endtoend/test_zoo.py`` and ``tests/endtoend/test_realistic.py``.

For one case ``(fn, args_factory, wrt)``, one target, one coarsen setting and one ``plan``
(default ``"auto"``; ``tests/analysis/test_strategies.py`` forces the others):

* ``g = coarsen.differentiate(fn, wrt, coarsen=..., target=..., plan=...)`` is built once per
  (function, wrt, target, coarsen, plan) and cached (Numba compiles take about a second each);
* ``g(*args)`` returns the structure the API promises (a tuple for ``wrt=None`` or a sequence,
  a single value for one name/position), each gradient with its parameter's shape and dtype
  (a float scalar for a float scalar), all within the oracle's tolerance
  (``tests.oracle.tolerances_for``: rtol 1e-8 in float64, 2e-5 with float32 inputs);
* the caller's arguments are unchanged afterwards (also for functions that mutate their inputs:
  the gradient is w.r.t. the values at entry);
* ``g.value_and_grad(*args)`` returns the original function's value (rtol 1e-12 in float64,
  1e-6 with float32 inputs, whose arithmetic Numba and NumPy may round differently) and the
  same gradients.
"""
from __future__ import annotations

import numpy as np

from tests.oracle import assert_grad_close, fd_grad, resolve_wrt, tolerances_for

_G_CACHE: dict = {}
_ORACLE_CACHE: dict = {}


def _py(fn):
    return getattr(fn, "py_func", fn)


def _wrt_key(wrt):
    return repr(wrt)


def build(fn, wrt, target, coarse, plan="auto"):
    """The cached gradient object (or the cached exception, re-raised)."""
    import coarsen

    key = (id(fn), _wrt_key(wrt), target, coarse, plan)
    if key not in _G_CACHE:
        try:
            _G_CACHE[key] = ("ok", coarsen.differentiate(fn, wrt, coarsen=coarse,
                                                         target=target, plan=plan))
        except Exception as e:  # noqa: BLE001 - re-raised on every use
            _G_CACHE[key] = ("err", e)
    kind, v = _G_CACHE[key]
    if kind == "err":
        raise v
    return v


def expected(fn, factory, wrt):
    """The oracle's gradients for a case (cached), and whether a single value is expected."""
    key = (id(fn), id(factory), _wrt_key(wrt))
    if key not in _ORACLE_CACHE:
        args = factory()
        pos, single = resolve_wrt(fn, args, wrt)
        _ORACLE_CACHE[key] = (fd_grad(fn, args, pos), pos, single)
    return _ORACLE_CACHE[key]


def _same_args(a, b):
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b)):
        if isinstance(y, np.ndarray):
            assert isinstance(x, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, k
            assert np.array_equal(x, y), f"argument {k} was modified by the gradient call"
        else:
            assert x == y and type(x) is type(y), k


def _check_structure_and_types(got, args, pos, single, label):
    grads = [got] if single else got
    if single:
        assert not isinstance(got, (tuple, list)), f"{label}: a single wrt gives a single value"
    else:
        assert isinstance(got, tuple), f"{label}: expected a tuple, got {type(got).__name__}"
        assert len(got) == len(pos), f"{label}: {len(got)} gradients for {len(pos)} parameters"
    for gk, p in zip(grads, pos):
        a = args[p]
        if isinstance(a, np.ndarray):
            assert isinstance(gk, np.ndarray), \
                f"{label}: gradient of argument {p} is {type(gk).__name__}, not an array"
            assert gk.shape == a.shape, f"{label}: arg {p}: shape {gk.shape} != {a.shape}"
            assert gk.dtype == a.dtype, f"{label}: arg {p}: dtype {gk.dtype} != {a.dtype}"
        else:
            assert np.ndim(gk) == 0 and isinstance(gk, (float, np.floating)), \
                f"{label}: gradient of scalar argument {p} is {type(gk).__name__} {gk!r}"
            want = np.float32 if isinstance(a, np.float32) else np.float64
            assert np.asarray(gk).dtype == want, \
                f"{label}: arg {p}: dtype {np.asarray(gk).dtype} != {np.dtype(want)}"


def check_gradient(fn, factory, wrt, target, coarse, label, plan="auto"):
    g = build(fn, wrt, target, coarse, plan)
    exp, pos, single = expected(fn, factory, wrt)
    args = factory()
    got = g(*args)
    _same_args(args, factory())
    _check_structure_and_types(got, args, pos, single, label)
    rtol, floor = tolerances_for(args)
    assert_grad_close(got if not single else got, exp if not single else exp[0], rtol=rtol,
                      floor=floor, err_msg=f"{label}: gradient vs oracle")
    # a second call (the specialization is reused) gives the same numbers
    again = g(*factory())
    for a, b in zip([got] if single else got, [again] if single else again):
        assert np.array_equal(np.asarray(a), np.asarray(b)), f"{label}: second call differs"
    assert isinstance(g.source, str) and g.source.strip(), f"{label}: empty g.source"


def check_value_and_grad(fn, factory, wrt, target, coarse, label, plan="auto"):
    g = build(fn, wrt, target, coarse, plan)
    exp, pos, single = expected(fn, factory, wrt)
    args = factory()
    out = g.value_and_grad(*args)
    assert isinstance(out, tuple) and len(out) == 2, f"{label}: value_and_grad returns a pair"
    value, got = out
    _same_args(args, factory())
    ref = _py(fn)(*factory())
    rtol, floor = tolerances_for(args)
    vtol = 1e-12 if rtol == 1e-8 else 1e-6
    assert np.ndim(value) == 0 and isinstance(value, (float, np.floating)), \
        f"{label}: value is {type(value).__name__} {value!r}"
    assert np.isclose(float(value), float(ref), rtol=vtol, atol=0.0), \
        f"{label}: value {float(value)!r} != original {float(ref)!r}"
    _check_structure_and_types(got, args, pos, single, label)
    assert_grad_close(got, exp if not single else exp[0], rtol=rtol, floor=floor,
                      err_msg=f"{label}: value_and_grad's gradient vs oracle")
