"""An independent finite-difference gradient oracle in extended precision.

This module knows nothing about coarsen: it runs the *user's* function, unchanged, on
``np.longdouble`` values (80-bit extended precision on x86-64: 64-bit mantissa, eps ~1.1e-19)
and differentiates it numerically.

How a plain float64 function is made to run in extended precision
-----------------------------------------------------------------
:func:`extended` clones the function (same code object) with a new globals dict in which

* ``math`` is replaced by :data:`MATH_LD`, a namespace whose functions are NumPy ufuncs
  (``np.sin``, ``np.expm1``, ``np.arctan2`` for ``atan2``, ...) that keep ``np.longdouble``;
  ``erf``, ``erfc``, ``gamma`` and ``lgamma`` go through mpmath at 80-bit precision;
  names imported with ``from math import sin`` are mapped the same way;
* ``numpy`` is replaced by :data:`NP_LD`, a proxy that forwards everything to NumPy except the
  array constructors (``zeros``, ``ones``, ``empty``, ``full``, ``eye``, ``array``, ``asarray``,
  the ``*_like`` forms, ``arange``, ``linspace``), which create ``longdouble`` arrays where NumPy
  would create float64/float32 ones, ``np.float64``/``np.float32``/``np.pi``/``np.e``, and
  ``np.linalg.solve`` (Gaussian elimination with partial pivoting in ``longdouble``: NumPy's
  LAPACK has no extended precision; :data:`LINALG_LD`);
* the builtin ``float`` is replaced by a longdouble conversion;
* every plain user function it references (directly, through a user module such as
  ``import tests.zoo.helpers_mod as hm``, or as a ``numba.njit`` dispatcher via ``.py_func``) is
  cloned recursively the same way; closure cells holding such functions are cloned too.

Arguments are converted before each evaluation: float arrays (float64 or float32) become fresh
``longdouble`` copies, float scalars become ``np.longdouble``; ints, bools and int arrays are
passed unchanged (int arrays are copied).  Every evaluation gets fresh copies, so a function that
mutates its input arrays is differentiated with respect to the values at entry, and the caller's
arrays are never modified.

The finite-difference scheme
----------------------------
For every scalar component x of a differentiated parameter, with h0 = ``rel_step`` * max(1, |x|)
(default 1e-3), the central difference D(h) = (f(x+h) - f(x-h)) / (2h) is evaluated at
h0, h0/2, h0/4, h0/8 (the step actually used is the representable ((x+h)-(x-h))/2) and
combined by Richardson extrapolation into R1 (O(h^4)), R2 (O(h^6)) and R3 (O(h^8)); the error
estimate is |R3 - R2|.  When that estimate is above 1e-13 relative the table is recomputed with
h0/10 and h0/100 (parameters whose natural scale is far below 1, such as a time step of 0.01,
need them) and the attempt with the smallest estimate is kept.  On smooth functions the
truncation error is negligible and the rounding error ~eps_ld / h ~ 1e-16..1e-14 (times the
function's condition), so the result is accurate to ~1e-12 relative or better: four orders of
magnitude below the 1e-8 tolerance the tests use.

The oracle refuses to give an answer it cannot vouch for.  It raises :class:`OracleError`
when the first table (step h0) has an error estimate above 1e-4 relative to
max(|R|, 1e-4 * max|gradient|): the function is not smooth within h0 of the point (a branch, a
kink or a data-dependent trip count flips there), so a test input that sits too close to a
discontinuity is reported as a bad test input.  It also raises when the best estimate stays
above 1e-9 relative.

Comparing gradients
-------------------
:func:`assert_grad_close` uses the mixed criterion, per component::

    |got - expected| <= rtol * max(|expected|, scale) + atol,
    scale = floor * max |expected|   (the max over *all* components of *all* gradients compared)

With the defaults (rtol=1e-8, floor=1e-4) an entry is held to 1e-8 relative accuracy unless it is
more than 10^4 times smaller than the largest gradient entry; such tiny entries (which in float64
are sums of terms of the size of the largest ones and can legitimately carry ~1e-16 * max of
cancellation error) are held to an absolute 1e-12 * max|expected|.  Nothing else is relaxed.
"""
from __future__ import annotations

