"""``coarsen.scipy``: a coarsen-differentiated function as a SciPy objective (or residuals).

    obj = coarsen.scipy.objective(rosenbrock)             # x: the wrt parameters, flat
    scipy.optimize.minimize(obj.fun, x0, jac=obj.jac, hessp=obj.hessp, method="trust-ncg")
    res = coarsen.scipy.residuals(model_errors, args=(data,))
    scipy.optimize.least_squares(res.fun, x0, jac=res.jac)

Requires: a float-scalar function coarsen differentiates; SciPy only for the optimizers the
caller runs (this module imports nothing of it, nor any framework).
Guarantees:

* ``objective(fn, wrt=None, args=(), shapes=None, **options)`` builds
  ``coarsen.differentiate(fn, wrt, **options)`` at once and returns an ``Objective`` with
  ``fun(x)``, ``jac(x)``, ``hess(x)`` and ``hessp(x, p)``.  ``x`` is the ``wrt`` parameters
  raveled and concatenated in ``wrt`` order (float64).  The other parameters take ``args``, in
  the function's order; ``wrt=None`` means SciPy's convention ``fn(x..., *args)``: the first
  parameters are ``wrt``, the last ``len(args)`` take ``args``.
* Shapes: one ``wrt`` parameter takes ``x`` as it is (a 1-D array); several need ``shapes=``
  (one per parameter, ``()`` for a float), or ``obj.pack(*values)`` once, which sets them and
  returns the flat ``x0``.  ``obj.unpack(x)`` gives the values back.  A wrong size raises
  ``CoarsenError``.
* ``fun`` and ``jac`` at the same ``x`` (equal values) cost one coarsen call
  (``g.value_and_grad``; the last ``x``, its value and gradient are kept): ``obj.calls`` counts
  the gradient's calls.  ``jac`` returns a new float64 vector shaped like ``x``.
* ``hess(x)`` is the dense ``(n, n)`` Hessian by ``coarsen.hessian`` (its blocks in ``wrt``
  order), ``hessp(x, p)`` the Hessian-vector product by ``coarsen.hvp``, both on the same
  function (``differentiate``'s options ``target``, ``boundscheck`` and ``coarsen`` carried
  over).  Where ``coarsen.hvp`` or ``coarsen.hessian`` refuses the function, the
  ``CoarsenError`` says so at the first ``hess``/``hessp`` call.
* ``residuals(fn, wrt=None, args=(), shapes=None, target=, boundscheck=, coarsen=)``, for a
  function returning a float64 array (``least_squares``): the same ``x`` and ``args``;
  ``fun(x)`` the raveled residuals (the primal of ``coarsen.jvp``, compiled), ``jac(x)`` the
  ``(m, n)`` Jacobian by ``coarsen.jacobian`` (its blocks side by side in ``wrt`` order).
"""
from __future__ import annotations

import numpy as np

from .bridge import HVP_OPTIONS, Bridge, Layout
from .frontend.source import get_source, unwrap
from .transforms.artifact import check_wrt, function_error
from .transforms.hessian import hessian
from .transforms.jacobian import jacobian
from .transforms.jvp import jvp

__all__ = ["Objective", "Residuals", "objective", "residuals"]


def objective(fn, wrt=None, args=(), shapes=None, **options):
    """A SciPy objective of ``fn`` (see the module docstring)."""
    return Objective(fn, wrt, tuple(args), shapes, options)


def residuals(fn, wrt=None, args=(), shapes=None, **options):
    """``least_squares``' residuals of ``fn``, a function returning a float64 array (see the
    module docstring)."""
    return Residuals(fn, wrt, tuple(args), shapes, options)


class _Flat:
    """``x``, the ``wrt`` parameters raveled and concatenated, and the other parameters from
    ``args`` (see the module docstring); ``who`` names the bridge in errors."""

    who = "coarsen.scipy"

    def __init__(self, fn, wrt, args, shapes):
        self.fn = unwrap(fn)
        self.src = get_source(self.fn)
        params = tuple(a.id for a in self.src.node.args.args)
        if wrt is None:
            if len(args) >= len(params):
                raise self.error(f"args holds {len(args)} values, but {self.fn.__name__} has "
                                 f"{len(params)} parameters: none is left for x",
                                 "pass the parameters after the wrt ones in args")
            wrt = params[:len(params) - len(args)]
        check_wrt(wrt, list(params), self.fn.__name__)
        items = wrt if isinstance(wrt, (tuple, list)) else (wrt,)
        names = tuple(w if isinstance(w, str) else params[w] for w in items)
        rest = [p for p in params if p not in names]
        if len(rest) != len(args):
            raise self.error(f"args holds {len(args)} values for the {len(rest)} parameters "
                             f"outside wrt ({', '.join(rest) or 'none'})", "pass one value per "
                             "parameter outside wrt, in the function's order")
        self.params, self.names, self.args = params, names, args
        self._where = [names.index(p) if p in names else None for p in params]
        self._rest = dict(zip(rest, args))
        self.layout = None if shapes is None else self._layout(shapes)
        self._single = {}           # one wrt parameter without shapes: x's shape -> Layout

    def error(self, problem, hint):
        return function_error(self.src, f"{self.who}: {problem}", hint)

    def _layout(self, shapes):
        shapes = tuple(tuple(s) for s in shapes)
        if len(shapes) != len(self.names):
            raise self.error(f"{len(shapes)} shape(s) for {len(self.names)} wrt parameters "
                             f"({', '.join(self.names)})", "pass one shape per wrt parameter, "
                             "() for a float")
        return Layout(self.names, shapes)

    def pack(self, *values):
        """The flat ``x`` of the ``wrt`` values (in ``wrt`` order); sets the shapes."""
        if self.layout is None:
            self.layout = self._layout([np.shape(v) for v in values])
        elif len(values) != len(self.names):
            raise self.error(f"pack takes {len(self.names)} values, got {len(values)}",
                             f"pass the values of {', '.join(self.names)}")
        return self.layout.flatten(values)

    def unpack(self, x):
        """The ``wrt`` values of ``x``: floats for scalars, arrays shaped like the parameters."""
        layout = self.layout
        if layout is None:
            if len(self.names) != 1:
                raise self.error(
                    f"x holds {len(self.names)} wrt parameters ({', '.join(self.names)}) but "
                    "their shapes are not known", "pass shapes=, or call obj.pack(*values) "
                    "once for x0")
            layout = self._single.get(np.shape(x))
            if layout is None:
                layout = self._single[np.shape(x)] = Layout(self.names, (np.shape(x),))
        return layout.unflatten(x)

    def _values(self, x):
        parts = self.unpack(x)
        return tuple(parts[w] if w is not None else self._rest[p]
                     for p, w in zip(self.params, self._where))


