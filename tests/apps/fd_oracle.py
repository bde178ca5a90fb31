"""An independent gradient oracle: central differences with one Richardson extrapolation.

``D(h) = (f(x + h e) - f(x - h e)) / 2h`` has error ``c2 h^2 + c4 h^4 + ...``; the extrapolation
``(4 D(h/2) - D(h)) / 3`` cancels the ``h^2`` term.  With ``h = 1e-3 max(1, |x|)`` the truncation
error is about ``1e-12`` relative and the rounding error about ``1e-13 |f| / h``, so agreement to
``1e-6`` in ADBench's measure is a meaningful check.  Everything is evaluated in float64 by the
plain Python objective (no Numba, no coarsen).
"""
from __future__ import annotations

import inspect

import numpy as np


def wrt_positions(fn, wrt):
    names = list(inspect.signature(fn).parameters)
    return [names.index(w) for w in wrt]


def fd_grad(fn, args, wrt, rel_step=1e-3):
    """Richardson-extrapolated central differences of ``fn(*args)`` w.r.t. the named params.

    Returns a tuple in ``wrt`` order; scalar params give floats, array params arrays."""
    args = list(args)
    out = []
    for pos in wrt_positions(fn, wrt):
        base = args[pos]
        if np.ndim(base) == 0:
            x0 = float(base)

            def f_at(v, pos=pos):
                a = list(args)
                a[pos] = v
                return fn(*a)

            out.append(_deriv(f_at, x0, rel_step))
        else:
            arr = np.array(base, dtype=np.float64)
            g = np.zeros_like(arr)
            for idx in np.ndindex(arr.shape):
                def f_at(v, pos=pos, idx=idx):
                    a = list(args)
                    c = arr.copy()
                    c[idx] = v
                    a[pos] = c
                    return fn(*a)

                g[idx] = _deriv(f_at, float(arr[idx]), rel_step)
            out.append(g)
    return tuple(out)


def _deriv(f, x, rel_step):
    h = rel_step * max(1.0, abs(x))

    def central(h):
        return (f(x + h) - f(x - h)) / (2.0 * h)

    return (4.0 * central(h / 2.0) - central(h)) / 3.0