import builtins
import inspect
import math
import types

import numpy as np

__all__ = [
    "OracleError", "MATH_LD", "NP_LD", "extended", "to_extended", "float_positions",
    "resolve_wrt", "fd_grad", "fd_directional", "assert_grad_close", "tolerances_for",
]

LD = np.longdouble


class OracleError(AssertionError):
    """The oracle cannot produce a trustworthy gradient (non-smooth point, bad arguments)."""


# --------------------------------------------------------------------------------------
# math in extended precision
# --------------------------------------------------------------------------------------

def _ld(x):
    return LD(x)


def _mp_unary(name):
    def fn(x):
        import mpmath

        def one(v):
            s = np.format_float_scientific(LD(v), unique=True)
            with mpmath.workprec(96):
                r = getattr(mpmath, name)(mpmath.mpf(s))
                return LD(mpmath.nstr(r, 25, strip_zeros=False))

        if isinstance(x, np.ndarray):
            out = np.empty(x.shape, dtype=LD)
            for idx in np.ndindex(x.shape):
                out[idx] = one(x[idx])
            return out
        return one(x)

    fn.__name__ = name
    return fn


def _lgamma(x):
    import mpmath
    s = np.format_float_scientific(LD(x), unique=True)
    with mpmath.workprec(96):
        r = mpmath.log(abs(mpmath.gamma(mpmath.mpf(s))))
        return LD(mpmath.nstr(r, 25, strip_zeros=False))


def _log(x, base=None):
    if base is None:
        return np.log(LD(x))
    return np.log(LD(x)) / np.log(LD(base))


def _hypot(*xs):
    if len(xs) == 2:
        return np.hypot(LD(xs[0]), LD(xs[1]))
    return np.sqrt(sum(LD(v) * LD(v) for v in xs))


def _wrap1(uf):
    def fn(x):
        return uf(LD(x) if not isinstance(x, np.ndarray) else x)
    fn.__name__ = getattr(uf, "__name__", "f")
    return fn


def _wrap2(uf):
    def fn(x, y):
        x = LD(x) if not isinstance(x, np.ndarray) else x
        y = LD(y) if not isinstance(y, np.ndarray) else y
        return uf(x, y)
    fn.__name__ = getattr(uf, "__name__", "f")
    return fn


class _MathLD(types.SimpleNamespace):
    """``math`` with every real function evaluated in ``np.longdouble``."""

    def __getattr__(self, name):  # anything not overridden (floor, isclose, comb...) is math's
        return getattr(math, name)


_PI = LD(4) * np.arctan(LD(1))

MATH_LD = _MathLD(
    sin=_wrap1(np.sin), cos=_wrap1(np.cos), tan=_wrap1(np.tan),
    asin=_wrap1(np.arcsin), acos=_wrap1(np.arccos), atan=_wrap1(np.arctan),
    atan2=_wrap2(np.arctan2),
    sinh=_wrap1(np.sinh), cosh=_wrap1(np.cosh), tanh=_wrap1(np.tanh),
    asinh=_wrap1(np.arcsinh), acosh=_wrap1(np.arccosh), atanh=_wrap1(np.arctanh),
    exp=_wrap1(np.exp), exp2=_wrap1(np.exp2), expm1=_wrap1(np.expm1),
    log=_log, log1p=_wrap1(np.log1p), log10=_wrap1(np.log10), log2=_wrap1(np.log2),
    sqrt=_wrap1(np.sqrt), cbrt=_wrap1(np.cbrt), pow=_wrap2(np.power), fabs=_wrap1(np.abs),
    hypot=_hypot, copysign=_wrap2(np.copysign), fmod=_wrap2(np.fmod),
    degrees=_wrap1(np.degrees), radians=_wrap1(np.radians),
    erf=_mp_unary("erf"), erfc=_mp_unary("erfc"), gamma=_mp_unary("gamma"), lgamma=_lgamma,
    isnan=np.isnan, isinf=np.isinf, isfinite=np.isfinite,
    pi=_PI, e=np.exp(LD(1)), tau=2 * _PI, inf=math.inf, nan=math.nan,
    fsum=lambda it: sum((LD(v) for v in it), LD(0)),
)