class Residuals(_Flat):
    """``fun(x)`` (the residual vector, raveled) and ``jac(x)`` (its ``(m, n)`` Jacobian) for
    ``scipy.optimize.least_squares`` (see the module docstring)."""

    who = "coarsen.scipy.residuals"

    def __init__(self, fn, wrt, args, shapes, options):
        super().__init__(fn, wrt, args, shapes)
        opts = {k: options[k] for k in HVP_OPTIONS if k in options}
        self._jacobian = jacobian(self.fn, self.names, **opts)
        self._jvp = jvp(self.fn, self.names, **opts)

    def fun(self, x):
        """The residuals at ``x``, raveled (one compiled call: the JVP's primal)."""
        values = self._values(x)
        zeros = tuple(0.0 if np.ndim(v) == 0 else np.zeros(np.shape(v)) for v in self.unpack(x))
        value = self._jvp(*values, tangents=zeros)[0]
        return np.ravel(np.asarray(value, dtype=np.float64))

    def jac(self, x):
        """The ``(m, n)`` Jacobian at ``x``: rows the raveled residuals, columns ``x``."""
        blocks = self._jacobian(*self._values(x))
        sizes = [int(np.size(v)) for v in self.unpack(x)]
        m = int(np.size(blocks[0])) // sizes[0]
        return np.hstack([np.reshape(np.asarray(b, dtype=np.float64), (m, n))
                          for b, n in zip(blocks, sizes)])


class Objective(_Flat):
    """``fun``, ``jac``, ``hess`` and ``hessp`` of one function (see the module docstring)."""

    who = "coarsen.scipy.objective"

    def __init__(self, fn, wrt, args, shapes, options):
        super().__init__(fn, wrt, args, shapes)
        self.bridge = Bridge(self.fn, self.names, options, self.who)
        self._hessian = None
        self._hessian_options = {k: options[k] for k in HVP_OPTIONS if k in options}
        self._x = None
        self._value = self._grad = None
        self.calls = 0

    # ------------------------------------------------------------------ SciPy's callables
    def _evaluate(self, x):
        x = np.asarray(x, dtype=np.float64)
        if self._x is None or self._x.shape != x.shape or not (self._x == x).all():
            value, grads = self.bridge.value_and_grad(self._values(x))
            self.calls += 1
            self._x = x.copy()
            self._value = float(value)
            self._grad = np.concatenate([np.ravel(np.asarray(g, dtype=np.float64))
                                         for g in grads])
        return self._value, self._grad

    def fun(self, x):
        """The function's value at ``x``."""
        return self._evaluate(x)[0]

    def jac(self, x):
        """The gradient at ``x``, flat like ``x`` (a new array)."""
        return self._evaluate(x)[1].copy()

    def value_and_grad(self, x):
        """``(fun(x), jac(x))`` (``minimize(..., jac=True)``)."""
        value, grad = self._evaluate(x)
        return value, grad.copy()

    def hessp(self, x, p):
        """The Hessian at ``x`` times ``p`` (flat like ``x``)."""
        values = self._values(x)
        v = self.unpack(p)
        return np.concatenate([np.ravel(np.asarray(h, dtype=np.float64))
                               for h in self.bridge.hvp(values, v)])

    def hess(self, x):
        """The dense Hessian at ``x``: ``(n, n)``, its blocks in ``wrt`` order."""
        if self._hessian is None:
            self._hessian = hessian(self.fn, self.names, **self._hessian_options)
        values = self._values(x)
        blocks = self._hessian(*values)
        sizes = [int(np.size(v)) for v in self.unpack(x)]
        return np.block([[np.reshape(np.asarray(blocks[i][j], dtype=np.float64), (sizes[i], sizes[j]))
                          for j in range(len(sizes))] for i in range(len(sizes))])