# --------------------------------------------------------------------------------------
# numpy in extended precision
# --------------------------------------------------------------------------------------


def _ld_dtype(dtype, default_float=True):
    if dtype is None:
        return LD if default_float else None
    if dtype is float or np.dtype(dtype).kind == "f":
        return LD
    return dtype


def _make_np_overrides():
    def zeros(shape, dtype=None, **kw):
        return np.zeros(shape, dtype=_ld_dtype(dtype), **kw)

    def ones(shape, dtype=None, **kw):
        return np.ones(shape, dtype=_ld_dtype(dtype), **kw)

    def empty(shape, dtype=None, **kw):
        # deterministic garbage: NaN, so that reading an unwritten element is visible
        out = np.empty(shape, dtype=_ld_dtype(dtype), **kw)
        if out.dtype.kind == "f":
            out.fill(np.nan)
        return out

    def full(shape, fill_value, dtype=None, **kw):
        if dtype is None:
            dtype = np.result_type(fill_value)
            if dtype.kind in "iub":
                return np.full(shape, fill_value, dtype=dtype, **kw)
        return np.full(shape, fill_value, dtype=_ld_dtype(dtype), **kw)

    def eye(N, M=None, k=0, dtype=None, **kw):
        return np.eye(N, M, k, dtype=_ld_dtype(dtype), **kw)

    def identity(n, dtype=None, **kw):
        return np.identity(n, dtype=_ld_dtype(dtype), **kw)

    def _like(f):
        def g(a, *args, dtype=None, **kw):
            if dtype is not None:
                dtype = _ld_dtype(dtype)
            elif np.asarray(a).dtype.kind == "f":
                dtype = LD
            return f(a, *args, dtype=dtype, **kw)
        g.__name__ = f.__name__
        return g

    def _arr(f):
        def g(obj, dtype=None, **kw):
            out = f(obj, dtype=_ld_dtype(dtype, default_float=False), **kw)
            if dtype is None and out.dtype.kind == "f" and out.dtype != LD:
                out = out.astype(LD)
            return out
        g.__name__ = f.__name__
        return g

    def arange(*args, dtype=None, **kw):
        out = np.arange(*args, dtype=_ld_dtype(dtype, default_float=False), **kw)
        return out.astype(LD) if out.dtype.kind == "f" else out

    def linspace(start, stop, num=50, endpoint=True, dtype=None, **kw):
        return np.linspace(LD(start), LD(stop), num, endpoint=endpoint,
                           dtype=_ld_dtype(dtype), **kw)

    return dict(
        zeros=zeros, ones=ones, empty=empty, full=full, eye=eye, identity=identity,
        zeros_like=_like(np.zeros_like), ones_like=_like(np.ones_like),
        empty_like=_like(np.empty_like), full_like=_like(np.full_like),
        array=_arr(np.array), asarray=_arr(np.asarray), arange=arange, linspace=linspace,
        float64=LD, float32=LD, double=LD, single=LD, float_=LD,
        pi=_PI, e=np.exp(LD(1)),
    )


def _solve_ld(a, b):
    """``np.linalg.solve`` in extended precision (NumPy's LAPACK has no longdouble):
    Gaussian elimination with partial pivoting; ``b`` 1-D or 2-D."""
    a = np.array(a, dtype=LD)
    b = np.array(b, dtype=LD)
    n = a.shape[0]
    if a.ndim != 2 or a.shape[1] != n or b.shape[0] != n or b.ndim not in (1, 2):
        raise np.linalg.LinAlgError("solve: A must be square and b must match it")
    vec = b.ndim == 1
    x = b.reshape(n, -1).copy()
    for k in range(n):
        piv = k + int(np.argmax(np.abs(a[k:, k])))
        if a[piv, k] == 0:
            raise np.linalg.LinAlgError("Singular matrix")
        if piv != k:
            a[[k, piv]] = a[[piv, k]]
            x[[k, piv]] = x[[piv, k]]
        f = a[k + 1:, k] / a[k, k]
        a[k + 1:, k:] -= np.outer(f, a[k, k:])
        x[k + 1:] -= np.outer(f, x[k])
    for k in range(n - 1, -1, -1):
        x[k] = (x[k] - a[k, k + 1:] @ x[k + 1:]) / a[k, k]
    return x[:, 0] if vec else x


class _LinalgLD(types.ModuleType):
    """``numpy.linalg`` with ``solve`` in extended precision; everything else is NumPy's."""

    def __init__(self):
        super().__init__("numpy_linalg_longdouble")
        self.solve = _solve_ld

    def __getattr__(self, name):
        return getattr(np.linalg, name)


LINALG_LD = _LinalgLD()


class _NumpyLD(types.ModuleType):
    """``numpy`` with float array constructors producing ``np.longdouble`` and ``linalg``
    solving in ``np.longdouble``."""

    def __init__(self):
        super().__init__("numpy_longdouble")
        self.__dict__.update(_make_np_overrides())
        self.linalg = LINALG_LD

    def __getattr__(self, name):
        return getattr(np, name)


NP_LD = _NumpyLD()

# numpy callables that can be imported by name (``from numpy import zeros``)
_NP_BY_IDENTITY = {id(getattr(np, k)): v for k, v in _make_np_overrides().items()
                   if callable(getattr(np, k, None)) and not isinstance(getattr(np, k), type)}
_NP_BY_IDENTITY.update({id(np.float64): LD, id(np.float32): LD, id(np.linalg): LINALG_LD,
                        id(np.linalg.solve): _solve_ld})

_MATH_BY_IDENTITY = {id(getattr(math, k)): getattr(MATH_LD, k)
                     for k in vars(MATH_LD) if callable(getattr(math, k, None))}

_SYSTEM_TOPLEVEL = {
    "numpy", "numba", "math", "mpmath", "scipy", "sympy", "builtins", "llvmlite", "coarsen",
    "pytest", "_pytest", "hypothesis", "gast", "typing", "functools", "itertools",
    "collections", "operator", "types", "inspect", "sys", "os",
}


def _is_user_module_name(name):
    top = (name or "").split(".")[0]
    return top not in _SYSTEM_TOPLEVEL and not top.startswith("_")


def _is_dispatcher(v):
    return hasattr(v, "py_func") and type(v).__module__.startswith("numba")


def _all_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _all_names(c)
    return names


class _ModuleProxy(types.ModuleType):
    """A user module whose functions are seen through their extended-precision clones."""

    def __init__(self, mod, memo):
        super().__init__(mod.__name__ + "[longdouble]")
        object.__setattr__(self, "_mod", mod)
        object.__setattr__(self, "_memo", memo)

    def __getattr__(self, name):
        v = _transform(getattr(self._mod, name), self._memo)
        object.__setattr__(self, name, v)
        return v


def _transform(v, memo):
    if v is math:
        return MATH_LD
    if v is np:
        return NP_LD
    if v is np.linalg:
        return LINALG_LD
    if _is_dispatcher(v):
        return _clone(v.py_func, memo)
    if isinstance(v, types.FunctionType):
        if _is_user_module_name(getattr(v, "__module__", None)):
            return _clone(v, memo)
        return v
    if isinstance(v, types.ModuleType):
        if _is_user_module_name(v.__name__):
            key = ("mod", id(v))
            if key not in memo:
                memo[key] = _ModuleProxy(v, memo)
            return memo[key]
        return v
    try:
        if id(v) in _MATH_BY_IDENTITY and getattr(v, "__module__", None) == "math":
            return _MATH_BY_IDENTITY[id(v)]
        if id(v) in _NP_BY_IDENTITY:
            return _NP_BY_IDENTITY[id(v)]
    except TypeError:
        pass
    return v


def _ld_float(x=0.0):
    if isinstance(x, str):
        return LD(x)
    return LD(x)


def _clone(f, memo):
    """Clone plain function ``f`` so that it runs in extended precision (memoized)."""
    key = ("fn", id(f))
    if key in memo:
        return memo[key]
    src_globals = f.__globals__
    gkey = ("globals", id(src_globals))
    if gkey not in memo:
        memo[gkey] = dict(src_globals)
        memo[("keep", id(src_globals))] = src_globals  # keep alive while memo lives
    new_globals = memo[gkey]
    closure = None
    if f.__closure__ is not None:
        closure = tuple(types.CellType(_transform(c.cell_contents, memo))
                        if _cell_filled(c) else c for c in f.__closure__)
    new = types.FunctionType(f.__code__, new_globals, f.__name__, f.__defaults__, closure)
    new.__kwdefaults__ = f.__kwdefaults__
    new.__qualname__ = f.__qualname__ + "[longdouble]"
    memo[key] = new
    memo[("keepf", id(f))] = f
    for name in _all_names(f.__code__):
        if name in src_globals:
            new_globals[name] = _transform(src_globals[name], memo)
        elif name == "float" and name not in new_globals:
            new_globals["float"] = _ld_float
    return new


def _cell_filled(c):
    try:
        c.cell_contents
        return True
    except ValueError:
        return False


def extended(fn):
    """Return a clone of ``fn`` (a plain function or a numba dispatcher) that computes in
    ``np.longdouble`` when given longdouble arguments (see the module docstring)."""
    if _is_dispatcher(fn):
        fn = fn.py_func
    if not isinstance(fn, types.FunctionType):
        raise OracleError(f"the oracle needs a plain Python function, got {fn!r}")
    return _clone(fn, {})


def to_extended(a):
    """A fresh extended-precision copy of one argument (ints and bools unchanged)."""
    if isinstance(a, np.ndarray):
        if a.dtype.kind == "f":
            return a.astype(LD)
        return a.copy()
    if isinstance(a, (bool, np.bool_)):
        return a
    if isinstance(a, (float, np.floating)):
        return LD(a)
    return a


def _is_float_arg(a):
    if isinstance(a, np.ndarray):
        return a.dtype.kind == "f"
    if isinstance(a, (bool, np.bool_)):
        return False
    return isinstance(a, (float, np.floating))


def float_positions(args):
    """Positions of the float parameters (float scalars and float arrays), in order."""
    return [i for i, a in enumerate(args) if _is_float_arg(a)]


def _param_names(fn):
    if _is_dispatcher(fn):
        fn = fn.py_func
    return list(inspect.signature(fn).parameters)


def resolve_wrt(fn, args, wrt):
    """``wrt`` as coarsen's API reads it -> (positions, single).

    ``None``: all float parameters, a tuple comes back; a str/int: one parameter, a single value
    comes back; a tuple/list of names or positions: a tuple in that order.
    """
    names = _param_names(fn)

    def pos(w):
        if isinstance(w, str):
            return names.index(w)
        return int(w)

    if wrt is None:
        return float_positions(args), False
    if isinstance(wrt, (str, int)):
        return [pos(wrt)], True
    return [pos(w) for w in wrt], False


def _scalar_value(r):
    if isinstance(r, np.ndarray):
        if r.size != 1 or r.ndim != 0:
            raise OracleError(f"function returned a non-scalar array of shape {r.shape}")
        r = r[()]
    if isinstance(r, (bool, np.bool_)):
        raise OracleError("function returned a bool")
    return LD(r)


def fd_grad(fn, args, wrt_positions, *, rel_step=1e-3, conv_rtol=1e-9, smooth_rtol=1e-4,
            return_error=False):
    """Gradients of scalar ``fn(*args)`` w.r.t. ``args[p]`` for ``p`` in ``wrt_positions``.

    Returns a list with one entry per position: an ``np.longdouble`` scalar for a scalar
    parameter, a ``longdouble`` array of the parameter's shape for an array parameter.  With
    ``return_error=True`` returns ``(grads, error_estimates)`` (same structure).

    Raises :class:`OracleError` when, for some component, relative to
    ``max(|g|, 1e-4 * max|gradient|)``:

    * the error estimate of the first attempt (step h0) exceeds ``smooth_rtol``: the function
      is not smooth within h0 = rel_step * max(1, |x|) of the point (a branch, a kink or a
      trip count flips there), so the test input sits too close to a discontinuity; or
    * the one-sided slopes at the point differ as at a kink (:func:`_kink`) by more than
      ``conv_rtol``: the point sits on a kink that central differences cannot see (``abs(x)``
      at 0, whose central differences are 0 at every step); or
    * the best error estimate exceeds ``conv_rtol`` (1e-9, a tenth of the tests' rtol).
    """
    fx = extended(fn)
    base = [to_extended(a) for a in args]

    def evaluate(pos, idx, value):
        call = [to_extended(a) if isinstance(a, np.ndarray) else a for a in base]
        if idx is None:
            call[pos] = value
        else:
            call[pos][idx] = value
        return _scalar_value(fx(*call))

    grads, errs, firsts, kinks = [], [], [], []
    for p in wrt_positions:
        a = args[p]
        if not _is_float_arg(a):
            raise OracleError(f"argument {p} ({type(a).__name__}) is not a float parameter")
        if isinstance(a, np.ndarray):
            g = np.zeros(a.shape, dtype=LD)
            e = np.zeros(a.shape, dtype=LD)
            e0 = np.zeros(a.shape, dtype=LD)
            kk = np.zeros(a.shape, dtype=LD)
            for idx in np.ndindex(a.shape):
                g[idx], e[idx], e0[idx], kk[idx] = _richardson(lambda v: evaluate(p, idx, v),
                                                               base[p][idx], rel_step)
        else:
            g, e, e0, kk = _richardson(lambda v: evaluate(p, None, v), base[p], rel_step)
        grads.append(g)
        errs.append(e)
        firsts.append(e0)
        kinks.append(kk)

    for k, g in enumerate(grads):
        if not np.all(np.isfinite(g)):
            raise OracleError(f"finite differences: non-finite gradient for the parameter at "
                              f"position {wrt_positions[k]}: {g!r}")
    big = max([float(np.max(np.abs(g))) for g in grads] + [0.0])
    for k, (g, e, e0, kk) in enumerate(zip(grads, errs, firsts, kinks)):
        ref = np.maximum(np.abs(g), LD(1e-4) * LD(big))
        if big == 0.0:
            ref = LD(1e-4)
        for what, err, tol in (("is not smooth within the step of the point (a branch, kink "
                                "or trip count changes there: move the test input)", e0,
                                smooth_rtol),
                               ("sits on a kink (its one-sided slopes differ: move the test "
                                "input)", kk, conv_rtol),
                               ("did not converge", e, conv_rtol)):
            bad = np.asarray(err > LD(tol) * ref)
            if np.any(bad):
                raise OracleError(
                    f"finite differences: parameter at position {wrt_positions[k]} {what}. "
                    f"estimates={g!r}, error estimates={err!r}")
    if return_error:
        return grads, errs
    return grads


def _richardson_table(f, x0, h0, fx0=None):
    """Central differences at h0, h0/2, h0/4, h0/8, extrapolated to O(h^8).

    Returns (estimate, error estimate); the error estimate is |R3 - R2| (the distance between
    the two highest-order extrapolants, an upper estimate of R3's error on smooth functions).
    With ``fx0 = f(x0)`` it returns a third value, the kink measure (:func:`_kink`).
    """
    D, S = [], []
    for k in range(4):
        h = h0 / LD(2 ** k)
        xp, xm = x0 + h, x0 - h
        heff = (xp - xm) / 2
        fp, fm = f(xp), f(xm)
        D.append((fp - fm) / (2 * heff))
        if fx0 is not None:
            S.append(((fp + fm - 2 * fx0) / (2 * heff), max(abs(fp), abs(fm), abs(fx0)) / heff))
    R1 = [(4 * D[k + 1] - D[k]) / 3 for k in range(3)]
    R2 = [(16 * R1[k + 1] - R1[k]) / 15 for k in range(2)]
    R3 = (64 * R2[1] - R2[0]) / 63
    if fx0 is None:
        return R3, abs(R3 - R2[1])
    return R3, abs(R3 - R2[1]), _kink(S)


def _kink(S):
    """How far the one-sided slopes at the point differ, where they differ as a kink does.

    ``S[k] = (f(x0 + h) + f(x0 - h) - 2 f(x0)) / 2h`` at ``h = h0 / 2**k`` is half the forward
    slope minus the backward one.  On a smooth function it is ``h f''/2``, halving with ``h``;
    at a kink ``c |x - x0|`` it stays ``c``, which central differences never see (``f`` even
    about the point: ``abs(x)`` at 0 gives 0 at every step).  Returns ``|S|`` at the smallest
    step where it shrank by less than a quarter over the three halvings (``1/8`` on smooth
    functions) and stands clear of rounding (``1e4`` times ``eps |f| / h``); else 0.
    """
    small, big = S[-1][0], S[0][0]
    noise = LD(1e4) * np.finfo(LD).eps * S[-1][1]
    if abs(small) > noise and abs(small) > LD(0.25) * abs(big):
        return abs(small)
    return LD(0)


def _richardson(f, x0, rel_step):
    """Adaptive extrapolated central difference for one component.

    Tries h0 = rel_step * max(1, |x0|), then h0/10 and h0/100 while the error estimate is above
    1e-13 relative, and keeps the attempt with the smallest error estimate (a parameter whose
    natural scale is far below 1, like a time step of 0.01, needs the smaller steps).  Returns
    (estimate, error estimate, error estimate of the first attempt, kink measure); the last two
    detect points that sit within h0 of a discontinuity or kink, or on a kink (see ``fd_grad``).
    """
    x0 = LD(x0)
    h0 = LD(rel_step) * max(LD(1), abs(x0))
    r, e, kink = _richardson_table(f, x0, h0, f(x0))
    first_e = e
    best = (r, e)
    for shrink in (10, 100):
        if best[1] <= LD(1e-13) * abs(best[0]):
            break
        r, e = _richardson_table(f, x0, h0 / LD(shrink))
        if e < best[1]:
            best = (r, e)
    return best[0], best[1], first_e, kink


# --------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------

def tolerances_for(args):
    """(rtol, floor) for a case: float64 -> (1e-8, 1e-4).

    Any float32 argument -> (2e-5, 5e-2): a gradient computed from float32 values and rounded
    to float32 carries relative errors of a few float32 ulps (6e-8 each), so 1e-8 is
    impossible; 2e-5 still catches any wrong term.  The floor makes entries more than 20x
    smaller than the largest one be held to an absolute 1e-6 * max|expected| (~8 float32 ulps
    of the largest entry), the float32 counterpart of the float64 floor.
    """
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype == np.float32:
            return 2e-5, 5e-2
        if isinstance(a, np.float32):
            return 2e-5, 5e-2
    return 1e-8, 1e-4


def assert_grad_close(got, expected, rtol=1e-8, atol=0.0, floor=1e-4, err_msg=""):
    """Assert ``got`` matches ``expected`` (single values or sequences of them).

    Criterion per component: |got - expected| <= rtol * max(|expected|, scale) + atol with
    scale = floor * (max |expected| over all components of all gradients).  Shapes must match
    exactly (a scalar gradient must be a scalar).  See the module docstring.
    """
    single = not isinstance(expected, (list, tuple))
    if single:
        expected = [expected]
        got = [got]
    else:
        if not isinstance(got, (list, tuple)):
            raise AssertionError(f"{err_msg}: expected a sequence of {len(expected)} gradients,"
                                 f" got {type(got).__name__}")
    if len(got) != len(expected):
        raise AssertionError(f"{err_msg}: got {len(got)} gradients, expected {len(expected)}")
    exp_ld = [np.asarray(e, dtype=LD) for e in expected]
    for k, e in enumerate(exp_ld):
        if not np.all(np.isfinite(e)):
            raise AssertionError(f"{err_msg}: expected gradient {k} is not finite: {e!r}")
    big = max([float(np.max(np.abs(e))) if e.size else 0.0 for e in exp_ld] + [0.0])
    scale = LD(floor) * LD(big)
    problems = []
    for k, (g, e) in enumerate(zip(got, exp_ld)):
        if np.shape(g) != e.shape:
            problems.append(f"gradient {k}: shape {np.shape(g)} != expected {e.shape}")
            continue
        g_ld = np.asarray(g).astype(LD)
        if not np.all(np.isfinite(g_ld)):
            problems.append(f"gradient {k}: non-finite values {np.asarray(g)!r}")
            continue
        err = np.abs(g_ld - e)
        tol = LD(rtol) * np.maximum(np.abs(e), scale) + LD(atol)
        bad = err > tol
        if np.any(bad):
            idxs = list(zip(*np.nonzero(np.atleast_1d(bad))))[:6]
            gg, ee = np.atleast_1d(g_ld), np.atleast_1d(e)
            lines = [f"  [{','.join(map(str, i))}] got {float(gg[i]):.17g} expected "
                     f"{float(ee[i]):.17g} (abs err {float(abs(gg[i] - ee[i])):.3g})"
                     for i in idxs]
            problems.append(f"gradient {k}: {int(np.sum(bad))} of {bad.size} entries off "
                            f"(rtol={rtol}, scale={float(scale):.3g}):\n" + "\n".join(lines))
    if problems:
        raise AssertionError((err_msg + "\n" if err_msg else "") + "\n".join(problems))


def fd_directional(fn, args, wrt_positions, directions):
    """The derivatives of scalar ``fn(*args)`` along each direction, in extended precision.

    ``directions`` is a list of tuples, one array (or float) per position of
    ``wrt_positions``; returns one ``np.longdouble`` per direction: the extrapolated central
    difference of ``t -> fn(args + t * direction)`` at 0 (``_richardson``: step 1e-3, then
    smaller while the error estimate is above 1e-13 relative).  Where a function has too many
    inputs for ``fd_grad``'s one difference per component (matrices of BLAS size), a few random
    directions check every component at once: ``sum(grad * direction)`` must match.  Raises
    :class:`OracleError` where the estimate is not trustworthy (above 1e-9 relative).
    """
    fx = extended(fn)
    base = [to_extended(a) for a in args]
    out = []
    for direction in directions:
        dirs = {p: to_extended(d) if isinstance(d, np.ndarray) else LD(d)
                for p, d in zip(wrt_positions, direction)}

        def along(t):
            call = [to_extended(a) if isinstance(a, np.ndarray) else a for a in base]
            for p, d in dirs.items():
                call[p] = call[p] + t * d
            return _scalar_value(fx(*call))

        r, e, _, _ = _richardson(along, LD(0), 1e-3)
        if e > LD(1e-9) * max(abs(r), LD(1e-300)):
            raise OracleError(f"directional derivative not converged: {r} +- {e}")
        out.append(r)
    return out


# keep ``builtins`` referenced for readers: the clone's globals fall back to the real builtins
_ = builtins


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def check_against_oracle(fn, args, target="python", wrt=None, *, coarse=True):
    """Differentiate ``fn`` and check one call: the value against ``fn`` itself, the gradient
    (of ``value_and_grad`` and of the plain call) against ``fd_grad``, and the caller's arrays
    unchanged.  Returns ``(gradient object, value, gradient)``."""
    import coarsen
    g = coarsen.differentiate(fn, wrt, target=target, coarsen=coarse)
    before = _copies(args)
    value, grads = g.value_and_grad(*_copies(args))
    got = g(*args)
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b), "the caller's array was modified"
    ref = fn(*_copies(args))
    assert np.isclose(value, ref, rtol=1e-12, atol=0.0), (value, ref)
    pos, single = resolve_wrt(fn, args, wrt)
    exp = fd_grad(fn, _copies(args), pos)
    assert_grad_close(grads, exp[0] if single else exp, err_msg=fn.__name__)
    assert_grad_close(got, exp[0] if single else exp, err_msg=fn.__name__)
    return g, value, grads


def mp_partials(fn, args, positions, dps=50, step="1e-25"):
    """``(value, [d value / d args[i] for i in positions])`` of a scalar function of scalars,
    ``fn`` run on mpmath numbers at ``dps`` digits (a plain-Python recurrence keeps them), the
    partials by central differences with the relative ``step`` there."""
    import mpmath
    with mpmath.workdps(dps):
        base = [mpmath.mpf(a) if isinstance(a, float) else a for a in args]
        h = mpmath.mpf(step)
        out = []
        for i in positions:
            up, dn = list(base), list(base)
            up[i] += h * max(1, abs(base[i]))
            dn[i] -= h * max(1, abs(base[i]))
            out.append(float((fn(*up) - fn(*dn)) / (up[i] - dn[i])))
        return float(fn(*base)), out
